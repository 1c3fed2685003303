"""SLO attainment, goodput and capacity from the estimator's queueing model (docs/estimator.md "SLO capacity").

The estimator gives mean TTFT, its deterministic part (the prefill pipeline residence ``prefill_latency_s``) and
the mean TPOT. Attainment assumes the TTFT is that deterministic part plus an exponential queueing delay (the
waiting time of an M/G/1-like queue above its atom at zero, the shape the occupancy CTMC's waiting room has) and
a deterministic TPOT: ``P(TTFT ≤ s) = 1 − exp(−(s − d)/(m − d))`` for ``s ≥ d``, ``d = min(prefill, m)``, and 0 if
the TPOT bound is exceeded. Capacity is the same bracketing search as the simulator's, on estimates of the same
request stream at scaled rates (no simulation: each evaluation is one estimate, milliseconds).
"""

from __future__ import annotations

import math
from typing import Any

from hydra_opt.evaluate.slo import (DEFAULT_CAPACITY, DEFAULT_SLO, CapacityResult, CapacitySettings, CapacityStream, Slo,
                                    capacity_search)
from hydra_opt.evaluate.estimator.result import Estimate, EstimatorOptions
from hydra_opt.evaluate.estimator.streams import QUANTILE_PROBS
from hydra_opt.evaluate.scenario import Scenario

__all__ = ["estimated_slo", "estimated_capacity"]


def _attainment(ttft_mean_s: float, det_s: float, tpot_s: float, slo: Slo) -> float:
    if not (math.isfinite(ttft_mean_s) and math.isfinite(tpot_s)) or tpot_s > slo.tpot_s:
        return 0.0
    d = min(max(det_s, 0.0), ttft_mean_s) if math.isfinite(det_s) else ttft_mean_s
    if slo.ttft_s < d:
        return 0.0
    spread = ttft_mean_s - d
    return 1.0 if spread <= 0 else 1.0 - math.exp(-(slo.ttft_s - d) / spread)


def _cdf(quantiles: list[float], x: float) -> float:
    """P(value ≤ x) from values at :data:`~hydra_opt.evaluate.estimator.streams.QUANTILE_PROBS` (linear between,
    flat tails)."""
    import numpy as np

    probs = np.asarray(QUANTILE_PROBS)
    q = np.asarray(quantiles, dtype=np.float64)
    if x < q[0]:
        return 0.0 if x < q[0] * (1 - 1e-12) else float(probs[0])
    if x >= q[-1]:
        return 1.0
    return float(np.interp(x, q, probs))


def estimated_slo(est: Estimate, slo: Slo = DEFAULT_SLO) -> dict[str, float]:
    """``slo_attainment`` (fraction), ``goodput_tok_s`` (throughput × attainment, tokens/s) and ``ttft_p90_s`` (s)
    of one estimate.

    With continuous or chunked batching the estimate carries the measured requests' TTFT and TPOT quantiles
    (``diagnostics["ttft_quantiles_s"]``, ``["tpot_quantiles_s"]``, from the stream fluid): attainment is
    ``P(TTFT ≤ s)·P(TPOT ≤ t)`` and the p90 is read off the TTFT quantiles. Otherwise (static batching) the TTFT is
    its deterministic part plus an exponential delay and the TPOT deterministic (module docstring)."""
    tq = est.diagnostics.get("ttft_quantiles_s")
    pq = est.diagnostics.get("tpot_quantiles_s")
    if tq and pq and math.isfinite(float(est.ttft_mean_s)):
        a = _cdf(tq, slo.ttft_s) * _cdf(pq, slo.tpot_s)
        return {"slo_attainment": a, "goodput_tok_s": float(est.throughput_tok_s) * a,
                "ttft_p90_s": float(tq[QUANTILE_PROBS.index(0.9)])}
    m = float(est.ttft_mean_s)
    det = float(est.diagnostics.get("prefill_latency_s", m))
    a = _attainment(m, det, float(est.tpot_mean_s), slo)
    d = min(max(det, 0.0), m) if math.isfinite(det) else m
    p90 = d + math.log(10.0) * (m - d) if math.isfinite(m) else math.inf
    return {"slo_attainment": a, "goodput_tok_s": float(est.throughput_tok_s) * a, "ttft_p90_s": p90}


def estimated_capacity(
    design: Any,
    model: Any,
    workload: Any,
    *,
    scenario: Scenario | None = None,
    options: EstimatorOptions | None = None,
    slo: Slo = DEFAULT_SLO,
    capacity: CapacitySettings = DEFAULT_CAPACITY,
) -> CapacityResult:
    """``capacity_req_s`` estimated: the largest mean rate at which the estimated attainment reaches
    ``slo.attainment``, over the same base stream and windows as the simulator's search
    (:class:`~hydra_opt.evaluate.slo.CapacityStream` with ``capacity``; at least 30 evaluations, they are cheap)."""
    from hydra_opt.evaluate.estimator.core import resolve
    from hydra_opt.evaluate.estimator.single import estimate

    opts = options or EstimatorOptions()
    scn = scenario or Scenario()
    design, model, workload = resolve(design, model, workload)
    stream = CapacityStream(workload, 0 if opts.seed is None else opts.seed, capacity, n_requests=scn.n_requests,
                            arrival_interval_s=scn.arrival_interval_s)
    run_opts = EstimatorOptions(**{**opts.__dict__, "seed": None})
    run_scn = scn.with_(n_requests=None, arrival_interval_s=None)

    def attainment(rate: float) -> float:
        s = stream.at(rate)
        return estimated_slo(estimate(design, model, s, scenario=run_scn, options=run_opts), slo)["slo_attainment"]

    return capacity_search(attainment, stream.rate0_req_s, slo.attainment, tolerance=capacity.tolerance,
                           max_runs=max(30, capacity.max_runs), band=getattr(design, "batching", "") == "static",
                           max_rate_req_s=stream.max_rate_req_s)
