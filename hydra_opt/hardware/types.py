"""Hardware records shared by every layer above: compute chiplet types and memory chiplet types.

Frozen dataclasses with units in the names. The library that builds them from the HYDRA profiles lives in
``hydra_opt.hardware.chiplets`` / ``hydra_opt.hardware.memory``; the cost of running a
:class:`~hydra_opt.workload.cost.BlockCost` on a :class:`ChipletType` is ``hydra_opt.evaluate.opcost``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ChipletType", "MemoryType", "FAMILIES", "PHASES"]

#: Block families (the mixer of a block): attention (Transformer) or mamba (SSM).
FAMILIES: tuple[str, ...] = ("attention", "mamba")
#: Serving phases.
PHASES: tuple[str, ...] = ("prefill", "decode")


@dataclass(frozen=True)
class ChipletType:
    """A compute chiplet as built for one D2D bandwidth (a faster NoI leaves fewer cores).

    Attributes:
        name: Library name, e.g. ``"tscs_p"`` (attention prefill), ``"marca_d"`` (Mamba decode).
        families: Block families it is built for (``{"attention"}``, ``{"mamba"}`` or both).
        phases: Phases it is built for (``{"prefill"}``, ``{"decode"}`` or both).
        d2d_bw_gbps: The per-link die-to-die bandwidth it was composed for, GB/s.
        cores: Number of compute cores (256-MAC units for the HYDRA profiles).
        clock_ghz: Clock, GHz.
        macs_per_cycle: Peak multiply-accumulates per cycle over all cores.
        sfu_ops_per_s: Special-function (exp, rsqrt, softplus...) throughput, operations/s.
        elem_ops_per_s: Vector element-wise throughput, operations/s.
        sram_bytes: On-chip SRAM capacity, bytes.
        sram_gbps: On-chip SRAM bandwidth, GB/s (1 GB = 1e9 bytes).
        area_mm2: Silicon area of the composition, mm².
        mac_energy_pj: Energy per MAC, pJ (0 when the profile gives none).
        sram_energy_pj_per_byte: SRAM access energy, pJ/byte.
        static_power_w: Leakage power, W.
    """

    name: str
    families: frozenset[str]
    phases: frozenset[str]
    d2d_bw_gbps: float
    cores: int
    clock_ghz: float
    macs_per_cycle: float
    sfu_ops_per_s: float
    elem_ops_per_s: float
    sram_bytes: float
    sram_gbps: float
    area_mm2: float
    mac_energy_pj: float = 0.0
    sram_energy_pj_per_byte: float = 0.0
    static_power_w: float = 0.0

    @property
    def macs_per_s(self) -> float:
        """Peak MAC/s."""
        return self.macs_per_cycle * self.clock_ghz * 1e9

    def can_run(self, family: str, phase: str) -> bool:
        """Whether this chiplet is built for blocks of ``family`` in ``phase``."""
        return family in self.families and phase in self.phases


@dataclass(frozen=True)
class MemoryType:
    """A memory chiplet (HBM stack or GDDR).

    Attributes:
        name: Library name (``"hbm3"``, ``"hbm3e"``, ``"gddr7"``).
        capacity_bytes: Capacity, bytes (1 GB = 2**30 bytes for capacities, as vendors state stack sizes).
        bw_gbps: Peak bandwidth of the chiplet's interface, GB/s (1e9 bytes/s).
        latency_ns: Access latency, ns.
        energy_pj_per_byte: Access energy, pJ/byte.
        area_mm2: Footprint on the interposer, mm².
    """

    name: str
    capacity_bytes: float
    bw_gbps: float
    latency_ns: float = 0.0
    energy_pj_per_byte: float = 0.0
    area_mm2: float = 0.0
