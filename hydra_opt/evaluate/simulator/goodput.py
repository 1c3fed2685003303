"""SLO attainment, goodput and capacity of simulated runs (definitions in docs/metrics.md "SLO, goodput, capacity").

Outside the engine on purpose: a run's per-request arrays (``SimResult.raw``) give every SLO metric afterwards, so
the hot loop and ``SimResult`` are untouched, and one run can be scored against several SLOs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hydra_opt.evaluate.slo import (DEFAULT_CAPACITY, DEFAULT_SLO, CapacityResult, CapacitySettings, CapacityStream, Slo,
                                    capacity_search)
from hydra_opt.evaluate.simulator.engine import DONE
from hydra_opt.evaluate.simulator.metrics import SimResult, measured, request_ttft_s
from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.evaluate.simulator.options import SimOptions

__all__ = ["slo_metrics", "simulated_capacity"]


def slo_metrics(result: SimResult, slo: Slo = DEFAULT_SLO) -> dict[str, float]:
    """SLO metrics of one simulated run (docs/metrics.md "SLO, goodput and capacity").

    * ``slo_attainment`` (fraction): measured requests (arrived in the measurement window) meeting both bounds;
      a measured request without a first token, or with more than one output token and not completed, by the
      end of the run misses the SLO (no survivor bias).
    * ``goodput_tok_s`` (tokens/s): ``throughput_tok_s`` × the output-token share of the measured requests that
      met the SLO — the window throughput that SLO-meeting requests account for; equals the throughput when every
      measured request meets the SLO.
    """
    raw = result.raw
    rules = result.options.get("scenario", {})
    scn = Scenario(**{k: rules[k] for k in ("ttft_from", "window", "warmup_frac") if k in rules})
    _, in_win, _ = measured(raw, scn)
    ttft = request_ttft_s(raw, scn)
    out = raw.output_tokens
    done = raw.status == DONE
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, np.where(done, (raw.finish_s - raw.first_token_s) / np.maximum(out - 1, 1), np.inf),
                        np.nan)
    met = slo.met(ttft, tpot) & in_win
    n = int(in_win.sum())
    tok = float(out[in_win].sum())
    share = float(out[met].sum()) / tok if tok > 0 else math.nan
    return {
        "slo_attainment": float(met.sum() / n) if n else math.nan,
        "goodput_tok_s": float(result.throughput_tok_s * share) if tok > 0 else 0.0,
        "slo_met_requests": int(met.sum()),
        "slo_measured_requests": n,
    }


def simulated_capacity(
    design: Any,
    model: Any,
    workload: Any,
    *,
    seed: int = 0,
    scenario: Scenario | None = None,
    options: SimOptions | None = None,
    slo: Slo = DEFAULT_SLO,
    capacity: CapacitySettings = DEFAULT_CAPACITY,
    start_req_s: float | None = None,
    library: Any = None,
) -> CapacityResult:
    """``capacity_req_s`` by simulation: the largest mean request rate at which ≥ ``slo.attainment`` of the
    measured requests meet the SLO.

    Every run replays the base stream (:class:`~hydra_opt.evaluate.slo.CapacityStream`: ``capacity.requests``
    requests drawn with ``seed``, extended from the workload's generator when a rate's window needs more) with
    inter-arrival times scaled to the rate under test (common random numbers), keeping the requests that arrive
    within ``capacity.window_s``, and runs until every request is served (unless ``scenario.horizon_s`` is set).
    The search is :func:`hydra_opt.evaluate.slo.capacity_search` from ``start_req_s`` (e.g. the estimator's
    capacity; steps of 1.25, 1.25², 1.25³… away from it, so a close estimate brackets tightly and one 10× off is
    still reached within 5 runs) or else the workload's own rate (steps of 2); under continuous and chunked
    batching it only descends from a miss. Starts and steps are rounded to the search's coarse grid, so both
    starts report the same converged capacity where attainment falls with the rate on that grid.
    """
    from hydra_opt.evaluate.simulator.driver import simulate_design

    scn = scenario or Scenario()
    stream = CapacityStream(workload, seed, capacity, n_requests=scn.n_requests,
                            arrival_interval_s=scn.arrival_interval_s)
    run_scn = scn.with_(n_requests=None, arrival_interval_s=None)

    def attainment(rate: float) -> float:
        res = simulate_design(design, model, stream.at(rate), seed=seed, scenario=run_scn, options=options,
                              library=library)
        a = slo_metrics(res, slo)["slo_attainment"]
        return a if math.isfinite(a) else 0.0

    from_estimate = bool(start_req_s and math.isfinite(start_req_s))
    start, factor = (start_req_s, 1.25) if from_estimate else (stream.rate0_req_s, 2.0)
    return capacity_search(attainment, start, slo.attainment, tolerance=capacity.tolerance,
                           max_runs=capacity.max_runs, factor=factor, band=getattr(design, "batching", "") == "static",
                           max_rate_req_s=stream.max_rate_req_s, accelerate=from_estimate)
