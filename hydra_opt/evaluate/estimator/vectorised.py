"""Estimate a whole enumerated design space at once (numpy over designs), for exhaustive screening.

The designs' inputs are assembled by gathering per-(chiplet type, D2D bandwidth, batch size) block-time tables
(each priced once through ``opcost``) into ``(designs, blocks, stations)`` arrays, and the *same* solver as the
single-design path (:func:`hydra_opt.evaluate.estimator.core.solve`) runs on all of them together. The only
difference is that the occupancy chain's π comes from its product form instead of the sparse solve (identical up
to rounding; tested).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from hydra_opt.evaluate.estimator import core, single
from hydra_opt.evaluate.estimator.result import Estimate, EstimatorOptions
from hydra_opt.evaluate.scenario import Scenario

__all__ = ["estimate_space", "space_arrays"]


_FIELDS = ("pre_t", "dec_t", "pre_ref", "dec_ref", "dec1", "pre1")
_SCALARS = ("mem_bytes_cycle", "hbm_cap_bps", "batches", "batch", "tokens_cycle", "admits_cycle", "passes_cycle",
            "mem1_pass", "memb_pass", "chunk_extra")


def _one_inputs(d, prep: core.Prepared, opts: EstimatorOptions, lib, stacks: dict) -> tuple:
    """One design's rows: ``(times (6, blocks, stations), station type names, scalars, gain, flags)``.

    Built from the fast path's type-level inputs (``single._design``: the same values as
    :func:`core.design_inputs`, whose station matrices repeat each type's block column); ``stacks`` keeps the
    ``(6, blocks, types)`` arrays per set of type columns.
    """
    try:
        di = single._design(d, prep, opts, lib)
    except (ArithmeticError, ValueError):
        di = None
    if di is None:
        one = core.design_inputs(d, prep, opts, library=lib)
        times = np.stack([getattr(one, k)[0] for k in _FIELDS])
        names = [one.type_names[t] for t in one.type_id[0]]
        scal = tuple(float(getattr(one, k)[0]) for k in _SCALARS)  # chunk_extra: always set by design_inputs
        gain = float(one.lend_gain[0]) if one.lend_gain is not None else 1.0
        return times, names, scal, gain, (bool(one.static_batching[0]), bool(one.mem_limited[0]),
                                          bool(one.feasible[0]))
    hit = stacks.get(id(di.cols))
    if hit is None or hit[0] is not di.cols:
        hit = stacks[id(di.cols)] = (di.cols, np.array(di.cols, dtype=np.float64).transpose(1, 2, 0))
    times = np.repeat(hit[1], di.counts, axis=2)
    names = [name for name, c in zip(di.names, di.counts) for _ in range(c)]
    scal = (di.mem_bytes, di.hbm_bps, di.batches, di.batch, di.tokens, di.admits, di.passes, di.mem1, di.memb,
            di.chunk_extra)
    return times, names, scal, di.gain, (di.static_batching, di.mem_limited, di.feasible)


def _inputs_many(designs: Sequence, prep: core.Prepared, opts: EstimatorOptions, lib) -> core.DesignInputs:
    """:class:`core.DesignInputs` of many designs (stations padded to the largest design)."""
    nb = prep.n_blocks
    if len(designs) <= 1:
        return core.design_inputs(designs[0], prep, opts, library=lib)
    # Per-design composition → stations; block-time columns per chiplet type (priced once per chiplet, bandwidth,
    # batch, batching in core.type_table).
    s_max = max(sum(k for _, k in core._counts(d)) for d in designs)
    n = len(designs)
    times_all = np.full((len(_FIELDS), n, nb, s_max), np.inf)
    type_id = np.full((n, s_max), -1, dtype=np.int64)
    type_names: list[str] = []
    scal = np.zeros((len(_SCALARS), n))
    flags = {k: np.zeros(n, dtype=bool) for k in ("static_sched", "static_batching", "mem_limited", "feasible")}
    gain = np.ones(n)
    cache: dict = {}
    stacks: dict = {}
    for r, d in enumerate(designs):
        key = (tuple(core._counts(d)), str(d.scheduler), float(d.d2d_bw_gbps), int(d.max_batch), str(d.batching),
               str(d.memory), int(d.n_mem), float(d.slot_area_mm2), int(d.grid_w), int(d.grid_h), str(d.placement),
               str(getattr(d, "precision", "")))  # placement policy decides the memory groups
        one = cache.get(key)
        if one is None:
            one = _one_inputs(d, prep, opts, lib, stacks)
            cache[key] = one
        times, names, values, g, (st_b, mem_lim, feas) = one
        s = times.shape[-1]
        times_all[:, r, :, :s] = times
        mapped = []
        for name in names:
            if name not in type_names:
                type_names.append(name)
            mapped.append(type_names.index(name))
        type_id[r, :s] = mapped
        scal[:, r] = values
        gain[r] = g
        flags["static_batching"][r] = st_b
        flags["mem_limited"][r] = mem_lim
        flags["feasible"][r] = feas
        flags["static_sched"][r] = str(d.scheduler) == "static"
    return core.DesignInputs(
        **{k: times_all[i] for i, k in enumerate(_FIELDS)}, lend_gain=gain, type_id=type_id, type_names=type_names,
        **{k: scal[i] for i, k in enumerate(_SCALARS)}, **flags,
    )


def space_arrays(designs: Iterable, model, workload, *, scenario: Scenario | None = None,
                 options: EstimatorOptions | None = None, chunk: int = 2048) -> dict[str, np.ndarray]:
    """Throughput, TTFT, TPOT, capacity and ρ of every design, as arrays (chunks of ``chunk`` designs).

    All designs must share the precision (one prepared workload); mixed precisions are grouped by the caller.
    """
    opts = options or EstimatorOptions()
    designs = list(designs)
    if not designs:
        return {k: np.zeros(0) for k in ("throughput_tok_s", "ttft_mean_s", "tpot_mean_s", "capacity_tok_s", "rho")}
    scn = scenario or Scenario()
    prep = core.prepare(model, workload, scenario=scn, options=opts, precision=getattr(designs[0], "precision", None))
    lib = scn.library()
    out: dict[str, list] = {k: [] for k in ("throughput_tok_s", "ttft_mean_s", "tpot_mean_s", "capacity_tok_s", "rho")}
    out["bottleneck"] = []
    for i in range(0, len(designs), chunk):
        part = designs[i : i + chunk]
        inp = _inputs_many(part, prep, opts, lib)
        res = core.solve(inp, prep, opts, sparse=False)
        for k in ("throughput_tok_s", "ttft_mean_s", "tpot_mean_s", "capacity_tok_s", "rho"):
            out[k].append(np.asarray(res[k], dtype=np.float64))
        out["bottleneck"].extend(core._bottleneck(res, inp, j) for j in range(len(part)))
    arrays = {k: np.concatenate(v) for k, v in out.items() if k != "bottleneck"}
    arrays["bottleneck"] = np.array(out["bottleneck"], dtype=object)
    return arrays


def estimate_space(designs: Iterable, model, workload, *, scenario: Scenario | None = None,
                   options: EstimatorOptions | None = None) -> list[Estimate]:
    """:class:`Estimate` of every design (the vectorised path; diagnostics limited to the bottleneck and ρ)."""
    a = space_arrays(designs, model, workload, scenario=scenario, options=options)
    return [
        Estimate(
            throughput_tok_s=float(a["throughput_tok_s"][i]),
            ttft_mean_s=float(a["ttft_mean_s"][i]),
            tpot_mean_s=float(a["tpot_mean_s"][i]),
            capacity_tok_s=float(a["capacity_tok_s"][i]),
            bottleneck=str(a["bottleneck"][i]),
            diagnostics={"rho": float(a["rho"][i])},
        )
        for i in range(a["throughput_tok_s"].size)
    ]
