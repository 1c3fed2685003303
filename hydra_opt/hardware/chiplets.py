"""The compute-chiplet library: HYDRA's TSTC/MARCA chiplets (28 nm) and the 7 nm alternatives, per D2D bandwidth.

A library YAML (``hydra_opt/data/chiplets/*.yaml``, ``kind: chiplet_library``) holds a technology component table
(:class:`~hydra_opt.hardware.area.TechnologyTable`) and chiplet *recipes*: which core/SRAM/SFU components, how many
links and DMA engines, and the profiled compositions (cores, SRAM banks, SFUs) per (slot area, D2D bandwidth).
:meth:`ChipletLibrary.get` turns a recipe into a :class:`~hydra_opt.hardware.types.ChipletType` for one bandwidth
and slot area: the profiled composition when there is one, else a first-principles one
(:func:`~hydra_opt.hardware.area.fill_composition`).

Derived capabilities (HYDRA artifact convention, METHODS 2b): MACs/cycle = cores x MACs/core; SRAM bandwidth =
banks x GB/s per bank; SFU throughput = SFUs x GOps/s per SFU; element-wise throughput = cores x out_ports per
cycle. Presets: ``"clean"`` (default; a "1 MB" bank holds 1 MiB) and ``"paper"`` (the artifact's 10e6 bytes per bank
as coded).

DynaCore hook: the DynaCore model (``hydra_opt.hardware.dynacore``) registers a provider with
:func:`register_chiplet_provider`; ``get("dynacore", ...)`` imports that package on first use and calls it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hydra_opt.config import ConfigError, Node, load_yaml
from hydra_opt.hardware.area import (
    AreaBreakdown,
    Composition,
    CoreComponent,
    SfuComponent,
    SramComponent,
    TechnologyTable,
    area_problem,
    composition_area,
    fill_composition,
)
from hydra_opt.hardware.types import FAMILIES, PHASES, ChipletType

__all__ = [
    "DEFAULT_SLOT_AREA_MM2",
    "HOOKS",
    "PAPER_SRAM_BANK_BYTES",
    "PRESETS",
    "ChipletLibrary",
    "ChipletProvider",
    "ChipletSpec",
    "compose",
    "register_chiplet_provider",
    "registered_providers",
    "validate_library_file",
]

#: Default die-area budget per slot, mm²: the HYDRA artifact's runs use the 144 mm² compositions (METHODS 2a).
DEFAULT_SLOT_AREA_MM2 = 144.0
#: Library presets: physically clean defaults, or the artifact's behaviour.
PRESETS: tuple[str, ...] = ("clean", "paper")
#: Bytes per "1 MB" SRAM bank in the artifact's kernels ("10 MB per bank as coded", METHODS 2b).
PAPER_SRAM_BANK_BYTES = 10_000_000

#: A provider builds a chiplet for (d2d_bw_gbps, slot_area_mm2, settings) -- called with keywords.
ChipletProvider = Callable[..., ChipletType]
_PROVIDERS: dict[str, ChipletProvider] = {}
#: Chiplet names served by a provider that registers itself when its module is imported.
HOOKS: Mapping[str, str] = MappingProxyType({"dynacore": "hydra_opt.hardware.dynacore"})


def register_chiplet_provider(name: str, provider: ChipletProvider) -> None:
    """Register ``provider(d2d_bw_gbps=..., slot_area_mm2=..., settings=...) -> ChipletType`` under ``name``.

    ``settings`` is the design's chiplet-specific settings object (e.g. ``DesignPoint.dynacore``) or ``None``.
    Registering a name twice replaces the provider (module reloads in tests).
    """
    if not name or not isinstance(name, str):
        raise ValueError("provider name must be a non-empty string")
    _PROVIDERS[name] = provider


def registered_providers() -> tuple[str, ...]:
    """Names with a registered provider."""
    return tuple(sorted(_PROVIDERS))


@dataclass(frozen=True)
class ChipletSpec:
    """A chiplet recipe from a library file.

    Attributes:
        name: Library name.
        description: One line.
        families: Block families it is built for.
        phases: Phases it is built for.
        technology: Its component table.
        core, sram, sfu: Its components.
        out_ports: Element-wise lanes per core per cycle.
        links: D2D links.
        dma: DMA engines.
        sfus_per_core: SFUs per core when composing from first principles.
        sram_compute_area_ratio: SRAM area / (core + SFU) area when composing from first principles.
        fill_fraction: Share of the slot a first-principles composition may use (1 = all of it).
        compositions: Profiled ((slot_area_mm2, d2d_bw_gbps), Composition) pairs.
        source: Where the numbers come from.
    """

    name: str
    description: str
    families: frozenset[str]
    phases: frozenset[str]
    technology: TechnologyTable
    core: CoreComponent
    sram: SramComponent
    sfu: SfuComponent
    out_ports: int
    links: int
    dma: int
    sfus_per_core: float
    sram_compute_area_ratio: float
    fill_fraction: float
    compositions: tuple[tuple[tuple[float, float], Composition], ...]
    source: str = ""

    def profiled(self, d2d_bw_gbps: float, slot_area_mm2: float) -> Composition | None:
        """The profiled composition for this bandwidth and slot area, if the library has one."""
        for (slot, bw), comp in self.compositions:
            if slot == float(slot_area_mm2) and bw == float(d2d_bw_gbps):
                return comp
        return None

    def compose(self, d2d_bw_gbps: float, slot_area_mm2: float) -> Composition:
        """First-principles composition (fill the slot after PHY/bump/DMA)."""
        return fill_composition(
            self.technology,
            self.core,
            self.sram,
            self.sfu,
            d2d_bw_gbps=d2d_bw_gbps,
            slot_area_mm2=slot_area_mm2,
            sram_compute_area_ratio=self.sram_compute_area_ratio,
            sfus_per_core=self.sfus_per_core,
            links=self.links,
            dma=self.dma,
            fill_fraction=self.fill_fraction,
        )

    def area(self, comp: Composition, d2d_bw_gbps: float) -> AreaBreakdown:
        """Area of ``comp`` built from this recipe's components."""
        return composition_area(self.technology, self.core, self.sram, self.sfu, comp, d2d_bw_gbps)


class ChipletLibrary:
    """Compute chiplets by name, built for a D2D bandwidth and slot area.

    Args:
        specs: Recipes by name.
        preset: ``"clean"`` or ``"paper"`` (see the module docstring).
        name: Library name for messages.
    """

    def __init__(self, specs: Mapping[str, ChipletSpec], *, preset: str = "clean", name: str = "") -> None:
        if preset not in PRESETS:
            raise ConfigError(f"is not a library preset; allowed: {', '.join(PRESETS)}", key="preset", value=preset)
        self._specs = dict(specs)
        self.preset = preset
        self.name = name
        self._cache: dict[tuple[str, float, float], ChipletType] = {}

    # -- construction -------------------------------------------------------------------------------------------
    @classmethod
    def default(cls, preset: str = "clean") -> ChipletLibrary:
        """The shipped library (every ``hydra_opt/data/chiplets/*.yaml``), cached per preset."""
        lib = _DEFAULTS.get(preset)
        if lib is None:
            root = resources.files("hydra_opt") / "data" / "chiplets"
            paths = sorted(str(p) for p in root.iterdir() if p.name.endswith((".yaml", ".yml")))
            lib = cls.from_files(paths, preset=preset, name="default")
            _DEFAULTS[preset] = lib
        return lib

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str], *, preset: str = "clean") -> ChipletLibrary:
        """Load one library file (``kind: chiplet_library``); errors are located :class:`ConfigError`."""
        name, specs = _load_library(load_yaml(path))
        return cls(specs, preset=preset, name=name)

    @classmethod
    def from_files(cls, paths: Iterable[str | os.PathLike[str]], *, preset: str = "clean", name: str = "") -> ChipletLibrary:
        """Merge several library files; a chiplet name defined twice is an error."""
        specs: dict[str, ChipletSpec] = {}
        for p in paths:
            _, more = _load_library(load_yaml(p))
            for k, v in more.items():
                if k in specs:
                    raise ConfigError("is defined in two library files", file=str(p), key=f"chiplets.{k}")
                specs[k] = v
        return cls(specs, preset=preset, name=name)

    def with_preset(self, preset: str) -> ChipletLibrary:
        """The same recipes under another preset."""
        return ChipletLibrary(self._specs, preset=preset, name=self.name)

    # -- queries ------------------------------------------------------------------------------------------------
    def names(self) -> tuple[str, ...]:
        """Chiplet names: the library's recipes, then hook/provider names (``dynacore``)."""
        extra = sorted((set(HOOKS) | set(_PROVIDERS)) - set(self._specs))
        return tuple(sorted(self._specs)) + tuple(extra)

    def __contains__(self, name: object) -> bool:
        return name in self._specs or name in HOOKS or name in _PROVIDERS

    def spec(self, name: str) -> ChipletSpec:
        """The recipe of ``name`` (library chiplets only, not hooks)."""
        try:
            return self._specs[name]
        except KeyError:
            raise ConfigError(
                f"is not a library chiplet; allowed: {', '.join(sorted(self._specs))}", key="chiplet", value=name
            ) from None

    def composition(self, name: str, d2d_bw_gbps: float, slot_area_mm2: float = DEFAULT_SLOT_AREA_MM2) -> Composition:
        """The profiled composition, or a first-principles one when the library has no row for it."""
        spec = self.spec(name)
        comp = spec.profiled(d2d_bw_gbps, slot_area_mm2)
        return comp if comp is not None else spec.compose(d2d_bw_gbps, slot_area_mm2)

    def compose(self, name: str, d2d_bw_gbps: float, slot_area_mm2: float = DEFAULT_SLOT_AREA_MM2) -> Composition:
        """First-principles composition of ``name`` (ignores the profiled rows)."""
        return self.spec(name).compose(d2d_bw_gbps, slot_area_mm2)

    def area(self, name: str, d2d_bw_gbps: float, slot_area_mm2: float = DEFAULT_SLOT_AREA_MM2) -> AreaBreakdown:
        """Area breakdown of the composition :meth:`get` uses."""
        spec = self.spec(name)
        return spec.area(self.composition(name, d2d_bw_gbps, slot_area_mm2), d2d_bw_gbps)

    def get(
        self,
        name: str,
        d2d_bw_gbps: float,
        slot_area_mm2: float = DEFAULT_SLOT_AREA_MM2,
        *,
        settings: Any = None,
    ) -> ChipletType:
        """The chiplet ``name`` built for ``d2d_bw_gbps`` GB/s links under a ``slot_area_mm2`` budget.

        Args:
            name: A name from :meth:`names`.
            d2d_bw_gbps: Per-link D2D bandwidth, GB/s (> 0).
            slot_area_mm2: Die-area budget, mm² (> 0).
            settings: Passed to hook providers (e.g. DynaCore settings); ignored by library chiplets.
        """
        if not d2d_bw_gbps > 0:
            raise ConfigError("is not a positive number", key="d2d_bw_gbps", value=d2d_bw_gbps)
        if not slot_area_mm2 > 0:
            raise ConfigError("is not a positive number", key="slot_area_mm2", value=slot_area_mm2)
        if name not in self._specs:
            return self._from_provider(name, d2d_bw_gbps, slot_area_mm2, settings)
        key = (name, float(d2d_bw_gbps), float(slot_area_mm2))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._build(self._specs[name], float(d2d_bw_gbps), float(slot_area_mm2))
            self._cache[key] = hit
        return hit

    def _build(self, spec: ChipletSpec, bw: float, slot: float) -> ChipletType:
        comp = spec.profiled(bw, slot)
        if comp is None:
            comp = spec.compose(bw, slot)
        tech = spec.technology
        area = spec.area(comp, bw).total_mm2
        bank_bytes = PAPER_SRAM_BANK_BYTES if self.preset == "paper" else spec.sram.bytes
        return ChipletType(
            name=spec.name,
            families=spec.families,
            phases=spec.phases,
            d2d_bw_gbps=bw,
            cores=comp.cores,
            clock_ghz=tech.clock_ghz,
            macs_per_cycle=float(comp.cores * spec.core.macs),
            sfu_ops_per_s=comp.sfus * spec.sfu.gops * 1e9,
            elem_ops_per_s=comp.cores * spec.out_ports * tech.clock_ghz * 1e9,
            sram_bytes=float(comp.sram_banks * bank_bytes),
            sram_gbps=comp.sram_banks * spec.sram.gbps,
            area_mm2=area,
            mac_energy_pj=tech.mac_energy_pj,
            sram_energy_pj_per_byte=tech.sram_energy_pj_per_byte,
            static_power_w=tech.leakage_w_per_mm2 * area,
        )

    def _from_provider(self, name: str, bw: float, slot: float, settings: Any) -> ChipletType:
        if name not in _PROVIDERS and name in HOOKS:
            try:
                importlib.import_module(HOOKS[name])
            except ImportError:
                pass
        provider = _PROVIDERS.get(name)
        if provider is None:
            if name in HOOKS:
                raise ConfigError(
                    f"has no chiplet model registered yet ({HOOKS[name]} did not register a provider)",
                    key="chiplet",
                    value=name,
                )
            raise ConfigError(f"is not a known chiplet; allowed: {', '.join(self.names())}", key="chiplet", value=name)
        chiplet = provider(d2d_bw_gbps=bw, slot_area_mm2=slot, settings=settings)
        if not isinstance(chiplet, ChipletType):
            raise TypeError(f"chiplet provider {name!r} returned {type(chiplet).__name__}, not ChipletType")
        return chiplet


_DEFAULTS: dict[str, ChipletLibrary] = {}


# -- YAML loading -------------------------------------------------------------------------------------------------
def compose(kind: str, d2d_bw_gbps: float, slot_area_mm2: float,
            library: ChipletLibrary | None = None) -> Composition:
    """First-principles composition of the library chiplet ``kind`` for a bandwidth and slot area.

    Args:
        kind: Chiplet name in the library (``"tscs_p"``...).
        d2d_bw_gbps: Per-link D2D bandwidth, GB/s.
        slot_area_mm2: Die-area budget, mm².
        library: A :class:`ChipletLibrary` (default: the shipped one).
    """
    lib = library if library is not None else ChipletLibrary.default()
    return lib.compose(kind, d2d_bw_gbps, slot_area_mm2)


def _positive_map(node: Node, build: Callable[[str, Node], Any]) -> dict[str, Any]:
    """``{name: build(name, entry)}`` of a non-empty mapping of mappings; an entry's unknown keys are errors."""
    out = {}
    for key, child in node.mapping().items():
        child.mapping()
        out[key] = build(key, child)
        child.done()
    if not out:
        raise node.error("must have at least one entry")
    return out


def _points(node: Node) -> tuple[tuple[float, float], ...]:
    pts = []
    for item in node.list():
        pair = item.list(min_len=2, max_len=2)
        bw = Node(pair[0].data, file=item.file, key=item.key + "[0]").number(positive=True)
        mm2 = Node(pair[1].data, file=item.file, key=item.key + "[1]").number(minimum=0.0)
        pts.append((bw, mm2))
    bws = [b for b, _ in pts]
    if len(set(bws)) != len(bws):
        raise node.error("has a bandwidth listed twice")
    return tuple(sorted(pts))


def _core(name: str, n: Node) -> CoreComponent:
    return CoreComponent(name, n.get("macs").int(minimum=1, maximum=10**7), n.get("area_mm2").number(positive=True),
                         n.get("elem_width", 0).int(minimum=0, maximum=10**7))


def _sram(name: str, n: Node) -> SramComponent:
    return SramComponent(name, n.get("bytes").int(minimum=1, maximum=2**40), n.get("gbps").number(positive=True),
                         n.get("area_mm2").number(positive=True))


def _sfu(name: str, n: Node) -> SfuComponent:
    return SfuComponent(name, n.get("gops").number(positive=True), n.get("area_mm2").number(minimum=0.0))


def _technology(n: Node) -> TechnologyTable:
    n.mapping()
    t = TechnologyTable(
        name=n.get("name").str(max_len=64),
        node_nm=n.get("node_nm").number(positive=True),
        clock_ghz=n.get("clock_ghz").number(positive=True, maximum=100.0),
        cores=_positive_map(n.get("cores"), _core),
        srams=_positive_map(n.get("srams"), _sram),
        sfus=_positive_map(n.get("sfus"), _sfu),
        bump_mm2=_points(n.get("bump_mm2", [])),
        phy_mm2=_points(n.get("phy_mm2", [])),
        dma_mm2=_points(n.get("dma_mm2", [])),
        overhead_fraction=n.get("overhead_fraction", 0.0).number(minimum=0.0, maximum=10.0),
        mac_energy_pj=n.get("mac_energy_pj", 0.0).number(minimum=0.0, maximum=1e6),
        sram_energy_pj_per_byte=n.get("sram_energy_pj_per_byte", 0.0).number(minimum=0.0, maximum=1e6),
        leakage_w_per_mm2=n.get("leakage_w_per_mm2", 0.0).number(minimum=0.0, maximum=100.0),
    )
    n.done()
    return t


def _set(node: Node, allowed: tuple[str, ...]) -> frozenset[str]:
    items = [i.str(choices=allowed) for i in node.list(min_len=1)]
    if len(set(items)) != len(items):
        raise node.error("lists a value twice")
    return frozenset(items)


def _pick(node: Node, catalogue: Mapping[str, Any], what: str) -> Any:
    key = node.data if isinstance(node.data, str) else str(node.data) if isinstance(node.data, (int, float)) else None
    if key is None or key not in catalogue:
        raise node.error(f"is not a {what} of the technology table; allowed: {', '.join(sorted(catalogue))}")
    return catalogue[key]


def _composition(n: Node, links: int, dma: int) -> tuple[tuple[float, float], Composition]:
    n.mapping()
    slot = n.get("slot_area_mm2").number(positive=True, maximum=1e5)
    bw = n.get("d2d_bw_gbps").number(positive=True, maximum=1e6)
    comp = Composition(
        cores=n.get("cores").int(minimum=0, maximum=10**6),
        sram_banks=n.get("sram_banks").int(minimum=0, maximum=10**6),
        sfus=n.get("sfus").int(minimum=0, maximum=10**7),
        links=links,
        dma=dma,
    )
    n.done()
    return (slot, bw), comp


def _chiplet(name: str, n: Node, tech: TechnologyTable, source: str) -> ChipletSpec:
    n.mapping()
    core = _pick(n.get("core"), tech.cores, "core")
    links = n.get("links", 4).int(minimum=0, maximum=64)
    dma = n.get("dma", 0).int(minimum=0, maximum=64)
    ports_node = n.get("out_ports", core.elem_width) if core.elem_width else n.get("out_ports")
    spec = ChipletSpec(
        name=name,
        description=n.get("description", "").str(max_len=200),
        families=_set(n.get("families"), FAMILIES),
        phases=_set(n.get("phases"), PHASES),
        technology=tech,
        core=core,
        sram=_pick(n.get("sram"), tech.srams, "SRAM"),
        sfu=_pick(n.get("sfu"), tech.sfus, "SFU"),
        out_ports=ports_node.int(minimum=1, maximum=10**7),
        links=links,
        dma=dma,
        sfus_per_core=n.get("sfus_per_core", 1.0).number(minimum=0.0, maximum=1e4),
        sram_compute_area_ratio=n.get("sram_compute_area_ratio").number(minimum=0.0, maximum=1e3),
        fill_fraction=n.get("fill_fraction", 1.0).number(minimum=0.0, maximum=1.0, exclusive_min=True),
        compositions=tuple(_composition(c, links, dma) for c in n.get("compositions", []).list()),
        source=source,
    )
    keys = [k for k, _ in spec.compositions]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise n.error(f"lists slot_area_mm2={dup[0]:g}, d2d_bw_gbps={dup[1]:g} twice", key="compositions", value=None)
    n.done()
    return spec


_NAME_OK = set("abcdefghijklmnopqrstuvwxyz0123456789_-")


def _load_library(root: Node) -> tuple[str, dict[str, ChipletSpec]]:
    root.mapping()
    if root.has("kind"):
        root.get("kind").str(choices=("chiplet_library",))
    name = root.get("name").str(max_len=64)
    source = root.get("source", "").str(max_len=1000)
    tech = _technology(root.get("technology"))
    specs: dict[str, ChipletSpec] = {}
    chiplets = root.get("chiplets").mapping()
    for cname, child in chiplets.items():
        if not cname or not set(cname) <= _NAME_OK:
            raise child.error("chiplet names use lowercase letters, digits, '_' and '-'", value=cname)
        specs[cname] = _chiplet(cname, child, tech, source)
    if not specs:
        raise chiplets.error("must define at least one chiplet")
    root.done()
    return name, specs


def validate_library_file(path: str | os.PathLike[str]) -> ChipletLibrary:
    """Load a library file and check that every profiled composition fits its slot (the ``validate`` command)."""
    lib = ChipletLibrary.from_yaml(path)
    for cname in lib.names():
        if cname not in lib._specs:
            continue
        spec = lib.spec(cname)
        for i, ((slot, bw), comp) in enumerate(spec.compositions):
            problem = area_problem(spec.area(comp, bw), slot)
            if problem:
                raise ConfigError(problem, file=str(Path(path)), key=f"chiplets.{cname}.compositions[{i}]")
    return lib
