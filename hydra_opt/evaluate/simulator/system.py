"""What the engine simulates: a model reduced to per-block linear cost coefficients, and a placed system.

:class:`SimModel` and :class:`SimSystem` are plain records so tests can build tiny synthetic systems (one chiplet,
one block with a constant cost) that run through exactly the same engine code as full designs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from hydra_opt.evaluate.opcost import roofline_s
from hydra_opt.hardware.types import ChipletType, MemoryType
from hydra_opt.workload.cost import AGG_NAMES, COST_FIELDS

__all__ = ["SimModel", "SimSystem", "PHASES", "greedy_omega", "time_coefficients"]

PHASES = ("prefill", "decode")
_F = {name: i for i, name in enumerate(COST_FIELDS)}


@dataclass(frozen=True)
class SimModel:
    """A model as the engine needs it.

    Attributes:
        name: Model name.
        families: Block family per block (``"attention"`` / ``"mamba"``).
        coeffs: ``(n_blocks, len(COST_FIELDS), len(AGG_NAMES))`` linear cost coefficients (BlockCost = coeffs @
            batch aggregates), at the simulation's precision.
        kv_bytes_per_token: KV bytes per token of context, per block.
        state_bytes: Per-sequence SSM/conv state bytes, per block.
        weight_bytes: Weight bytes, per block.
        max_context: Context cap of every block, tokens (attention reads at most this many cached tokens).
    """

    name: str
    families: tuple[str, ...]
    coeffs: np.ndarray
    kv_bytes_per_token: np.ndarray
    state_bytes: np.ndarray
    weight_bytes: np.ndarray
    max_context: int = 1 << 62

    @property
    def n_blocks(self) -> int:
        """Number of blocks."""
        return len(self.families)

    @classmethod
    def from_model(cls, model, precision) -> SimModel:
        """From a ``hydra_opt.workload.models.Model`` at a ``Precision`` (object or name)."""
        if isinstance(precision, str):
            from hydra_opt.workload.precision import get_precision

            precision = get_precision(precision)
        coeffs = np.asarray(model.block_coeffs(precision), dtype=np.float64)
        return cls(
            name=str(model.name),
            families=tuple(str(b.family) for b in model.blocks),
            coeffs=coeffs,
            kv_bytes_per_token=np.asarray(model.block_kv_bytes_per_token(precision), dtype=np.float64),
            state_bytes=np.asarray(model.block_state_bytes(precision), dtype=np.float64),
            weight_bytes=np.asarray(model.block_weight_bytes(precision), dtype=np.float64),
            max_context=int(model.max_position),
        )


@dataclass
class SimSystem:
    """A placed chiplet system.

    Attributes:
        chiplets: Compute chiplets (one entry per chiplet instance).
        chip_node: Mesh node of each compute chiplet.
        memories: Memory chiplets (one per instance).
        mem_node: Mesh node of each memory chiplet.
        block_mem: Memory index holding each block's weights (and its KV/state).
        mesh: ``hydra_opt.hardware.noi.Mesh``.
        omega: Initial mapping ``(phase, block) -> chiplet index`` (None: :func:`greedy_omega`).
        name: Label for reports.
        node_labels: Label per mesh node (for heatmaps).
        compute_hooks: Optional per-chiplet-index compute-time model ``fn(block, phase, ctx, new) -> s`` that
            replaces opcost's compute time for that chiplet (DynaCore chiplets: their own per-GEMM core model);
            SRAM and memory times still come from opcost and the NoI.
    """

    chiplets: list[ChipletType]
    chip_node: list[int]
    memories: list[MemoryType]
    mem_node: list[int]
    block_mem: list[int]
    mesh: object
    omega: dict[tuple[str, int], int] | None = None
    name: str = ""
    node_labels: list[str] = field(default_factory=list)
    compute_hooks: dict = field(default_factory=dict)


def time_coefficients(chiplet: ChipletType, coeffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Linear coefficients of compute time and SRAM time (s per aggregate unit) of every block on a chiplet.

    Both parts of the roofline (``hydra_opt.evaluate.opcost.roofline_s``) are linear in the cost fields, and the
    fields are linear in the batch aggregates, so passing the coefficient matrices through ``roofline_s`` gives
    exact coefficients: ``compute_s = K_comp @ agg``.

    Returns:
        ``(K_comp, K_sram)``, each ``(n_blocks, len(AGG_NAMES))``.
    """
    c = coeffs
    mem = c[:, _F["weight_bytes"]] + c[:, _F["kv_read_bytes"]] + c[:, _F["kv_write_bytes"]]
    _, comp, sram, _ = roofline_s(
        c[:, _F["macs"]],
        c[:, _F["vec_ops"]],
        c[:, _F["sfu_ops"]],
        c[:, _F["act_bytes"]] + mem,
        mem,
        macs_per_s=chiplet.macs_per_s,
        elem_ops_per_s=chiplet.elem_ops_per_s,
        sfu_ops_per_s=chiplet.sfu_ops_per_s,
        sram_gbps=chiplet.sram_gbps,
        mem_bw_gbps=1.0,
    )
    return np.asarray(comp, dtype=np.float64), np.asarray(sram, dtype=np.float64)


def mem_coefficients(coeffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(memory bytes, inter-block io bytes) coefficients per block, each ``(n_blocks, len(AGG_NAMES))``."""
    mem = coeffs[:, _F["weight_bytes"]] + coeffs[:, _F["kv_read_bytes"]] + coeffs[:, _F["kv_write_bytes"]]
    return mem, coeffs[:, _F["io_bytes"]]


def compat_lists(chiplets: Sequence[ChipletType], families: Sequence[str]) -> tuple[dict, dict]:
    """``(native, family_any)`` candidate lists for :class:`~hydra_opt.runtime.scheduling.ChipletView`.

    ``native[(family, phase)]`` = chiplets built for it; if none, the family's chiplets of any phase; if none,
    all chiplets (a design without any chiplet of a family is infeasible, but the engine never crashes on it).
    """
    fams = sorted(set(families))
    native: dict[tuple[str, str], list[int]] = {}
    family_any: dict[str, list[int]] = {}
    for f in fams:
        any_f = [i for i, c in enumerate(chiplets) if f in c.families]
        family_any[f] = any_f
        for p in PHASES:
            nat = [i for i, c in enumerate(chiplets) if c.can_run(f, p)]
            native[(f, p)] = nat or any_f or list(range(len(chiplets)))
    return native, family_any


def greedy_omega(
    system: SimSystem,
    model: SimModel,
    *,
    batch: int = 8,
    prompt_tokens: int = 512,
) -> dict[tuple[str, int], int]:
    """An initial spatial-pipeline mapping Ω minimising the bottleneck stage (HYDRA Eqs. 3–5), greedily.

    Used when ``hydra_opt.runtime.mapping`` is not available. Per phase, blocks are taken in decreasing cost
    order (LPT) and each goes to the compatible chiplet whose accumulated time ``t_comp + t_comm`` after adding it
    is smallest (ties: fewer hops to the block's memory, then lower index). ``t_comp`` is the roofline time of the
    block at a nominal batch (``batch`` requests; prefill of ``prompt_tokens``, decode at that context) with
    memory streaming at the link bandwidth, ``t_comm = hops · bytes / B_NoI`` (Eq. 3).
    """
    from hydra_opt.workload.cost import batch_aggregates

    native, _ = compat_lists(system.chiplets, model.families)
    link_bps = system.mesh.link_bw_gbps * 1e9
    mem_k, _ = mem_coefficients(model.coeffs)
    omega: dict[tuple[str, int], int] = {}
    kc = {id(c): time_coefficients(c, model.coeffs) for c in system.chiplets}
    for phase in PHASES:
        if phase == "prefill":
            agg = batch_aggregates(np.zeros(batch), np.full(batch, prompt_tokens))
        else:
            agg = batch_aggregates(np.full(batch, prompt_tokens), np.ones(batch))
        mem_b = mem_k @ agg
        load = [0.0] * len(system.chiplets)
        cost: dict[tuple[int, int], float] = {}
        for b in range(model.n_blocks):
            for c in native[(model.families[b], phase)]:
                comp, sram = kc[id(system.chiplets[c])]
                hops = system.mesh.hops(system.chip_node[c], system.mem_node[system.block_mem[b]])
                t = max(float(comp[b] @ agg), float(sram[b] @ agg), mem_b[b] / link_bps) + hops * mem_b[b] / link_bps
                cost[(b, c)] = t
        order = sorted(range(model.n_blocks), key=lambda b: -max(cost[(b, c)] for c in native[(model.families[b], phase)]))
        for b in order:
            cands = native[(model.families[b], phase)]

            def key(c: int, b: int = b) -> tuple[float, int, int]:
                hops = system.mesh.hops(system.chip_node[c], system.mem_node[system.block_mem[b]])
                return (load[c] + cost[(b, c)], hops, c)

            c = min(cands, key=key)
            load[c] += cost[(b, c)]
            omega[(phase, b)] = c
    return omega


def omega_from(mapping: Mapping, n_blocks: int) -> dict[tuple[str, int], int]:
    """Normalise a mapping given as ``{(phase, block): chiplet}`` (validated for completeness)."""
    out = {(str(p), int(b)): int(c) for (p, b), c in mapping.items()}
    for p in PHASES:
        for b in range(n_blocks):
            if (p, b) not in out:
                raise ValueError(f"mapping has no chiplet for ({p}, block {b})")
    return out
