"""Area model of a compute chiplet and of the package (interposer).

A chiplet is a *composition* of components from a technology's component table (HYDRA Sec. III-C, Fig. 3):

    area = (cores·A_core + sfus·A_sfu + sram_banks·A_bank + links·(A_bump(bw) + A_phy(bw)) + dma·A_dma(bw))
           · (1 + overhead_fraction)

where bw is the per-link die-to-die bandwidth (GB/s). A faster NoI needs more PHY/bump/DMA area, which leaves
fewer cores and SRAM banks under the same die-area budget (the slot area). :func:`fill_composition` derives the
counts from first principles (fill what the D2D interface leaves with compute and SRAM in a fixed area ratio; per
library chiplet: :func:`hydra_opt.hardware.chiplets.compose`), which is how the HYDRA profiles were built; ``tests/test_hardware_area.py`` compares it with the artifact's rows.

Units: mm², GB/s (1e9 B/s), bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "AreaBreakdown",
    "Composition",
    "CoreComponent",
    "SfuComponent",
    "SramComponent",
    "TechnologyTable",
    "area_problem",
    "composition_area",
    "fill_composition",
    "interpolate_area_mm2",
    "package_area_mm2",
]

#: Tolerance for comparing areas (mm²): floating-point sums of table values.
AREA_EPS_MM2 = 1e-9


@dataclass(frozen=True)
class CoreComponent:
    """One compute core (e.g. a 8x8x4 = 256-MAC MARCA or tensor-core unit).

    Attributes:
        name: Component name in the technology table (``"tscs"``, ``"marca"``, ...).
        macs: Multiply-accumulate units (MACs per cycle).
        area_mm2: Area of one core, mm².
        elem_width: Element-wise lanes per cycle (default for chiplets that state no ``out_ports``; 0 = none).
    """

    name: str
    macs: int
    area_mm2: float
    elem_width: int = 0


@dataclass(frozen=True)
class SramComponent:
    """One on-chip SRAM bank.

    Attributes:
        name: Component name (``"1M"``, ``"2M_384"``...).
        bytes: Capacity of one bank, bytes.
        gbps: Bandwidth of one bank, GB/s.
        area_mm2: Area of one bank, mm² (CACTI in the HYDRA tables).
    """

    name: str
    bytes: int
    gbps: float
    area_mm2: float


@dataclass(frozen=True)
class SfuComponent:
    """One special-function unit (exp, rsqrt, softplus, ...).

    Attributes:
        name: Component name (the HYDRA tables key SFUs by their throughput, e.g. ``"2.4"``).
        gops: Throughput of one unit, 1e9 operations/s.
        area_mm2: Area of one unit, mm².
    """

    name: str
    gops: float
    area_mm2: float


def _frozen(d: Mapping) -> Mapping:
    return MappingProxyType(dict(d))


@dataclass(frozen=True)
class TechnologyTable:
    """The component table of one process technology (areas, energies, clock).

    Attributes:
        name: Table name (``"28nm"``).
        node_nm: Process node, nm.
        clock_ghz: Core clock, GHz.
        cores, srams, sfus: Component catalogues by name.
        bump_mm2: Micro-bump area of one link as (bw GB/s, mm²) points, sorted by bandwidth.
        phy_mm2: PHY area of one link as (bw GB/s, mm²) points.
        dma_mm2: Area of one DMA engine as (bw GB/s, mm²) points.
        overhead_fraction: Extra area for everything not modelled (control, NoC, power), fraction of the sum.
        mac_energy_pj: Energy of one MAC, pJ.
        sram_energy_pj_per_byte: SRAM access energy, pJ/byte.
        leakage_w_per_mm2: Static power density, W/mm².
    """

    name: str
    node_nm: float
    clock_ghz: float
    cores: Mapping[str, CoreComponent] = field(default_factory=dict)
    srams: Mapping[str, SramComponent] = field(default_factory=dict)
    sfus: Mapping[str, SfuComponent] = field(default_factory=dict)
    bump_mm2: tuple[tuple[float, float], ...] = ()
    phy_mm2: tuple[tuple[float, float], ...] = ()
    dma_mm2: tuple[tuple[float, float], ...] = ()
    overhead_fraction: float = 0.0
    mac_energy_pj: float = 0.0
    sram_energy_pj_per_byte: float = 0.0
    leakage_w_per_mm2: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "cores", _frozen(self.cores))
        object.__setattr__(self, "srams", _frozen(self.srams))
        object.__setattr__(self, "sfus", _frozen(self.sfus))

    def link_area_mm2(self, d2d_bw_gbps: float) -> float:
        """Bump + PHY area of one D2D link at ``d2d_bw_gbps``, mm²."""
        return interpolate_area_mm2(self.bump_mm2, d2d_bw_gbps) + interpolate_area_mm2(self.phy_mm2, d2d_bw_gbps)

    def dma_area_mm2(self, d2d_bw_gbps: float) -> float:
        """Area of one DMA engine sized for ``d2d_bw_gbps``, mm²."""
        return interpolate_area_mm2(self.dma_mm2, d2d_bw_gbps)


def interpolate_area_mm2(points: tuple[tuple[float, float], ...], bw_gbps: float) -> float:
    """Area at ``bw_gbps`` from (bandwidth, area) points.

    Piecewise-linear between points; below the first point proportional to bandwidth (no link = no area); above the
    last point the last segment is extended. The 28 nm HYDRA tables are exactly proportional to bandwidth, so for
    them this is the table itself.
    """
    if not points or bw_gbps <= 0:
        return 0.0
    pts = sorted(points)
    b0, a0 = pts[0]
    if bw_gbps <= b0:
        return a0 * bw_gbps / b0
    for (b1, a1), (b2, a2) in zip(pts, pts[1:]):
        if bw_gbps <= b2:
            return a1 + (a2 - a1) * (bw_gbps - b1) / (b2 - b1)
    if len(pts) == 1:
        return a0 * bw_gbps / b0
    (b1, a1), (b2, a2) = pts[-2], pts[-1]
    return a2 + (a2 - a1) * (bw_gbps - b2) / (b2 - b1)


@dataclass(frozen=True)
class Composition:
    """How many of each component a chiplet has.

    Attributes:
        cores: Compute cores.
        sram_banks: SRAM banks.
        sfus: Special-function units.
        links: D2D links (one per mesh direction: 4 on a 2-D mesh).
        dma: DMA engines.
    """

    cores: int
    sram_banks: int
    sfus: int
    links: int = 4
    dma: int = 4


@dataclass(frozen=True)
class AreaBreakdown:
    """Area of one chiplet by component, mm² (``total_mm2`` includes the overhead)."""

    core_mm2: float
    sfu_mm2: float
    sram_mm2: float
    bump_phy_mm2: float
    dma_mm2: float
    overhead_mm2: float

    @property
    def total_mm2(self) -> float:
        """Total area, mm²."""
        return self.core_mm2 + self.sfu_mm2 + self.sram_mm2 + self.bump_phy_mm2 + self.dma_mm2 + self.overhead_mm2

    @property
    def compute_mm2(self) -> float:
        """Cores + SFUs, mm²."""
        return self.core_mm2 + self.sfu_mm2

    @property
    def communication_mm2(self) -> float:
        """PHY + bumps + DMA, mm²."""
        return self.bump_phy_mm2 + self.dma_mm2


def composition_area(
    table: TechnologyTable,
    core: CoreComponent,
    sram: SramComponent,
    sfu: SfuComponent,
    comp: Composition,
    d2d_bw_gbps: float,
) -> AreaBreakdown:
    """Recompute a composition's area from the component table (pure)."""
    core_a = comp.cores * core.area_mm2
    sfu_a = comp.sfus * sfu.area_mm2
    sram_a = comp.sram_banks * sram.area_mm2
    link_a = comp.links * table.link_area_mm2(d2d_bw_gbps)
    dma_a = comp.dma * table.dma_area_mm2(d2d_bw_gbps)
    base = core_a + sfu_a + sram_a + link_a + dma_a
    return AreaBreakdown(core_a, sfu_a, sram_a, link_a, dma_a, base * table.overhead_fraction)


def area_problem(breakdown: AreaBreakdown, slot_area_mm2: float) -> str | None:
    """``None`` when the chiplet fits its slot, else the reason (a sentence with numbers and units)."""
    if breakdown.total_mm2 > slot_area_mm2 + AREA_EPS_MM2:
        return f"area {breakdown.total_mm2:.2f} mm² exceeds the {slot_area_mm2:g} mm² slot"
    return None


def fill_composition(
    table: TechnologyTable,
    core: CoreComponent,
    sram: SramComponent,
    sfu: SfuComponent,
    *,
    d2d_bw_gbps: float,
    slot_area_mm2: float,
    sram_compute_area_ratio: float,
    sfus_per_core: float = 1.0,
    links: int = 4,
    dma: int = 4,
    fill_fraction: float = 1.0,
) -> Composition:
    """Counts of cores/SFUs/SRAM banks that fill a slot after the D2D interface (first principles).

    The D2D interface (``links`` x (bump + PHY) + ``dma`` DMA engines) is sized by the bandwidth and comes first.
    The remaining budget is split so that SRAM area ≈ ``sram_compute_area_ratio`` x compute area (HYDRA Sec. VI-A:
    prefill chiplets ≈ 1, decode chiplets ≈ 2); the number of cores is the largest that keeps that ratio, and the
    SRAM banks then fill what is left. The result never exceeds the slot. ``fill_fraction`` < 1 uses only that
    share of the slot (for recipes whose profiled rows leave part of the slot empty).
    """
    budget = slot_area_mm2 * fill_fraction / (1.0 + table.overhead_fraction)
    budget -= links * table.link_area_mm2(d2d_bw_gbps) + dma * table.dma_area_mm2(d2d_bw_gbps)
    if budget <= 0:
        return Composition(0, 0, 0, links, dma)
    unit = core.area_mm2 + sfus_per_core * sfu.area_mm2
    cores = max(0, math.floor(budget / (unit * (1.0 + sram_compute_area_ratio)) + 1e-9))
    while cores > 0:
        sfus = round(sfus_per_core * cores)
        left = budget - cores * core.area_mm2 - sfus * sfu.area_mm2
        if left >= -AREA_EPS_MM2:
            break
        cores -= 1
    sfus = round(sfus_per_core * cores)
    left = budget - cores * core.area_mm2 - sfus * sfu.area_mm2
    banks = max(0, math.floor(left / sram.area_mm2 + 1e-9))
    return Composition(cores, banks, sfus, links, dma)


def package_area_mm2(grid_w: int, grid_h: int, slot_area_mm2: float, *, gap_mm: float = 0.0) -> float:
    """Interposer area of a ``grid_w`` x ``grid_h`` grid of square slots, mm².

    Each slot is a square of side sqrt(slot area) plus ``gap_mm`` of spacing on every side of the grid's cells
    (die-to-die keep-out). With no gap, 6x4 slots of 121 mm² give 2,904 mm², inside the HYDRA paper's
    2,700-3,000 mm² interposer (Sec. VI-A).
    """
    side = math.sqrt(slot_area_mm2)
    return (grid_w * side + (grid_w + 1) * gap_mm) * (grid_h * side + (grid_h + 1) * gap_mm)
