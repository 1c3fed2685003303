"""A design point: model-independent hardware + runtime policy (+ optional DynaCore settings), and its YAML form.

HYDRA's design point (METHODS 2a) is the 7-tuple (batch size, #HBM, #M_p, #M_d, #A_p, #A_d, NoI bandwidth). Here the
chiplet counts are a sorted tuple of (library name, count) pairs so any chiplet of the library (or the DynaCore
hook) can appear, and the runtime policies (placement, batching, task scheduler, precision) and the package
(grid, slot area) are explicit.

YAML form (``kind: design``; every key but ``chiplets`` and ``n_mem`` is optional)::

    kind: design
    name: nemo-arxiv-bstar
    chiplets: {marca_p: 5, marca_d: 11, tscs_p: 1, tscs_d: 1}
    memory: hbm3
    n_mem: 6
    d2d_bw_gbps: 384
    max_batch: 2
    placement: cp          # cp | rr | random
    batching: static       # static | continuous
    scheduler: static      # static | fcfs | worksteal | elastic
    precision: int8
    package: {grid_w: 6, grid_h: 4, slot_area_mm2: 144}
    dynacore: {core_size: 32, meu_policy: adaptive, prefill_precision: w8a8, decode_precision: w4a16}
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from hydra_opt.config import ConfigError, Node, load_yaml
from hydra_opt.system.package import Package
from hydra_opt.system.policies import BATCHINGS, PLACEMENTS, SCHEDULERS

__all__ = [
    "BATCHINGS",
    "FALLBACK_PRECISIONS",
    "MAX_BATCH_LIMIT",
    "MEU_POLICIES",
    "OVERRIDE_KEYS",
    "PLACEMENTS",
    "SCHEDULERS",
    "DesignPoint",
    "DynaCoreSettings",
    "known_precisions",
    "load_design",
    "save_design",
]

MEU_POLICIES: tuple[str, ...] = ("adaptive", "fixed")
#: Design fields a run may override without editing the design (:meth:`DesignPoint.with_overrides`).
OVERRIDE_KEYS: tuple[str, ...] = ("max_batch", "batching", "scheduler", "placement")
#: Precision names of the architecture contract, used only until ``hydra_opt.workload.precision`` exists.
FALLBACK_PRECISIONS: tuple[str, ...] = ("fp16", "bf16", "int8", "fp8", "w8a8", "w4a16", "w4a8")
#: Largest accepted max batch (a larger value is likelier a typo than intent).
MAX_BATCH_LIMIT = 1 << 20
_MAX_COUNT = 4096
_MAX_GRID = 256
#: Keys of a design file, of its ``package:`` and of its ``dynacore:`` mapping.
DESIGN_KEYS: tuple[str, ...] = (
    "kind", "name", "chiplets", "memory", "n_mem", "d2d_bw_gbps", "max_batch", "placement", "batching", "scheduler",
    "precision", "package", "dynacore",
)
PACKAGE_KEYS: tuple[str, ...] = ("grid_w", "grid_h", "slot_area_mm2")
DYNACORE_KEYS: tuple[str, ...] = (
    "core_size", "meu_policy", "meu_shape", "prefill_precision", "decode_precision",
    "clock_mhz", "sram_mb", "cores", "links", "pe_area_overhead",
)


def known_precisions() -> tuple[str, ...] | None:
    """Precision names from ``hydra_opt.workload.precision`` when it offers a listing, else ``None``."""
    try:
        from hydra_opt.workload import precision as _p  # lower layer; may not exist yet
    except ImportError:
        return None
    for attr in ("list_precisions", "PRECISIONS", "PRECISION_NAMES"):
        obj = getattr(_p, attr, None)
        if callable(obj):
            obj = obj()
        if isinstance(obj, Mapping):
            return tuple(obj)
        if isinstance(obj, (tuple, list, frozenset, set)):
            return tuple(str(x) if isinstance(x, str) else getattr(x, "name", str(x)) for x in obj)
    return None


def _check_precision(value: str, *, file: str | None, key: str) -> None:
    if value in FALLBACK_PRECISIONS:
        return  # the contract's names; skips importing the (numpy-heavy) workload layer for `validate`
    try:
        from hydra_opt.workload.precision import get_precision
    except ImportError:
        if value not in FALLBACK_PRECISIONS:
            raise ConfigError(
                f"is not a precision; allowed: {', '.join(FALLBACK_PRECISIONS)}", file=file, key=key, value=value
            ) from None
        return
    try:
        get_precision(value)
    except Exception:  # noqa: BLE001 - any failure of the lookup means "unknown name"
        names = known_precisions() or FALLBACK_PRECISIONS
        raise ConfigError(f"is not a precision; allowed: {', '.join(names)}", file=file, key=key, value=value) from None


@dataclass(frozen=True)
class DynaCoreSettings:
    """DynaCore settings of a design (semantics owned by ``hydra_opt.hardware.dynacore``; validated loosely here).

    Attributes:
        core_size: Side S of the S x S splittable systolic array.
        meu_policy: ``"adaptive"`` (shape chosen per batch) or ``"fixed"`` (``meu_shape`` always).
        meu_shape: (m, n, t) split used when ``meu_policy == "fixed"``; ``None`` otherwise.
        prefill_precision: Precision name used for prefill (DynaCore's disaggregated quantization).
        decode_precision: Precision name used for decode.
        clock_mhz, sram_mb, cores, links, pe_area_overhead: Optional chiplet knobs passed through to the DynaCore
            model (``None`` = its default; ``cores=None`` = as many as the slot's area allows).
    """

    core_size: int = 32
    meu_policy: str = "adaptive"
    meu_shape: tuple[int, int, int] | None = None
    prefill_precision: str = "w8a8"
    decode_precision: str = "w4a16"
    clock_mhz: float | None = None
    sram_mb: int | None = None
    cores: int | None = None
    links: int | None = None
    pe_area_overhead: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.core_size, bool) or not isinstance(self.core_size, int) or not 1 <= self.core_size <= 4096:
            raise ConfigError("must be an integer in 1..4096", key="dynacore.core_size", value=self.core_size)
        if self.meu_policy not in MEU_POLICIES:
            raise ConfigError(f"is not one of: {', '.join(MEU_POLICIES)}", key="dynacore.meu_policy", value=self.meu_policy)
        if self.meu_shape is not None:
            shape = tuple(self.meu_shape)
            if len(shape) != 3 or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in shape):
                raise ConfigError("must be three positive integers (m, n, t)", key="dynacore.meu_shape", value=self.meu_shape)
            object.__setattr__(self, "meu_shape", shape)
        if self.meu_policy == "fixed" and self.meu_shape is None:
            raise ConfigError("is required when meu_policy is fixed", key="dynacore.meu_shape")
        if self.meu_policy == "adaptive" and self.meu_shape is not None:
            raise ConfigError("must be omitted when meu_policy is adaptive", key="dynacore.meu_shape", value=list(self.meu_shape))
        for key, value, integer in (
            ("clock_mhz", self.clock_mhz, False),
            ("sram_mb", self.sram_mb, True),
            ("cores", self.cores, True),
            ("links", self.links, True),
            ("pe_area_overhead", self.pe_area_overhead, False),
        ):
            if value is None:
                continue
            ok = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
            ok = ok and math.isfinite(value) and (value >= 0 if key in ("links", "pe_area_overhead") else value > 0)
            if not ok:
                kind = "integer" if integer else "number"
                sign = "non-negative" if key in ("links", "pe_area_overhead") else "positive"
                raise ConfigError(f"is not a {sign} {kind}", key=f"dynacore.{key}", value=value)

    def to_dict(self) -> dict[str, Any]:
        """Plain-YAML form."""
        d: dict[str, Any] = {"core_size": self.core_size, "meu_policy": self.meu_policy}
        if self.meu_shape is not None:
            d["meu_shape"] = list(self.meu_shape)
        d["prefill_precision"] = self.prefill_precision
        d["decode_precision"] = self.decode_precision
        for key in ("clock_mhz", "sram_mb", "cores", "links", "pe_area_overhead"):
            value = getattr(self, key)
            if value is not None:
                d[key] = _num(value) if key in ("clock_mhz", "pe_area_overhead") else value
        return d


def _normalize_counts(counts: Any) -> tuple[tuple[str, int], ...]:
    items = counts.items() if isinstance(counts, Mapping) else counts
    out: dict[str, int] = {}
    for pair in items:
        name, n = pair
        if not isinstance(name, str) or not name:
            raise ConfigError("chiplet names must be non-empty strings", key="chiplets", value=name)
        if isinstance(n, bool) or not isinstance(n, int):
            raise ConfigError("is not an integer", key=f"chiplets.{name}", value=n)
        if n < 0:
            raise ConfigError("must be >= 0", key=f"chiplets.{name}", value=n)
        if name in out:
            raise ConfigError("is listed twice", key=f"chiplets.{name}")
        if n:
            out[name] = n
    return tuple(sorted(out.items()))


def _num(v: float) -> float | int:
    """An integral float as int (tidy YAML); other values unchanged."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


#: Accepted per-link NoI bandwidth, GB/s (below 1 GB/s a design moves no token in a run; 1e-300 gave NaN energy).
D2D_BW_RANGE_GBPS: tuple[float, float] = (1.0, 1e6)

@dataclass(frozen=True)
class DesignPoint:
    """One point of the design space (frozen, hashable).

    Attributes:
        counts: Compute chiplets as sorted (name, count) pairs; zero counts are dropped. A mapping is accepted.
        memory: Memory chiplet name (``hbm3``, ``hbm3e``, ``gddr7``).
        n_mem: Number of memory chiplets (all on the outer ring).
        d2d_bw_gbps: Per-link NoI (die-to-die) bandwidth, GB/s.
        max_batch: Maximum requests per batch (static batching uses exactly this many).
        placement: ``cp`` (communication-aware, HYDRA Sec. IV-A), ``rr`` (round robin) or ``random``.
        batching: ``static`` or ``continuous``.
        scheduler: Task scheduler: ``static``, ``fcfs``, ``worksteal`` or ``elastic`` (HYDRA "ET").
        precision: Precision name (``hydra_opt.workload.precision``); HYDRA's setting is ``int8``.
        dynacore: DynaCore settings, or ``None``.
        grid_w, grid_h: Package grid (slots).
        slot_area_mm2: Die-area budget of a slot, mm².
        name: Optional label (not part of the hardware).
    """

    counts: tuple[tuple[str, int], ...]
    memory: str = "hbm3"
    n_mem: int = 0
    d2d_bw_gbps: float = 256.0
    max_batch: int = 16
    placement: str = "cp"
    batching: str = "static"
    scheduler: str = "static"
    precision: str = "int8"
    dynacore: DynaCoreSettings | None = None
    grid_w: int = 6
    grid_h: int = 4
    slot_area_mm2: float = 144.0
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", _normalize_counts(self.counts))
        for key, value, lo, hi in (
            ("n_mem", self.n_mem, 0, _MAX_COUNT),
            ("max_batch", self.max_batch, 1, MAX_BATCH_LIMIT),
            ("package.grid_w", self.grid_w, 1, _MAX_GRID),
            ("package.grid_h", self.grid_h, 1, _MAX_GRID),
        ):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError("is not an integer", key=key, value=value)
            if not lo <= value <= hi:
                raise ConfigError(f"must be in {lo}..{hi}", key=key, value=value)
        for key, value in (("d2d_bw_gbps", self.d2d_bw_gbps), ("package.slot_area_mm2", self.slot_area_mm2)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ConfigError("is not a positive number", key=key, value=value)
        if not D2D_BW_RANGE_GBPS[0] <= self.d2d_bw_gbps <= D2D_BW_RANGE_GBPS[1]:
            raise ConfigError(f"must be in {D2D_BW_RANGE_GBPS[0]:g}..{D2D_BW_RANGE_GBPS[1]:g} GB/s", key="d2d_bw_gbps",
                              value=self.d2d_bw_gbps)
        object.__setattr__(self, "d2d_bw_gbps", float(self.d2d_bw_gbps))
        object.__setattr__(self, "slot_area_mm2", float(self.slot_area_mm2))
        for key, value, choices in (
            ("placement", self.placement, PLACEMENTS),
            ("batching", self.batching, BATCHINGS),
            ("scheduler", self.scheduler, SCHEDULERS),
        ):
            if value not in choices:
                raise ConfigError(f"is not one of: {', '.join(choices)}", key=key, value=value)
        if self.dynacore is not None and not isinstance(self.dynacore, DynaCoreSettings):
            raise ConfigError("must be DynaCoreSettings or None", key="dynacore", value=self.dynacore)

    # -- accessors ----------------------------------------------------------------------------------------------
    def count(self, name: str) -> int:
        """Number of chiplets of type ``name`` (0 when absent)."""
        for k, v in self.counts:
            if k == name:
                return v
        return 0

    @property
    def chiplet_names(self) -> tuple[str, ...]:
        """Compute chiplet types present, sorted."""
        return tuple(k for k, _ in self.counts)

    @property
    def n_compute(self) -> int:
        """Total compute chiplets."""
        return sum(v for _, v in self.counts)

    @property
    def n_chiplets(self) -> int:
        """Compute + memory chiplets."""
        return self.n_compute + self.n_mem

    @property
    def package(self) -> Package:
        """The package grid."""
        return Package(self.grid_w, self.grid_h, self.slot_area_mm2)

    def replace(self, **changes: Any) -> DesignPoint:
        """A copy with fields changed (``counts`` may be a mapping)."""
        return replace(self, **changes)

    def with_overrides(self, overrides: Mapping[str, Any] | None, *, file: str | None = None,
                       key: str = "") -> DesignPoint:
        """This design with run-time overrides of its policy fields (:data:`OVERRIDE_KEYS`; None values ignored).

        The one place an override (``simulate --max-batch 64``, a study's ``design_overrides:``) becomes a design:
        the new design is made before placement, Ω or any estimate is derived, so ``--max-batch 64`` is the same
        run as a design file with ``max_batch: 64``.

        Raises:
            ConfigError: For a key other than :data:`OVERRIDE_KEYS` or a value the design rejects.
        """
        changes = {k: v for k, v in (overrides or {}).items() if v is not None}
        for k in changes:
            if k not in OVERRIDE_KEYS:
                raise ConfigError(f"is not an overridable design field; allowed: {', '.join(OVERRIDE_KEYS)}",
                                  file=file, key=f"{key}{k}")
        if not changes:
            return self
        try:
            return replace(self, **changes)
        except ConfigError as exc:
            raise ConfigError(exc.problem, file=file, key=f"{key}{exc.key}", value=exc.value) from None

    # -- YAML -----------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain data for YAML/JSON; :meth:`from_dict` inverts it exactly."""
        d: dict[str, Any] = {"kind": "design"}
        if self.name:
            d["name"] = self.name
        d.update(
            chiplets=dict(self.counts),
            memory=self.memory,
            n_mem=self.n_mem,
            d2d_bw_gbps=_num(self.d2d_bw_gbps),
            max_batch=self.max_batch,
            placement=self.placement,
            batching=self.batching,
            scheduler=self.scheduler,
            precision=self.precision,
            package={"grid_w": self.grid_w, "grid_h": self.grid_h, "slot_area_mm2": _num(self.slot_area_mm2)},
        )
        if self.dynacore is not None:
            d["dynacore"] = self.dynacore.to_dict()
        return d

    @classmethod
    def from_dict(cls, data: Any, *, file: str = "<design>", key: str = "", library: Any = None) -> DesignPoint:
        """Validate plain data (e.g. parsed YAML) into a design; mistakes raise a located :class:`ConfigError`.

        Args:
            data: The mapping.
            file: File name for messages.
            key: Key path prefix for messages (e.g. ``"designs[3]"``).
            library: Chiplet library whose names are allowed (default: the shipped one).
        """
        return _from_node(Node(data, file=file, key=key), library)


def _from_node(root: Node, library: Any = None) -> DesignPoint:
    from hydra_opt.hardware.chiplets import ChipletLibrary  # lower layer
    from hydra_opt.hardware.memory import list_memories

    root.mapping()
    if root.has("kind"):
        root.get("kind").str(choices=("design",))
    name = root.get("name", "").str(max_len=200)
    allowed_chiplets = (library or ChipletLibrary.default()).names()
    counts: dict[str, int] = {}
    chip_node = root.get("chiplets").mapping()
    for cname, child in chip_node.items():
        if cname not in allowed_chiplets:
            raise child.error(f"is not a known chiplet; allowed: {', '.join(allowed_chiplets)}", value=cname)
        counts[cname] = child.int(minimum=0, maximum=_MAX_COUNT)
    memories = list_memories()
    memory = root.get("memory", "hbm3").str(choices=memories)
    n_mem = root.get("n_mem").int(minimum=0, maximum=_MAX_COUNT)
    bw_node = root.get("d2d_bw_gbps", 256)
    bw = bw_node.number()
    if not D2D_BW_RANGE_GBPS[0] <= bw <= D2D_BW_RANGE_GBPS[1]:
        raise bw_node.error(f"must be in {D2D_BW_RANGE_GBPS[0]:g}..{D2D_BW_RANGE_GBPS[1]:g} GB/s")
    max_batch = root.get("max_batch", 16).int(minimum=1, maximum=MAX_BATCH_LIMIT)
    placement = root.get("placement", "cp").str(choices=PLACEMENTS)
    batching = root.get("batching", "static").str(choices=BATCHINGS)
    scheduler = root.get("scheduler", "static").str(choices=SCHEDULERS)
    prec_node = root.get("precision", "int8")
    precision = prec_node.str(max_len=64)
    _check_precision(precision, file=root.file, key=prec_node.key)
    grid_w, grid_h, slot = 6, 4, 144.0
    if root.has("package"):
        pkg = root.get("package").mapping()
        grid_w = pkg.get("grid_w", 6).int(minimum=1, maximum=_MAX_GRID)
        grid_h = pkg.get("grid_h", 4).int(minimum=1, maximum=_MAX_GRID)
        slot = pkg.get("slot_area_mm2", 144.0).number(positive=True, maximum=1e5)
        pkg.done(PACKAGE_KEYS)
    dyn = None
    if root.has("dynacore") and root.data.get("dynacore") is not None:
        dyn = _dynacore(root.get("dynacore"))
    root.done(DESIGN_KEYS)
    try:
        return DesignPoint(
            counts=counts,
            memory=memory,
            n_mem=n_mem,
            d2d_bw_gbps=bw,
            max_batch=max_batch,
            placement=placement,
            batching=batching,
            scheduler=scheduler,
            precision=precision,
            dynacore=dyn,
            grid_w=grid_w,
            grid_h=grid_h,
            slot_area_mm2=slot,
            name=name,
        )
    except ConfigError as exc:
        raise exc.located(file=root.file, prefix=root.key or None) from None


def _dynacore(n: Node) -> DynaCoreSettings:
    n.mapping()
    core_size = n.get("core_size", 32).int(minimum=1, maximum=4096)
    policy = n.get("meu_policy", "adaptive").str(choices=MEU_POLICIES)
    shape = None
    if n.has("meu_shape") and n.data.get("meu_shape") is not None:
        items = n.get("meu_shape").list(min_len=3, max_len=3)
        shape = tuple(i.int(minimum=1, maximum=1 << 20) for i in items)
    pre_node = n.get("prefill_precision", "w8a8")
    dec_node = n.get("decode_precision", "w4a16")
    pre = pre_node.str(max_len=64)
    dec = dec_node.str(max_len=64)
    _check_precision(pre, file=n.file, key=pre_node.key)
    _check_precision(dec, file=n.file, key=dec_node.key)
    extras: dict[str, Any] = {}
    for key in ("clock_mhz", "pe_area_overhead"):
        if n.has(key) and n.data.get(key) is not None:
            extras[key] = n.get(key).number(minimum=0.0, maximum=1e6, exclusive_min=key == "clock_mhz")
    for key in ("sram_mb", "cores", "links"):
        if n.has(key) and n.data.get(key) is not None:
            extras[key] = n.get(key).int(minimum=0 if key == "links" else 1, maximum=1 << 20)
    n.done(DYNACORE_KEYS)
    try:
        return DynaCoreSettings(core_size, policy, shape, pre, dec, **extras)
    except ConfigError as exc:
        raise ConfigError(exc.problem, file=n.file, key=exc.key, value=exc.value, show_value=exc.show_value) from None


def load_design(path: str | os.PathLike[str], *, library: Any = None) -> DesignPoint:
    """Read a design YAML file (chiplet names checked against ``library``, default the shipped one)."""
    return _from_node(load_yaml(path), library)


def save_design(design: DesignPoint, path: str | os.PathLike[str], *, header: str = "") -> None:
    """Write ``design`` as YAML (``header`` lines are written as ``#`` comments first)."""
    text = yaml.safe_dump(design.to_dict(), sort_keys=False, default_flow_style=None)
    comments = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    Path(path).write_text(comments + text, encoding="utf-8")


def designs_from(items: Iterable[Mapping[str, Any]], *, file: str = "<designs>") -> list[DesignPoint]:
    """Validate a list of design mappings (e.g. a study's ``designs:`` list), locating errors by index."""
    return [DesignPoint.from_dict(d, file=file, key=f"[{i}]") for i, d in enumerate(items)]


def placement_problem(design: DesignPoint) -> tuple[str, str] | None:
    """``(key, problem)`` when the design's chiplets cannot be placed on its package (no memory for the weights,
    more memories than ring slots, more chiplets than slots), else None — the simulator's placement refuses these,
    so the estimator must too."""
    from hydra_opt.system.placement import ring_order  # same layer; imported late (placement imports this module)

    w, h = design.grid_w, design.grid_h
    ring = len(ring_order(w, h))
    if design.n_mem < 1:
        return "n_mem", "is 0: no memory chiplet holds the model's weights (need >= 1)"
    if design.n_mem > ring:
        return "n_mem", f"memory chiplets do not fit the {ring} ring slots of the {w}x{h} package"
    if design.n_compute + design.n_mem > w * h:
        return "chiplets", (f"{design.n_compute} compute + {design.n_mem} memory chiplets exceed the {w * h} slots "
                            f"of the {w}x{h} package")
    return None
