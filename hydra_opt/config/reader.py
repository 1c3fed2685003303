"""Typed, path-tracking access to parsed YAML mappings.

A :class:`Node` wraps one mapping/list/scalar together with the file it came from and its key path, so every
check can raise a :class:`~hydra_opt.config.errors.ConfigError` that says exactly where the mistake is. Unknown
keys are errors: call :meth:`Node.done` after reading a mapping.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from hydra_opt.config.errors import ConfigError

__all__ = ["Node", "load_yaml", "read_input_bytes", "MISSING"]

MISSING: Any = object()

#: Largest accepted file, to refuse a mistaken path to a huge binary.
MAX_YAML_BYTES = 4 * 1024 * 1024
#: Largest accepted magnitude of any number (beyond it a typo is likelier than intent).
MAX_ABS_NUMBER = 1e18
#: Deepest accepted nesting of lists/mappings (PyYAML composes recursively: 50k levels overflow the stack).
MAX_YAML_DEPTH = 64
#: Most nodes a document may expand to, aliases counted at every use (an 800-byte "billion laughs" alias chain
#: expands to 10^9 nodes; the largest real config file has a few thousand).
MAX_YAML_NODES = 200_000
#: Longest integer literal accepted (Python refuses to convert more than 4,300 digits; no setting needs 40).
MAX_INT_DIGITS = 40


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys (a silent overwrite hides typos), and documents nested deeper than
    :data:`MAX_YAML_DEPTH`, expanding to more than :data:`MAX_YAML_NODES` nodes or holding integers longer than
    :data:`MAX_INT_DIGITS` digits — all checked on the node graph, before any value is built."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _LimitError(None, None, f"is nested deeper than {MAX_YAML_DEPTH} levels",
                                                  self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_document(self, node: yaml.Node) -> Any:
        _check_expansion(node)
        return super().construct_document(node)


class _LimitError(yaml.constructor.ConstructorError):
    """A document beyond a size limit (well-formed YAML, refused)."""


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a node graph whose tree (every alias use expanded) exceeds :data:`MAX_YAML_NODES` nodes."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:  # depth is bounded by MAX_YAML_DEPTH: recursion is safe
        if id(node) in sizes:
            return sizes[id(node)]
        n = 1
        if isinstance(node, yaml.SequenceNode):
            n += sum(size(c) for c in node.value)
        elif isinstance(node, yaml.MappingNode):
            n += sum(size(k) + size(v) for k, v in node.value)
        sizes[id(node)] = n = min(n, MAX_YAML_NODES + 1)
        return n

    if size(root) > MAX_YAML_NODES:
        raise _LimitError(
            None, None, f"expands to more than {MAX_YAML_NODES:,} values (aliases counted at every use)",
            root.start_mark)


def _construct_int(loader: _UniqueKeyLoader, node: yaml.ScalarNode) -> int:
    digits = sum(c.isalnum() for c in str(node.value))
    if digits > MAX_INT_DIGITS:
        raise _LimitError(
            None, None, f"has an integer of {digits} digits (at most {MAX_INT_DIGITS})", node.start_mark)
    return yaml.SafeLoader.construct_yaml_int(loader, node)


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    mapping: dict = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in mapping:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        mapping[key] = loader.construct_object(value_node, deep=deep)
    return mapping


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def read_input_bytes(path: Path, name: str, max_bytes: int) -> bytes:
    """The bytes of a user-given input file, refusing a missing path, a non-file or one over ``max_bytes``.

    Args:
        path: The file to read.
        name: How to name the file in messages.
        max_bytes: Largest accepted size (a mistaken path to a huge binary is refused before reading).
    """
    if not path.exists():
        raise ConfigError("does not exist", file=name)
    if not path.is_file():
        raise ConfigError("is not a regular file", file=name)
    size = path.stat().st_size
    if size > max_bytes:
        raise ConfigError(f"is {size} bytes; at most {max_bytes} allowed", file=name)
    return path.read_bytes()


def load_yaml(path: str | os.PathLike[str], *, display: str | None = None) -> Node:
    """Read a YAML file into a :class:`Node`, with clear errors for unreadable or malformed files.

    Args:
        path: The file to read.
        display: How to name the file in messages (default: the path as given).
    """
    name = display or str(path)
    raw = read_input_bytes(Path(path), name, MAX_YAML_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"is not UTF-8 text (byte {exc.start})", file=name) from None
    if "\x00" in text:
        raise ConfigError("contains a NUL byte; not a YAML text file", file=name)
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        what = "is refused" if isinstance(exc, _LimitError) else "is not valid YAML"
        raise ConfigError(f"{what}{where}: {problem}", file=name) from None
    if data is None:
        raise ConfigError("is empty; expected a mapping", file=name)
    return Node(data, file=name, key="")


class Node:
    """One value of a parsed configuration file, with its location.

    Args:
        data: The parsed value.
        file: File name for messages.
        key: Key path of this value inside the file ("" for the root).
    """

    def __init__(self, data: Any, *, file: str, key: str = "") -> None:
        self.data = data
        self.file = file
        self.key = key
        self._seen: set[str] = set()

    # -- errors ---------------------------------------------------------------------------------------------
    def error(self, message: str, *, value: Any = MISSING, key: str | None = None) -> ConfigError:
        """A :class:`ConfigError` located at this node (or at ``key`` below it)."""
        path = self.key if key is None else self._child_key(key)
        val = self.data if value is MISSING else value
        return ConfigError(message, file=self.file, key=path or None, value=val, show_value=value is not MISSING or key is None)

    def _child_key(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.key}[{key}]"
        return f"{self.key}.{key}" if self.key else str(key)

    # -- structure ------------------------------------------------------------------------------------------
    def mapping(self) -> Node:
        """Assert this node is a mapping with string keys; returns self."""
        if not isinstance(self.data, dict):
            raise ConfigError(
                f"must be a mapping, got {type(self.data).__name__}", file=self.file, key=self.key or None
            )
        for k in self.data:
            if not isinstance(k, str):
                raise ConfigError("keys must be strings", file=self.file, key=self.key or None, value=k)
        return self

    def has(self, key: str) -> bool:
        """Whether the mapping has ``key`` (marks it seen)."""
        self.mapping()
        if key in self.data:
            self._seen.add(key)
            return True
        return False

    def get(self, key: str, default: Any = MISSING) -> Node:
        """The child node at ``key``; a required key when ``default`` is not given."""
        self.mapping()
        self._seen.add(key)
        if key not in self.data or self.data[key] is None:
            if default is MISSING:
                raise ConfigError("is required", file=self.file, key=self._child_key(key))
            return Node(default, file=self.file, key=self._child_key(key))
        return Node(self.data[key], file=self.file, key=self._child_key(key))

    def items(self) -> Iterator[tuple[str, Node]]:
        """(key, child) pairs of a mapping, all marked seen."""
        self.mapping()
        for k, v in self.data.items():
            self._seen.add(k)
            yield k, Node(v, file=self.file, key=self._child_key(k))

    def list(self, *, min_len: int = 0, max_len: int | None = None) -> list[Node]:
        """The items of a list (a scalar is refused)."""
        if not isinstance(self.data, list):
            raise self.error(f"must be a list, got {type(self.data).__name__}")
        n = len(self.data)
        if n < min_len:
            raise self.error(f"must have at least {min_len} item(s)")
        if max_len is not None and n > max_len:
            raise self.error(f"must have at most {max_len} item(s), got {n}", value=f"<{n} items>")
        return [Node(v, file=self.file, key=self._child_key(i)) for i, v in enumerate(self.data)]

    def done(self, allowed: Sequence[str] | None = None) -> None:
        """Raise for any key of this mapping that was not read (unknown keys are errors)."""
        self.mapping()
        unknown = [k for k in self.data if k not in self._seen]
        if unknown:
            known = sorted(allowed) if allowed is not None else sorted(self._seen)
            raise ConfigError(
                f"is not a known key; allowed: {', '.join(known)}",
                file=self.file,
                key=self._child_key(unknown[0]),
            )

    # -- scalars --------------------------------------------------------------------------------------------
    def str(self, *, choices: Sequence[str] | None = None, max_len: int = 256) -> str:
        """A string, optionally one of ``choices``."""
        if not isinstance(self.data, str):
            raise self.error(f"must be a string{_choices(choices)}")
        if len(self.data) > max_len:
            raise self.error(f"is longer than {max_len} characters")
        if choices is not None and self.data not in choices:
            raise self.error(f"is not one of: {', '.join(choices)}")
        return self.data

    def bool(self) -> bool:
        """A boolean (``true``/``false``)."""
        if not isinstance(self.data, bool):
            raise self.error("must be true or false")
        return self.data

    def number(
        self,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        positive: bool = False,
        exclusive_min: bool = False,
    ) -> float:
        """A finite real number within bounds."""
        v = self.data
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.error("is not a number")
        v = float(v)
        if math.isnan(v) or math.isinf(v):
            raise self.error("is not a finite number")
        if abs(v) > MAX_ABS_NUMBER:
            raise self.error(f"is too large (|x| must be <= {MAX_ABS_NUMBER:g})")
        if positive and v <= 0:
            raise self.error("is not a positive number")
        if minimum is not None and (v < minimum or (exclusive_min and v == minimum)):
            raise self.error(f"must be {'>' if exclusive_min else '>='} {minimum:g}")
        if maximum is not None and v > maximum:
            raise self.error(f"must be <= {maximum:g}")
        return v

    def int(self, *, minimum: int | None = None, maximum: int | None = None) -> int:
        """An integer within bounds (a float like ``2.0`` is refused: likely a typo)."""
        v = self.data
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error("is not an integer")
        if abs(v) > MAX_ABS_NUMBER:
            raise self.error(f"is too large (|x| must be <= {MAX_ABS_NUMBER:g})")
        if minimum is not None and v < minimum:
            raise self.error(f"must be >= {minimum}")
        if maximum is not None and v > maximum:
            raise self.error(f"must be <= {maximum}")
        return v

    def path(self, *, base: str | os.PathLike[str] | None = None, must_exist: bool = False) -> Path:
        """A filesystem path, resolved against ``base`` (the YAML file's folder by default)."""
        s = self.str(max_len=4096)
        if "\x00" in s:
            raise self.error("contains a NUL byte")
        p = Path(os.path.expanduser(s))
        if not p.is_absolute():
            root = Path(base) if base is not None else Path(self.file).parent
            p = root / p
        if must_exist and not p.exists():
            raise self.error("does not exist")
        return p


def _choices(choices: Sequence[str] | None) -> str:
    return f" (one of: {', '.join(choices)})" if choices else ""
