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

from hydra_opt.evaluate.estimator import core
from hydra_opt.evaluate.estimator.result import Estimate, EstimatorOptions

__all__ = ["estimate_space", "space_arrays"]


def _inputs_many(designs: Sequence, prep: core.Prepared, opts: EstimatorOptions, lib) -> core.DesignInputs:
    """:class:`core.DesignInputs` of many designs (stations padded to the largest design)."""
    nb = prep.n_blocks
    fams = np.array(prep.families)
    fam_names = sorted(set(prep.families))
    parts = [core.design_inputs(d, prep, opts, library=lib) for d in designs] if len(designs) <= 1 else None
    if parts is not None:
        return parts[0]
    # Per-design composition → stations; tables per unique (chiplet, bw, B, batching).
    s_max = max(sum(k for _, k in core._counts(d)) for d in designs)
    n = len(designs)
    arrays = {k: np.full((n, nb, s_max), np.inf) for k in ("pre_t", "dec_t", "pre_ref", "dec_ref", "dec1", "pre1")}
    type_id = np.full((n, s_max), -1, dtype=np.int64)
    type_names: list[str] = []
    scal = {k: np.zeros(n) for k in ("mem_bytes_cycle", "hbm_cap_bps", "batches", "batch", "tokens_cycle",
                                      "admits_cycle", "passes_cycle", "mem1_pass", "memb_pass")}
    flags = {k: np.zeros(n, dtype=bool) for k in ("static_sched", "static_batching", "mem_limited", "feasible")}
    gain = np.ones(n)
    cache: dict = {}
    for r, d in enumerate(designs):
        key = (tuple(core._counts(d)), str(d.scheduler), float(d.d2d_bw_gbps), int(d.max_batch), str(d.batching), str(d.memory), int(d.n_mem),
               float(getattr(d, "slot_area_mm2", 144.0)), int(getattr(d, "grid_w", 6)), int(getattr(d, "grid_h", 4)),
               str(d.placement), str(getattr(d, "precision", "")))  # placement policy decides the memory groups
        one = cache.get(key)
        if one is None:
            one = core.design_inputs(d, prep, opts, library=lib)
            cache[key] = one
        s = one.pre_t.shape[-1]
        for k in arrays:
            arrays[k][r, :, :s] = getattr(one, k)[0]
        ids = one.type_id[0]
        mapped = []
        for t in ids:
            name = one.type_names[t]
            if name not in type_names:
                type_names.append(name)
            mapped.append(type_names.index(name))
        type_id[r, :s] = mapped
        for k in scal:
            scal[k][r] = getattr(one, k)[0]
        gain[r] = one.lend_gain[0] if one.lend_gain is not None else 1.0
        flags["static_batching"][r] = one.static_batching[0]
        flags["mem_limited"][r] = one.mem_limited[0]
        flags["feasible"][r] = one.feasible[0]
        flags["static_sched"][r] = str(d.scheduler) == "static"
    del fams, fam_names
    return core.DesignInputs(
        pre_t=arrays["pre_t"], dec_t=arrays["dec_t"], pre_ref=arrays["pre_ref"], dec_ref=arrays["dec_ref"],
        dec1=arrays["dec1"], pre1=arrays["pre1"], lend_gain=gain, type_id=type_id, type_names=type_names, **scal, **flags,
    )


def space_arrays(designs: Iterable, model, workload, *, options: EstimatorOptions | None = None,
                 chunk: int = 2048) -> dict[str, np.ndarray]:
    """Throughput, TTFT, TPOT, capacity and ρ of every design, as arrays (chunks of ``chunk`` designs).

    All designs must share the precision (one prepared workload); mixed precisions are grouped by the caller.
    """
    opts = options or EstimatorOptions()
    designs = list(designs)
    if not designs:
        return {k: np.zeros(0) for k in ("throughput_tok_s", "ttft_mean_s", "tpot_mean_s", "capacity_tok_s", "rho")}
    prec = opts.precision or getattr(designs[0], "precision", None)
    prep = core.prepare(model, workload, options=opts, precision=prec)
    lib = core._library()
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


def estimate_space(designs: Iterable, model, workload, *, options: EstimatorOptions | None = None) -> list[Estimate]:
    """:class:`Estimate` of every design (the vectorised path; diagnostics limited to the bottleneck and ρ)."""
    a = space_arrays(designs, model, workload, options=options)
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
