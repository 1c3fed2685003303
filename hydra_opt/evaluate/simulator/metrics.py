"""Metrics of a simulation run (definitions in docs/metrics.md) and the :class:`SimResult` record."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hydra_opt.evaluate.simulator.engine import DONE, QUEUED, REJECTED, RUNNING, RawRun
from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.evaluate.simulator.options import SimOptions

__all__ = ["SimResult", "summarize", "measured", "request_ttft_s"]


def _stats(x: np.ndarray) -> tuple[float, float, float, float]:
    """(mean, p50, p90, p99) of ``x`` (NaN when empty); percentiles linearly interpolated."""
    if x.size == 0:
        return (math.nan,) * 4
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return float(x.mean()), float(p50), float(p90), float(p99)


@dataclass(frozen=True)
class SimResult:
    """Result of :func:`hydra_opt.evaluate.simulate` (units in the names; docs/metrics.md).

    ``to_dict()`` holds the scalar metrics (JSON); the per-request arrays are in ``raw`` (see
    :meth:`write_trace`).
    """

    throughput_tok_s: float
    throughput_whole_run_tok_s: float
    window_s: tuple[float, float]
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    ttft_from: str
    tpot_mean_s: float
    tpot_p99_s: float
    e2e_mean_s: float
    e2e_p99_s: float
    queue_wait_mean_s: float
    completed_requests: int
    running_requests: int
    queued_requests: int
    rejected_requests: int
    preempted_requests: int
    preemptions: int
    arrived_requests: int
    tokens_emitted: int
    tokens_discarded: int
    simulated_s: float
    wall_s: float
    events: int
    chiplet_busy_frac: list[float]
    chiplet_names: list[str]
    link_util_mean: float
    link_util_max: float
    link_util: list[float]
    hbm_bw_util: list[float]
    hbm_peak_frac: float
    hbm_mean_frac: float
    energy_j: float
    energy_per_token_j: float
    design: str
    model: str
    workload: str
    seed: int
    options: dict = field(default_factory=dict)
    raw: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        """Scalar metrics and the per-chiplet/per-link lists as a JSON-ready dict."""
        out = {}
        for k, v in self.__dict__.items():
            if k == "raw":
                continue
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            if isinstance(v, tuple):
                v = list(v)
            out[k] = v
        return out

    def summary(self) -> str:
        """A readable multi-line summary."""
        busy = np.asarray(self.chiplet_busy_frac)
        lines = [
            f"design {self.design}  model {self.model}  workload {self.workload}  seed {self.seed}",
            f"simulated {self.simulated_s:.3f} s in {self.wall_s:.2f} s wall ({self.events} events, "
            f"{self.events / max(self.wall_s, 1e-9):,.0f} events/s)",
            f"throughput        {self.throughput_tok_s:10.2f} tok/s  (window {self.window_s[0]:.2f}-"
            f"{self.window_s[1]:.2f} s; whole run {self.throughput_whole_run_tok_s:.2f} tok/s)",
            f"TTFT ({self.ttft_from:11s}) mean {self.ttft_mean_s:.4f} s  p50 {self.ttft_p50_s:.4f} s  "
            f"p90 {self.ttft_p90_s:.4f} s  p99 {self.ttft_p99_s:.4f} s",
            f"TPOT              mean {self.tpot_mean_s:.5f} s  p99 {self.tpot_p99_s:.5f} s",
            f"end-to-end        mean {self.e2e_mean_s:.4f} s  p99 {self.e2e_p99_s:.4f} s",
            f"requests          arrived {self.arrived_requests}  completed {self.completed_requests}  running "
            f"{self.running_requests}  queued {self.queued_requests}  rejected {self.rejected_requests}  "
            f"preempted {self.preempted_requests} ({self.preemptions} preemptions)",
            f"tokens            emitted {self.tokens_emitted}  discarded by restarts {self.tokens_discarded}",
            f"chiplet busy      mean {busy.mean() if busy.size else 0:.1%}  min {busy.min() if busy.size else 0:.1%}"
            f"  max {busy.max() if busy.size else 0:.1%}",
            f"link utilisation  mean {self.link_util_mean:.1%}  max {self.link_util_max:.1%}",
            f"HBM occupancy     mean {self.hbm_mean_frac:.1%}  peak {self.hbm_peak_frac:.1%} (of runtime capacity)",
            f"HBM bandwidth     " + "  ".join(f"{u:.0%}" for u in self.hbm_bw_util) + " (per memory chiplet)",
            f"energy            {self.energy_j:.3f} J  ({self.energy_per_token_j:.4g} J/token)",
        ]
        return "\n".join(lines)

    def write_trace(self, path: str) -> None:
        """Per-request metrics as CSV (times in s; NaN when the event did not happen before the cut-off)."""
        r: RawRun = self.raw
        names = {QUEUED: "queued", RUNNING: "running", DONE: "completed", REJECTED: "rejected", 0: "pending"}
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(
                [
                    "request", "arrival_s", "prompt_tokens", "output_tokens", "generated_tokens", "status",
                    "first_token_s", "ttft_arrival_s", "ttft_batch_start_s", "finish_s", "e2e_s", "tpot_s",
                    "preemptions",
                ]
            )
            for i in range(r.arrival_s.size):
                ft, fin = r.first_token_s[i], r.finish_s[i]
                tpot = (fin - ft) / (r.output_tokens[i] - 1) if math.isfinite(fin) and r.output_tokens[i] > 1 else math.nan
                w.writerow(
                    [
                        i, repr(float(r.arrival_s[i])), int(r.prompt_tokens[i]), int(r.output_tokens[i]),
                        int(r.generated[i]), names.get(int(r.status[i]), "?"), _f(ft), _f(ft - r.arrival_s[i]),
                        _f(r.first_batch_start_s[i]), _f(fin), _f(fin - r.arrival_s[i]), _f(tpot),
                        int(r.preemptions[i]),
                    ]
                )


def _f(x: float) -> str:
    return repr(float(x)) if math.isfinite(x) else "nan"


def summarize(
    raw: RawRun, scenario: Scenario, *, design: str, model: str, workload: str, seed: int,
    options: SimOptions | None = None,
) -> SimResult:
    """Turn a :class:`RawRun` into a :class:`SimResult` measured as ``scenario`` says (docs/metrics.md)."""
    with np.errstate(invalid="ignore"):
        return _summarize(raw, scenario, options or SimOptions(), design=design, model=model, workload=workload,
                          seed=seed)


def measured(raw: RawRun, scenario: Scenario) -> tuple[tuple[float, float], np.ndarray, bool]:
    """The measurement window ``(t0, t1)`` (s), the mask of requests measured (arrived inside it; whole run: all
    arrived) and whether the throughput uses the whole run instead (docs/metrics.md "Windows")."""
    end = raw.sim_end_s
    arr = raw.arrival_s
    arrived = np.arange(arr.size) < raw.n_arrived
    # Measurement window: [warm-up, last arrival or horizon] — excludes warm-up and the drain after arrivals stop.
    if raw.n_arrived:
        a0, a1 = float(arr[0]), float(arr[raw.n_arrived - 1])
    else:
        a0 = a1 = 0.0
    t0 = a0 + scenario.warmup_frac * (a1 - a0)
    t1 = min(a1, end)
    whole = scenario.window == "whole_run"
    in_win = arrived if whole else arrived & (arr >= t0) & (arr <= t1)
    return (t0, t1), in_win, whole or t1 - t0 <= 0


def request_ttft_s(raw: RawRun, scenario: Scenario) -> np.ndarray:
    """Per-request TTFT under ``scenario.ttft_from`` (s; NaN without a first token)."""
    if scenario.ttft_from == "arrival":
        return raw.first_token_s - raw.arrival_s
    return np.where(np.isfinite(raw.first_token_s), raw.first_batch_start_s, np.nan)


def _summarize(raw: RawRun, scn: Scenario, options: SimOptions, *, design: str, model: str, workload: str,
               seed: int) -> SimResult:
    end = raw.sim_end_s
    arr = raw.arrival_s
    (t0, t1), in_win, whole_window = measured(raw, scn)
    whole = raw.tokens_emitted / end if end > 0 else math.nan
    if whole_window:
        thr, win = whole, (0.0, end)
    else:
        sel = (raw.token_t > t0) & (raw.token_t <= t1)
        thr, win = float(raw.token_n[sel].sum()) / (t1 - t0), (t0, t1)
    has_ft = np.isfinite(raw.first_token_s)
    ttft = request_ttft_s(raw, scn)[in_win & has_ft]
    done = raw.status == DONE
    multi = done & (raw.output_tokens > 1)
    tpot = ((raw.finish_s - raw.first_token_s) / np.maximum(raw.output_tokens - 1, 1))[multi & in_win]
    e2e = (raw.finish_s - arr)[done & in_win]
    wait = (raw.first_token_s - arr - raw.first_batch_start_s)[in_win & has_ft]
    tm, t50, t90, t99 = _stats(ttft)
    busy = raw.chip_busy_s / end if end > 0 else raw.chip_busy_s * 0
    cap = raw.mem_capacity
    capsum = float(cap.sum())
    energy = raw.energy_dyn_j + raw.energy_static_j
    lu = raw.link_util
    return SimResult(
        throughput_tok_s=float(thr),
        throughput_whole_run_tok_s=float(whole),
        window_s=(float(win[0]), float(win[1])),
        ttft_mean_s=tm,
        ttft_p50_s=t50,
        ttft_p90_s=t90,
        ttft_p99_s=t99,
        ttft_from=scn.ttft_from,
        tpot_mean_s=_stats(tpot)[0],
        tpot_p99_s=_stats(tpot)[3],
        e2e_mean_s=_stats(e2e)[0],
        e2e_p99_s=_stats(e2e)[3],
        queue_wait_mean_s=_stats(wait)[0],
        completed_requests=int(done.sum()),
        running_requests=int((raw.status == RUNNING).sum()),
        queued_requests=int((raw.status == QUEUED).sum()),
        rejected_requests=int((raw.status == REJECTED).sum()),
        preempted_requests=int((raw.preemptions > 0).sum()),
        preemptions=int(raw.preempt_events),
        arrived_requests=int(raw.n_arrived),
        tokens_emitted=int(raw.tokens_emitted),
        tokens_discarded=int(raw.tokens_discarded),
        simulated_s=float(end),
        wall_s=float(raw.wall_s),
        events=int(raw.events),
        chiplet_busy_frac=[float(x) for x in busy],
        chiplet_names=list(raw.chip_names),
        link_util_mean=float(lu.mean()) if lu.size else 0.0,
        link_util_max=float(lu.max()) if lu.size else 0.0,
        link_util=[float(x) for x in lu],
        hbm_bw_util=[float(x) for x in raw.mem_port_util],
        hbm_peak_frac=float(raw.mem_peak.sum() / capsum) if capsum > 0 else math.nan,
        hbm_mean_frac=float(raw.mem_mean.sum() / capsum) if capsum > 0 else math.nan,
        energy_j=float(energy),
        energy_per_token_j=float(energy / raw.tokens_emitted) if raw.tokens_emitted else math.nan,
        design=design,
        model=model,
        workload=workload,
        seed=int(seed),
        options={**options.to_dict(), "scenario": scn.to_dict()},
        raw=raw,
    )
