"""Roofline baseline (HYDRA §VI-F, ref. [33]): the three-bound compute / HBM / NoI estimate, for comparison.

Static bounds, no runtime dynamics: the work of an average request (one prefill pass in a batch of ``B`` prompts
plus ``E[S]`` decode passes in a batch of ``B``; weights are read once per pass and shared by the batch) is priced
with the same block cost coefficients as everything else, and the output-token rate is the smallest of

* compute: all compute chiplets' MAC, vector and SFU rates pooled (``opcost.roofline_s`` of the pooled work),
* HBM: ``n_mem × memory bandwidth`` over the memory bytes per token,
* NoI: what the links around the memories can carry (``hbm_port_cap_gbps``) over the same bytes.

TTFT = the prefill of one batch through all blocks at the pooled prefill-chiplet rate.
"""

from __future__ import annotations

import numpy as np

from hydra_opt.evaluate.estimator import capacities as cap
from hydra_opt.evaluate.estimator.core import hbm_port_cap_gbps, prepare, resolve
from hydra_opt.evaluate.estimator.result import Estimate, EstimatorOptions
from hydra_opt.evaluate.opcost import roofline_s
from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.system.materialise import materialise

__all__ = ["roofline_estimate"]

_MACS, _VEC, _SFU, _W, _ACT, _KVR, _KVW = range(7)


def _pooled_time(cost: np.ndarray, chips: list, counts: list[int]) -> float:
    macs = sum(c.macs_per_s * k for c, k in zip(chips, counts))
    vec = sum(c.elem_ops_per_s * k for c, k in zip(chips, counts))
    sfu = sum(c.sfu_ops_per_s * k for c, k in zip(chips, counts))
    sram = sum(c.sram_gbps * k for c, k in zip(chips, counts))
    mem = cost[_W] + cost[_KVR] + cost[_KVW]
    _, comp, sr, _ = roofline_s(cost[_MACS], cost[_VEC], cost[_SFU], cost[_ACT] + mem, mem, macs_per_s=macs,
                                elem_ops_per_s=vec, sfu_ops_per_s=sfu, sram_gbps=sram, mem_bw_gbps=1.0)
    return float(max(comp, sr))


def roofline_estimate(design, model, workload, *, scenario: Scenario | None = None,
                      options: EstimatorOptions | None = None) -> Estimate:
    """The three-bound roofline estimate of one design (throughput, TTFT; no queueing, no transients)."""
    opts = options or EstimatorOptions()
    scn = scenario or Scenario()
    design, model, workload = resolve(design, model, workload)
    prep = prepare(model, workload, scenario=scn, options=opts, precision=getattr(design, "precision", None))
    hw = materialise(design, scn.library())
    d2d = float(design.d2d_bw_gbps)
    chips = list(hw.chiplets)
    ks = [k for _, k in hw.counts]
    mem = hw.memory
    b = float(design.max_batch)
    st = prep.stats
    pre = cap.block_costs(prep.coeffs, cap.prefill_agg(st, b)).sum(axis=0)  # one pass of B prompts
    dec = cap.block_costs(prep.coeffs, cap.decode_agg(st, b)).sum(axis=0)  # one decode pass of B requests
    per_tok = (pre + st.decode_steps_mean * dec) / (b * st.output_mean_tok)
    t_comp = _pooled_time(per_tok, chips, ks)
    mem_bytes = per_tok[_W] + per_tok[_KVR] + per_tok[_KVW]
    hbm = int(design.n_mem) * float(mem.bw_gbps) * 1e9
    noi = float(hbm_port_cap_gbps(int(design.n_mem), float(mem.bw_gbps), d2d, int(design.grid_w),
                                  int(design.grid_h))) * 1e9
    bounds = {"compute": 1.0 / max(t_comp, 1e-300), "hbm": hbm / max(mem_bytes, 1e-300),
              "noi": noi / max(mem_bytes, 1e-300)}
    name = min(bounds, key=bounds.get)
    pre_chips = [(c, k) for c, k in zip(chips, ks) if "prefill" in c.phases] or list(zip(chips, ks))
    ttft = _pooled_time(pre, [c for c, _ in pre_chips], [k for _, k in pre_chips])
    mem_pass = pre[_W] + pre[_KVR] + pre[_KVW]
    ttft = max(ttft, mem_pass / min(hbm, noi))
    thr = bounds[name]
    return Estimate(
        throughput_tok_s=float(thr),
        ttft_mean_s=float(ttft),
        tpot_mean_s=float(b / thr) if thr > 0 else float("inf"),
        capacity_tok_s=float(thr),
        bottleneck=name,
        diagnostics={k + "_tok_s": float(v) for k, v in bounds.items()},
    )
