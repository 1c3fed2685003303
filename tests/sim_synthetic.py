"""Tiny synthetic systems for the simulator tests (one block, constant or per-token cost)."""

from __future__ import annotations

import numpy as np

from hydra_opt.evaluate.simulator import SimModel, SimSystem
from hydra_opt.hardware.noi import Mesh
from hydra_opt.hardware.types import ChipletType, MemoryType
from hydra_opt.workload.cost import AGG_NAMES, COST_FIELDS

GB = 2.0**30


def chiplet(name: str = "x", families=("attention", "mamba"), phases=("prefill", "decode"), macs_per_s: float = 1e12,
            sram_gbps: float = 1e6) -> ChipletType:
    return ChipletType(
        name=name, families=frozenset(families), phases=frozenset(phases), d2d_bw_gbps=100.0, cores=1,
        clock_ghz=1.0, macs_per_cycle=macs_per_s / 1e9, sfu_ops_per_s=1e12, elem_ops_per_s=1e12,
        sram_bytes=1e7, sram_gbps=sram_gbps, area_mm2=100.0,
    )


def memory(capacity_gb: float = 16.0, bw_gbps: float = 600.0) -> MemoryType:
    return MemoryType(name="hbm", capacity_bytes=capacity_gb * GB, bw_gbps=bw_gbps)


def one_block_model(service_s: float = 0.0, per_token_s: float = 0.0, macs_per_s: float = 1e12,
                    family: str = "attention", kv_bytes_per_token: float = 0.0, weight_bytes: float = 0.0,
                    state_bytes: float = 0.0, mem_bytes_const: float = 0.0) -> SimModel:
    """One block whose compute time is ``service_s + per_token_s · Σq`` on a chiplet of ``macs_per_s``."""
    c = np.zeros((1, len(COST_FIELDS), len(AGG_NAMES)))
    fi = COST_FIELDS.index("macs")
    c[0, fi, AGG_NAMES.index("one")] = service_s * macs_per_s
    c[0, fi, AGG_NAMES.index("sum_q")] = per_token_s * macs_per_s
    c[0, COST_FIELDS.index("weight_bytes"), AGG_NAMES.index("one")] = mem_bytes_const
    return SimModel(
        name="synthetic", families=(family,), coeffs=c, kv_bytes_per_token=np.array([kv_bytes_per_token]),
        state_bytes=np.array([state_bytes]), weight_bytes=np.array([weight_bytes]),
    )


def single_chiplet_system(chip: ChipletType | None = None, mem: MemoryType | None = None,
                          link_bw_gbps: float = 100.0) -> SimSystem:
    mesh = Mesh(2, 1, link_bw_gbps, 0.0)
    return SimSystem(chiplets=[chip or chiplet()], chip_node=[0], memories=[mem or memory()], mem_node=[1],
                     block_mem=[0], mesh=mesh, omega={("prefill", 0): 0, ("decode", 0): 0}, name="single")
