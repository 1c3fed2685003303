"""THE cost model: time and energy of one block task on one compute chiplet.

Every evaluator (the event-driven simulator, the Markov/fluid estimator, the roofline baseline) prices work here,
so their numbers come from one source of truth.

Model (a per-block roofline, written from first principles; docs/models.md):

* compute time = MACs / peak MAC rate + vector ops / vector rate + special-function ops / SFU rate
  (the three unit types are used by different operators of the block, which run one after another);
* SRAM time  = (activation + memory traffic) bytes / SRAM bandwidth (everything passes through on-chip SRAM once);
* memory time = (weights + KV/state read + KV/state write) bytes / bandwidth available from memory over the NoI;
* latency = max(compute, SRAM, memory) — double-buffered streaming overlaps the three.

All functions are numpy-broadcasting, so the same code prices one task (floats) or a whole design space (arrays).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hydra_opt.hardware.types import ChipletType
from hydra_opt.workload.cost import BlockCost

__all__ = ["TaskTime", "task_time", "roofline_s", "task_energy_j"]


@dataclass(frozen=True)
class TaskTime:
    """Timing of one task.

    Attributes:
        latency_s: Wall time of the task on the chiplet, s (max of the three below).
        compute_s: Time the compute units need, s.
        sram_s: Time on-chip SRAM bandwidth needs, s.
        mem_s: Time streaming memory traffic at the available bandwidth needs, s.
    """

    latency_s: float
    compute_s: float
    sram_s: float
    mem_s: float

    @property
    def bound(self) -> str:
        """Which resource bounds the task: ``"compute"``, ``"sram"`` or ``"memory"``."""
        m = max(self.compute_s, self.sram_s, self.mem_s)
        return "compute" if m == self.compute_s else ("memory" if m == self.mem_s else "sram")


def roofline_s(
    macs,
    vec_ops,
    sfu_ops,
    sram_bytes,
    mem_bytes,
    *,
    macs_per_s,
    elem_ops_per_s,
    sfu_ops_per_s,
    sram_gbps,
    mem_bw_gbps,
):
    """(latency, compute, sram, memory) seconds; every argument may be a numpy array (broadcast).

    Args:
        macs, vec_ops, sfu_ops: Operation counts.
        sram_bytes: Bytes passing through on-chip SRAM.
        mem_bytes: Bytes to/from memory (HBM) over the network.
        macs_per_s, elem_ops_per_s, sfu_ops_per_s: Chiplet peak rates, per second.
        sram_gbps: SRAM bandwidth, GB/s.
        mem_bw_gbps: Memory bandwidth available to this task, GB/s.
    """
    compute = np.asarray(macs) / macs_per_s + np.asarray(vec_ops) / elem_ops_per_s + np.asarray(sfu_ops) / sfu_ops_per_s
    sram = np.asarray(sram_bytes) / (np.asarray(sram_gbps) * 1e9)
    mem = np.asarray(mem_bytes) / (np.asarray(mem_bw_gbps) * 1e9)
    return np.maximum(np.maximum(compute, sram), mem), compute, sram, mem


def task_time(chiplet: ChipletType, cost: BlockCost, mem_bw_gbps: float) -> TaskTime:
    """Time of ``cost`` on ``chiplet`` when memory traffic streams at ``mem_bw_gbps`` GB/s."""
    lat, comp, sram, mem = roofline_s(
        cost.macs,
        cost.vec_ops,
        cost.sfu_ops,
        cost.act_bytes + cost.mem_bytes,
        cost.mem_bytes,
        macs_per_s=chiplet.macs_per_s,
        elem_ops_per_s=chiplet.elem_ops_per_s,
        sfu_ops_per_s=chiplet.sfu_ops_per_s,
        sram_gbps=chiplet.sram_gbps,
        mem_bw_gbps=mem_bw_gbps,
    )
    return TaskTime(float(lat), float(comp), float(sram), float(mem))


def task_energy_j(chiplet: ChipletType, cost: BlockCost, latency_s: float, mem_pj_per_byte: float = 0.0) -> float:
    """Energy of one task, J: MACs + SRAM traffic + memory traffic + leakage over the task's time."""
    dyn_pj = (
        cost.macs * chiplet.mac_energy_pj
        + (cost.act_bytes + cost.mem_bytes) * chiplet.sram_energy_pj_per_byte
        + cost.mem_bytes * mem_pj_per_byte
    )
    return dyn_pj * 1e-12 + chiplet.static_power_w * latency_s
