"""Build a :class:`SimSystem` from a ``DesignPoint``: chiplets from the library, placement, mesh, mapping Ω.

Placement comes from ``hydra_opt.system.placement.place`` and Ω from ``hydra_opt.runtime.mapping`` when those
modules are available; otherwise documented fallbacks are used (HBMs on the ring in ring order, compute chiplets
dealt round-robin into the remaining slots, block ``b`` on memory ``b mod M``; Ω by
:func:`~hydra_opt.evaluate.simulator.system.greedy_omega`), and the result records which was used.
"""

from __future__ import annotations

import importlib
from typing import Any

from hydra_opt.evaluate.simulator.system import SimModel, SimSystem, greedy_omega, omega_from
from hydra_opt.system.materialise import DEFAULT_HOP_LATENCY_S, materialise

__all__ = ["build_system", "placed_system", "design_omega", "DEFAULT_HOP_LATENCY_S"]


def _try_import(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _fallback_placement(design, n_blocks: int) -> tuple[list[int], list[int], list[int], list[str]]:
    """(memory nodes, compute nodes in chiplet order, block → memory index, chiplet names in order)."""
    pkg = design.package
    ring = list(pkg.ring_nodes)
    mem_nodes = ring[: design.n_mem]
    free = [n for n in range(pkg.n_slots) if n not in set(mem_nodes)]
    pools = [[name] * cnt for name, cnt in design.counts]
    names: list[str] = []
    while any(pools):
        for p in pools:
            if p:
                names.append(p.pop())
    chip_nodes = free[: len(names)]
    block_mem = [b % max(1, design.n_mem) for b in range(n_blocks)]
    return mem_nodes, chip_nodes, block_mem, names


def build_system(design: Any, model: Any, sim_model: SimModel, *, library: Any = None, seed: int = 0,
                 hop_latency_s: float = DEFAULT_HOP_LATENCY_S,
                 placement_preset: str = "clean", nominal_context: int = 512,
                 context_tokens: int | None = None, mapping: str = "bottleneck") -> tuple[SimSystem, dict]:
    """Place ``design`` for ``model`` and assemble the engine's view of it.

    Args:
        design: A ``hydra_opt.system.design.DesignPoint``.
        model: The ``hydra_opt.workload.models.Model`` (placement weighs blocks by their sizes).
        sim_model: Its per-block coefficients (for Ω).
        library: Chiplet library (default: ``ChipletLibrary.default()``).
        seed: Seed of the ``random`` placement.
        hop_latency_s: NoI per-hop latency, s.
        placement_preset: ``clean`` or ``paper`` (``hydra_opt.system.placement.place``).
        nominal_context: Prompt/context length at which Ω prices the tasks, tokens.
        context_tokens: Per-request context placement sizes KV for (Eq. 1 and the per-pass traffic it balances),
            tokens — the workload's mean prompt + output length (see ``simulate_design``). ``None``: the
            model's ``max_position`` (worst case). Ignored by the ``paper`` preset (the artifact's split does
            not look at context).
        mapping: How Ω is computed: ``bottleneck`` (Eqs. 3–5 at ``max_batch`` × ``nominal_context``) or
            ``artifact`` (the artifact's static mapper, METHODS §2d: blocks in model order, least variance of the
            accumulated latency, priced at batch 32 × context 32, no communication term).

    Returns:
        ``(system, info)`` where ``info`` names the placement/mapping implementations used and the placement cost.
    """
    system, info, names, chiplets = placed_system(design, model, sim_model, library=library, seed=seed,
                                                  hop_latency_s=hop_latency_s, placement_preset=placement_preset,
                                                  context_tokens=context_tokens)
    hooks = _dynacore_hooks(names, chiplets, design, model, sim_model)
    if hooks:
        system.compute_hooks = hooks
        info["compute_hooks"] = "DynaCore core model (hydra_opt.hardware.dynacore) for dynacore chiplets"
    system.omega = design_omega(system, sim_model, design, nominal_context=nominal_context, mapping=mapping,
                                info=info)
    return system, info


def placed_system(design: Any, model: Any, sim_model: SimModel, *, library: Any = None, seed: int = 0,
                  hop_latency_s: float = DEFAULT_HOP_LATENCY_S, placement_preset: str = "clean",
                  context_tokens: int | None = None) -> tuple[SimSystem, dict, list[str], list]:
    """:func:`build_system` up to Ω: ``(system without Ω or compute hooks, info, chiplet names, chiplet types)``
    (the arguments as there)."""
    hw = materialise(design, library)
    lib = hw.library
    mem_type = hw.memory
    mesh = hw.mesh(hop_latency_s)
    info: dict[str, Any] = {}
    pl_mod = _try_import("hydra_opt.system.placement")
    if pl_mod is not None and hasattr(pl_mod, "place"):
        ctx = {"context_tokens": int(context_tokens)} if context_tokens and placement_preset != "paper" else {}
        pl = pl_mod.place(design, model, seed=seed, library=lib, preset=placement_preset, **ctx)
        mem_nodes = [int(x) for x in pl.mem_slots]
        chips = sorted(pl.chiplets, key=lambda c: c.index)
        chip_nodes = [int(c.slot) for c in chips]
        names = [str(c.name) for c in chips]
        block_mem = [int(m) for m in pl.weight_map]
        info["placement"] = f"hydra_opt.system.placement ({design.placement})"
        info["placement_cost"] = float(getattr(pl, "cost", float("nan")))
        if ctx:
            info["placement_context_tokens"] = ctx["context_tokens"]
    else:
        mem_nodes, chip_nodes, block_mem, names = _fallback_placement(design, sim_model.n_blocks)
        info["placement"] = "fallback round-robin (hydra_opt.system.placement unavailable)"
    chiplets = [hw.chiplet(n) for n in names]
    labels = [""] * mesh.n_nodes
    for n, nd in zip(names, chip_nodes):
        labels[nd] = n
    for nd in mem_nodes:
        labels[nd] = design.memory
    system = SimSystem(
        chiplets=chiplets,
        chip_node=list(chip_nodes),
        memories=[mem_type] * len(mem_nodes),
        mem_node=list(mem_nodes),
        block_mem=list(block_mem),
        mesh=mesh,
        name=design.name or "design",
        node_labels=labels,
    )
    return system, info, names, chiplets


def design_omega(system: SimSystem, sim_model: SimModel, design: Any, *, nominal_context: int = 512,
                 mapping: str = "bottleneck", phases: tuple[str, ...] | None = None,
                 info: dict | None = None) -> dict:
    """Ω of a placed system: ``{(phase, block): chiplet}`` (``phases``: only those, each mapped independently of
    the others, as ``runtime.mapping.spatial_pipeline_mapping`` maps them; the estimator reads the prefill one).
    ``info`` (if given) records which mapping was used."""
    map_mod = _try_import("hydra_opt.runtime.mapping")
    omega = None
    if map_mod is not None:
        omega = _call_mapping(map_mod, system, sim_model, design, nominal_context, style=mapping, phases=phases)
    if omega is None:
        omega = greedy_omega(system, sim_model, batch=design.max_batch)
        if phases is not None:
            omega = {k: v for k, v in omega.items() if k[0] in phases}
        if info is not None:
            info["mapping"] = "greedy bottleneck (fallback)"
    elif info is not None:
        info["mapping"] = "hydra_opt.runtime.mapping" + (" (artifact variance-greedy)" if mapping == "artifact" else "")
    return omega


def _dynacore_hooks(names, chiplets, design, model, sim_model) -> dict:
    """Per-chiplet compute-time hooks pricing a block's GEMM list with the DynaCore core model."""
    if "dynacore" not in names or model is None or not hasattr(model, "blocks"):
        return {}
    from hydra_opt.hardware.dynacore.chiplet import DynaCoreSettings, dynacore_block_time
    from hydra_opt.workload.models import block_gemms

    settings = getattr(design, "dynacore", None) or DynaCoreSettings()
    link = float(design.d2d_bw_gbps)
    hooks = {}
    for i, (n, ch) in enumerate(zip(names, chiplets)):
        if n != "dynacore":
            continue

        def hook(block, phase, ctx, new, _cores=ch.cores):
            gemms = block_gemms(model.blocks[block], ctx, new)
            return dynacore_block_time(settings, gemms, link, phase, cores=_cores)

        hooks[i] = hook
    return hooks


def _call_mapping(mod: Any, system: SimSystem, sim_model: SimModel, design: Any, nominal_context: int = 512,
                  style: str = "bottleneck", phases: tuple[str, ...] | None = None) -> dict | None:
    """Ω from ``hydra_opt.runtime.mapping.spatial_pipeline_mapping`` over the (phase, block) tasks.

    Cost of task k on chiplet c (Eq. 3): roofline time of the block at a nominal batch (``max_batch`` requests,
    prefill of ``nominal_context`` tokens or a decode step at that context) with memory streaming at the link
    bandwidth, plus ``hops · bytes / B_NoI`` to the block's memory. ``style="artifact"``: the artifact's static
    mapper instead (batch 32, context 32, no communication term, least-variance greedy; METHODS §2d).
    """
    import numpy as np

    from hydra_opt.evaluate.simulator.system import PHASES, compat_lists, mem_coefficients, time_coefficients
    from hydra_opt.workload.cost import batch_aggregates

    fn = getattr(mod, "spatial_pipeline_mapping", None)
    if fn is None:
        return None
    n_b, n_c = sim_model.n_blocks, len(system.chiplets)
    native, _ = compat_lists(system.chiplets, sim_model.families)
    artifact = style == "artifact"
    bsz = 32 if artifact else int(design.max_batch)
    if artifact:
        nominal_context = 32
    link = system.mesh.link_bw_gbps
    mem_k, _ = mem_coefficients(sim_model.coeffs)
    kt = {}
    for ch in system.chiplets:
        if ch not in kt:
            kt[ch] = time_coefficients(ch, sim_model.coeffs)
    costs = {}
    for phase in PHASES if phases is None else phases:
        cost = np.full((n_b, n_c), np.inf)
        costs[phase] = cost
        if phase == "prefill":
            agg = batch_aggregates(np.zeros(bsz), np.full(bsz, nominal_context))
        else:
            agg = batch_aggregates(np.full(bsz, nominal_context), np.ones(bsz))
        mem_b = mem_k @ agg
        for b in range(n_b):
            for c in native[(sim_model.families[b], phase)]:
                comp, sram = kt[system.chiplets[c]]
                hops = system.mesh.hops(system.chip_node[c], system.mem_node[system.block_mem[b]])
                t_run = max(float(comp[b] @ agg), float(sram[b] @ agg), mem_b[b] / (link * 1e9))
                cost[b, c] = t_run + (0.0 if artifact else float(mod.comm_time_s(hops, mem_b[b], link)))
    omega = fn(costs, method="variance") if artifact else fn(costs)
    return {(str(p), int(b)): int(c) for (p, b), c in omega.items()}
