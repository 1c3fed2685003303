"""The one error type for bad user input, and how it is printed.

Every mistake in a YAML file, a trace, a CLI argument or a storage URL becomes a :class:`ConfigError` that names
the file, the key path inside it, the offending value and what is allowed. The CLI turns it into one line on
stderr and exit code 2 (see :func:`hydra_opt.cli.main.main`).
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

__all__ = ["ConfigError", "EXIT_USAGE", "EXIT_STORAGE"]

#: Exit code for every input error (the same code argparse uses).
EXIT_USAGE = 2
#: Exit code when the storage stayed unreachable past the retry bound (not an input error: re-run to resume).
EXIT_STORAGE = 3

_MAX_VALUE_CHARS = 60


class _BoundedRepr(reprlib.Repr):
    """``repr`` that stops early: a value parsed from a hostile file may be huge (an alias-bomb list shares its
    items 10^9 times) or an integer too long for ``str`` (Python refuses 4,300+ digits)."""

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:
            return f"<integer of about {int(x.bit_length() * 0.30103) + 1} digits>"
        return repr(x)


_REPR = _BoundedRepr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict, _REPR.maxset = 3, 6, 6, 6, 6
_REPR.maxstring, _REPR.maxother = _MAX_VALUE_CHARS, _MAX_VALUE_CHARS


def _short(value: Any) -> str:
    """A printable, bounded representation of a bad value (never a whole file; bounded time and memory)."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return repr(value)
    text = _REPR.repr(value) if not isinstance(value, str) else repr(value[: _MAX_VALUE_CHARS * 2])
    if len(text) > _MAX_VALUE_CHARS:
        text = text[: _MAX_VALUE_CHARS - 3] + "..."
    return text.replace("\n", "\\n")


def _printable(text: str) -> str:
    """``text`` on one line: non-printable characters (a key or file name holding a newline, an escape sequence, a
    C1 control such as U+0085 NEL or U+009B CSI, or a line/paragraph separator U+2028/U+2029 — all line breaks or
    terminal controls somewhere) are shown escaped, so the error stays one line and cannot rewrite the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class ConfigError(ValueError):
    """A user-input error located at ``file: key: value problem``.

    Args:
        message: What is wrong and what is allowed, e.g. ``"is not a positive number"``.
        file: The file (or ``"<cli>"`` / ``"<storage>"``) the value came from.
        key: Dotted key path inside the file, with ``[i]`` for list items.
        value: The offending value; omitted from the message when ``None`` and ``show_value`` is False.
        show_value: Whether to print the value (False for secrets).
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        key: str | None = None,
        value: Any = None,
        show_value: bool = True,
    ) -> None:
        self.problem = message
        self.file = file
        self.key = key
        self.value = value
        self.show_value = show_value and value is not None
        super().__init__(self.format())

    def format(self) -> str:
        """The one-line message, ``file: key: value problem``."""
        parts = []
        if self.file:
            parts.append(str(self.file))
        if self.key:
            parts.append(self.key)
        head = ": ".join(parts)
        body = f"{_short(self.value)} {self.problem}" if self.show_value else self.problem
        return _printable(f"{head}: {body}" if head else body)

    def located(self, *, file: str | None = None, prefix: str | None = None) -> ConfigError:
        """A copy with the file set (if missing) and the key path prefixed."""
        key = self.key
        if prefix:
            key = f"{prefix}.{key}" if key and not key.startswith("[") else f"{prefix}{key or ''}"
        return ConfigError(
            self.problem,
            file=self.file or file,
            key=key,
            value=self.value,
            show_value=self.show_value,
        )
