"""The grammar of a search space: a ``search_spaces/*.yaml`` file → its dimensions, counted and enumerated.

A search space has three kinds of dimensions:

* the **composition**: how many chiplets of each compute type and how many memory chiplets fill the package's
  ``slots`` (HYDRA Table III: Σ compute + Σ memory = 24, every listed type ≥ 1). A dynamic-programming
  reachability table (:class:`Composition`) says which counts of a part still let the remaining parts reach the
  slot total exactly, so steps such as "even memory counts" or explicit value lists are supported, compositions
  are counted without enumeration, and a sampler can draw them conditionally without wasting a trial;
* **scalar dimensions** (D2D bandwidth, batch cap, memory type, placement/batching/scheduler policies): a fixed
  value, a list of choices, or an integer range;
* **DynaCore dimensions** (``dynacore:`` mapping): the same three forms, passed through to the design's
  ``dynacore`` settings.

A point of the space is a plain *design dict* in the ``DesignPoint`` YAML form (``hydra_opt.system.design``;
:meth:`SpaceSpec.design`). How a study draws points — Optuna parameters and the composition encodings of
:data:`ENCODINGS` — is ``hydra_opt.dse.search_space``; this module knows no sampler.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hydra_opt.config import ConfigError, Node
from hydra_opt.system.policies import POLICY_CHOICES

__all__ = [
    "Part",
    "ScalarDim",
    "Composition",
    "SpaceSpec",
    "parse_space_spec",
    "ENCODINGS",
    "design_key",
]

#: Composition encodings a study may use (``hydra_opt.dse.search_space``).
ENCODINGS: tuple[str, ...] = ("conditional", "stick_breaking", "enumerated")

#: Largest slot count accepted (a typo guard: reachability tables are slots × parts).
MAX_SLOTS = 4096
#: Largest number of values one part may take.
MAX_PART_VALUES = 4096

#: Scalar design keys a search space may set, with the type of their values.
_SCALAR_KEYS: dict[str, type] = {
    "d2d_bw_gbps": float,
    "max_batch": int,
    "memory": str,
    "placement": str,
    "batching": str,
    "scheduler": str,
    "precision": str,
}

_PACKAGE_KEYS = ("grid_w", "grid_h", "slot_area_mm2")


def design_key(design: Mapping[str, Any]) -> str:
    """A short stable hash of a design dict (identical designs share it; studies and sweeps key trials by it)."""
    return hashlib.sha256(json.dumps(design, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Part:
    """One part of the composition: a chiplet type (or the memory) and the counts it may take.

    Attributes:
        name: Chiplet library name (``"tscs_p"``) or ``"mem"`` for the memory chiplets.
        values: Allowed counts, ascending.
    """

    name: str
    values: tuple[int, ...]

    @property
    def param(self) -> str:
        """Parameter name of the count (``n_mem``, ``n_<chiplet>``)."""
        return "n_mem" if self.name == "mem" else f"n_{self.name}"


@dataclass(frozen=True)
class ScalarDim:
    """A non-composition dimension: fixed (one value), a choice list, or an integer range.

    Attributes:
        name: Design key (``"max_batch"``) or ``"dynacore.<key>"``.
        values: The allowed values (one value = fixed), in the order given.
    """

    name: str
    values: tuple[Any, ...]

    @property
    def fixed(self) -> bool:
        """True when there is nothing to choose."""
        return len(self.values) == 1

    @property
    def param(self) -> str:
        """Parameter name (``dynacore.<key>`` → ``dc_<key>``)."""
        return self.name.replace("dynacore.", "dc_")

    def _arithmetic(self) -> tuple[Any, Any, Any] | None:
        """(low, high, step) when the values are numbers in an ascending arithmetic progression, else None."""
        v = self.values
        if len(v) < 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            return None
        step = v[1] - v[0]
        if step <= 0 or any(not math.isclose(b - a, step, rel_tol=0, abs_tol=1e-9) for a, b in zip(v, v[1:])):
            return None
        return v[0], v[-1], step

    def int_range(self) -> tuple[int, int, int] | None:
        """(low, high, step) when the values are ints in an ascending arithmetic progression (drawn with
        an integer parameter), else None (drawn as a categorical of :meth:`labels`)."""
        ap = self._arithmetic()
        return ap if ap is not None and all(isinstance(x, int) for x in self.values) else None

    def labels(self) -> list[Any]:
        """Categorical choices: the values, with tuples (e.g. an (m, n, t) shape) shown as ``"4x4x4"``."""
        return [("x".join(map(str, v)) if isinstance(v, tuple) else v) for v in self.values]


@dataclass(frozen=True)
class Composition:
    """Counts of the parts that must sum to ``slots`` exactly.

    Attributes:
        slots: Total number of chiplets (compute + memory).
        parts: The parts in sampling order (memory first, then compute types in file order).
    """

    slots: int
    parts: tuple[Part, ...]
    _reach: tuple[frozenset[int], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # reach[i] = the totals parts i.. can sum to exactly (reach[len] = {0}).
        reach: list[frozenset[int]] = [frozenset({0})]
        for part in reversed(self.parts):
            nxt = reach[0]
            reach.insert(0, frozenset(v + r for v in part.values for r in nxt if v + r <= self.slots))
        object.__setattr__(self, "_reach", tuple(reach))

    @property
    def feasible(self) -> bool:
        """Whether at least one composition exists."""
        return self.slots in self._reach[0]

    def choices(self, index: int, remaining: int) -> tuple[int, ...]:
        """Counts part ``index`` may take when ``remaining`` slots are left, keeping an exact completion possible."""
        rest = self._reach[index + 1]
        return tuple(v for v in self.parts[index].values if remaining - v in rest)

    def count(self) -> int:
        """Number of compositions (dynamic programming; no enumeration)."""
        ways: dict[int, int] = {0: 1}
        for part in reversed(self.parts):
            nxt: dict[int, int] = {}
            for v in part.values:
                for r, w in ways.items():
                    if v + r <= self.slots:
                        nxt[v + r] = nxt.get(v + r, 0) + w
            ways = nxt
        return ways.get(self.slots, 0)

    def enumerate(self) -> Iterator[tuple[int, ...]]:
        """All compositions in lexicographic order of the parts' counts."""

        def rec(i: int, remaining: int, prefix: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
            if i == len(self.parts) - 1:
                if remaining in self.parts[i].values:
                    yield (*prefix, remaining)
                return
            for v in self.choices(i, remaining):
                yield from rec(i + 1, remaining - v, (*prefix, v))

        if self.feasible:
            yield from rec(0, self.slots, ())

    def table(self) -> tuple[tuple[int, ...], ...]:
        """All compositions (:meth:`enumerate`), computed once."""
        cached = getattr(self, "_table_cache", None)
        if cached is None:
            cached = tuple(self.enumerate())
            object.__setattr__(self, "_table_cache", cached)
        return cached


@dataclass(frozen=True)
class SpaceSpec:
    """A parsed search space (its grammar; ``hydra_opt.dse.search_space.SearchSpace`` adds Optuna parameters).

    Attributes:
        name: Space name.
        file: The YAML file it came from (for messages).
        composition: The chiplet composition, or None when counts are fixed via ``fixed_counts``.
        scalars: The non-composition dimensions (including ``dynacore.*``).
        encoding: Composition encoding (one of :data:`ENCODINGS`).
        package: Fixed package geometry keys passed to the design (``grid_w``, ``grid_h``, ``slot_area_mm2``).
        description: Free text.
        encoding_explicit: Whether the file chose the encoding (else a study may pick one for its sampler).

    ``encoding`` is how a study turns the composition into parameters (``hydra_opt.dse.search_space``).
    """

    name: str
    file: str
    composition: Composition
    scalars: tuple[ScalarDim, ...]
    encoding: str = "conditional"
    package: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    encoding_explicit: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, file: str = "<search_space>") -> SpaceSpec:
        """A search space from a mapping in the ``search_spaces/*.yaml`` schema (``kind`` may be omitted).

        Args:
            data: The mapping (``docs/dse.md``).
            file: Name used in error messages.

        Raises:
            ConfigError: The mapping is invalid (the message names the key and what is allowed).
        """
        return parse_space_spec(Node({"kind": "search_space", **data}, file=file), cls=cls)

    def design(self, counts: Sequence[int], values: Mapping[str, Any]) -> dict[str, Any]:
        """The design dict in ``DesignPoint`` YAML form (``kind: design``; see ``hydra_opt.system.design``)."""
        design: dict[str, Any] = {}
        comp: dict[str, int] = {}
        n_mem = 0
        for part, n in zip(self.composition.parts, counts):
            if part.name == "mem":
                n_mem = int(n)
            else:
                comp[part.name] = int(n)
        design["chiplets"] = dict(sorted(comp.items()))
        design["n_mem"] = n_mem
        dyn: dict[str, Any] = {}
        for key, v in values.items():
            v = list(v) if isinstance(v, tuple) else v
            if key.startswith("dynacore."):
                dyn[key.split(".", 1)[1]] = v
            else:
                design[key] = v
        if "meu" in dyn:
            # One dimension for the MEU: "adaptive" (shape chosen per batch) or a fixed (m, n, t) shape.
            meu = dyn.pop("meu")
            if meu == "adaptive":
                dyn["meu_policy"] = "adaptive"
            else:
                dyn["meu_policy"], dyn["meu_shape"] = "fixed", list(meu)
        if self.package:
            design["package"] = dict(self.package)
        if dyn:
            design["dynacore"] = dyn
        return design

    # -- counts and enumeration ---------------------------------------------------------------------------
    def size(self) -> int:
        """Number of designs in the space (compositions × scalar choices)."""
        n = self.composition.count()
        for d in self.scalars:
            n *= len(d.values)
        return n

    def enumerate(self) -> Iterator[dict[str, Any]]:
        """Every design dict, compositions outermost, in a deterministic order."""
        names = [d.name for d in self.scalars]
        for counts in self.composition.enumerate():
            for combo in itertools.product(*(d.values for d in self.scalars)):
                yield self.design(counts, dict(zip(names, combo)))

    def with_encoding(self, encoding: str) -> SpaceSpec:
        """A copy using another composition encoding."""
        if encoding not in ENCODINGS:
            raise ConfigError(f"is not one of: {', '.join(ENCODINGS)}", key="composition.encoding", value=encoding)
        return replace(self, encoding=encoding)


# -- parsing ---------------------------------------------------------------------------------------------------
def _int_values(node: Node, *, minimum: int, maximum: int) -> tuple[int, ...]:
    """Counts from ``N`` (fixed), ``[a, b, ...]`` or ``{min, max, step}``."""
    data = node.data
    if isinstance(data, list):
        vals = sorted({n.int(minimum=minimum, maximum=maximum) for n in node.list(min_len=1, max_len=MAX_PART_VALUES)})
        return tuple(vals)
    if isinstance(data, dict):
        lo = node.get("min").int(minimum=minimum, maximum=maximum)
        hi = node.get("max").int(minimum=minimum, maximum=maximum)
        step = node.get("step", 1).int(minimum=1, maximum=MAX_SLOTS)
        node.done(["min", "max", "step"])
        if hi < lo:
            raise node.error(f"max ({hi}) is smaller than min ({lo})", value=hi, key="max")
        return tuple(range(lo, hi + 1, step))
    return (node.int(minimum=minimum, maximum=maximum),)


def _scalar_values(node: Node, kind: type, choices: Sequence[str] | None = None) -> tuple[Any, ...]:
    """A fixed value, a list of values, or ``{min, max, step}`` for integers."""

    def one(n: Node) -> Any:
        if kind is int:
            return n.int(minimum=1)
        if kind is float:
            v = n.number(positive=True)
            return int(v) if float(v).is_integer() else v
        if kind is str:
            return n.str(choices=choices)
        return _any_scalar(n)

    if isinstance(node.data, list):
        vals = [one(n) for n in node.list(min_len=1, max_len=MAX_PART_VALUES)]
        if len(set(map(repr, vals))) != len(vals):
            raise node.error("has duplicate values")
        return tuple(vals)
    if isinstance(node.data, dict) and kind in (int, object):
        lo = node.get("min").int()
        hi = node.get("max").int()
        step = node.get("step", 1).int(minimum=1)
        node.done(["min", "max", "step"])
        if hi < lo:
            raise node.error(f"max ({hi}) is smaller than min ({lo})", value=hi, key="max")
        if (hi - lo) // step + 1 > MAX_PART_VALUES:
            raise node.error(f"has more than {MAX_PART_VALUES} values", value=f"{lo}..{hi}")
        return tuple(range(lo, hi + 1, step))
    return (one(node),)


def _any_scalar(node: Node) -> Any:
    v = node.data
    if isinstance(v, bool) or isinstance(v, str):
        return node.str() if isinstance(v, str) else v
    if isinstance(v, int):
        return node.int()
    if isinstance(v, float):
        return node.number()
    if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return tuple(n.int() for n in node.list(min_len=1, max_len=16))
    raise node.error("must be a number, a string, true/false or a list of integers")


def _check_meu_shapes(dnode: Node, values: Mapping[str, tuple[Any, ...]]) -> None:
    """Reject fixed MEU shapes the DynaCore core cannot realise (they would only produce infeasible trials).

    A ``meu`` value is ``adaptive`` or an ``(m, n, t)`` list; ``meu_shape`` values are lists. Every listed shape must
    be reachable on every listed ``core_size`` (default 32, as ``DynaCoreSettings``): ``m·n·t = S²``, powers of
    two, ``t | S/m`` (DynaCore Secs. 4-5, ``hydra_opt.hardware.dynacore.core.reachable_meus``).
    """
    keys = [k for k in ("meu", "meu_shape") if f"dynacore.{k}" in values]
    if not keys:
        return
    from hydra_opt.hardware.dynacore.core import MEU, reachable_meus

    sizes = values.get("dynacore.core_size", (32,))
    reachable: dict[Any, tuple[MEU, ...]] = {}
    for i, size in enumerate(sizes):
        where = f"core_size[{i}]" if isinstance(dnode.data.get("core_size"), list) else "core_size"
        try:
            reachable[size] = reachable_meus(size) if isinstance(size, int) and not isinstance(size, bool) else ()
        except ConfigError as exc:
            raise dnode.error(exc.problem, value=size, key=where) from None
        if not reachable[size]:
            raise dnode.error("is not a power-of-two integer", value=size, key=where)
    for key in keys:
        as_list = isinstance(dnode.data.get(key), list)  # a list is a list of choices (_scalar_values)
        for i, v in enumerate(values[f"dynacore.{key}"]):
            where = f"{key}[{i}]" if as_list else key
            if key == "meu" and v == "adaptive":
                continue
            shape = tuple(v) if isinstance(v, tuple) else None
            for size, meus in reachable.items():
                if shape is None or len(shape) != 3 or MEU(*shape) not in meus:
                    allowed = ", ".join(f"[{u.m}, {u.n}, {u.t}]" for u in meus)
                    head = "adaptive or " if key == "meu" else ""
                    raise dnode.error(
                        f"is not a reachable (m, n, t) shape of a {size}x{size} DynaCore core (m*n*t = {size * size}, "
                        f"powers of two, t divides {size}/m); allowed: {head}{allowed}",
                        value=list(v) if isinstance(v, tuple) else v,
                        key=where,
                    )


def parse_space_spec(root: Node, *, cls: type[SpaceSpec] | None = None) -> SpaceSpec:
    """Validate a parsed search-space document (see ``docs/dse.md`` for the schema) into ``cls`` (default
    :class:`SpaceSpec`; ``hydra_opt.dse`` passes its ``SearchSpace``)."""
    root.mapping()
    kind = root.get("kind", "search_space").str()
    if kind != "search_space":
        raise root.error("must be 'search_space'", value=kind, key="kind")
    name = root.get("name").str(max_len=128)
    description = root.get("description", "").str(max_len=4096)
    slots = root.get("slots").int(minimum=2, maximum=MAX_SLOTS)

    encoding_explicit = root.has("composition") and "encoding" in (root.data.get("composition") or {})
    comp_node = root.get("composition", {}).mapping()
    encoding = comp_node.get("encoding", "conditional").str(choices=ENCODINGS)
    comp_node.done(["encoding"])

    chip_node = root.get("chiplets").mapping()
    parts: list[Part] = []
    mem_node = root.get("memory").mapping()
    mem_type = _scalar_values(mem_node.get("type", "hbm3"), str)
    mem_counts = _int_values(mem_node.get("count"), minimum=1, maximum=slots)
    mem_node.done(["type", "count"])
    parts.append(Part("mem", mem_counts))
    if not chip_node.data:
        raise chip_node.error("must name at least one compute chiplet type")
    for cname, cnode in chip_node.items():
        if not cname.replace("_", "").isalnum():
            raise ConfigError("is not a valid chiplet name", file=root.file, key=cnode.key)
        parts.append(Part(cname, _int_values(cnode, minimum=0, maximum=slots)))
    composition = Composition(slots, tuple(parts))
    if not composition.feasible:
        raise ConfigError(
            f"no composition of the listed counts sums to {slots} slots",
            file=root.file,
            key="slots",
            value=slots,
        )

    scalars: list[ScalarDim] = [ScalarDim("memory", mem_type)]
    for key, kind_t in _SCALAR_KEYS.items():
        if key == "memory":
            continue
        if root.has(key):
            scalars.append(ScalarDim(key, _scalar_values(root.get(key), kind_t, POLICY_CHOICES.get(key))))
    if root.has("dynacore"):
        dnode = root.get("dynacore").mapping()
        for dkey, dval in dnode.items():
            scalars.append(ScalarDim(f"dynacore.{dkey}", _scalar_values(dval, object)))
        _check_meu_shapes(dnode, {d.name: d.values for d in scalars})

    package: dict[str, Any] = {}
    if root.has("package"):
        pnode = root.get("package").mapping()
        if pnode.has("grid_w"):
            package["grid_w"] = pnode.get("grid_w").int(minimum=1, maximum=256)
        if pnode.has("grid_h"):
            package["grid_h"] = pnode.get("grid_h").int(minimum=1, maximum=256)
        if pnode.has("slot_area_mm2"):
            package["slot_area_mm2"] = pnode.get("slot_area_mm2").number(positive=True, maximum=1e6)
        pnode.done(list(_PACKAGE_KEYS))
        if "grid_w" in package and "grid_h" in package and package["grid_w"] * package["grid_h"] < slots:
            raise ConfigError(
                f"has {package['grid_w'] * package['grid_h']} positions, fewer than slots={slots}",
                file=root.file,
                key="package",
            )
    root.done(
        ["kind", "name", "description", "slots", "composition", "chiplets", "memory", "package", "dynacore",
         *_SCALAR_KEYS]
    )
    return (cls or SpaceSpec)(name, root.file, composition, tuple(scalars), encoding, package, description,
                              encoding_explicit)
