"""Service-level objectives and the capacity search shared by the simulator and the estimator (docs/metrics.md).

* :class:`Slo` — a request *meets the SLO* when its time to first token is at most ``ttft_s`` and its time per
  output token at most ``tpot_s``; a design *attains* the SLO at a request rate when at least ``attainment`` of
  the measured requests meet it (DistServe's goodput definition; with the default 0.9 the bounds are p90 bounds).
* :func:`capacity_search` — the largest request rate at which the SLO is attained, by a bracketing search over
  the rate on any ``rate -> attainment`` function (the simulator's and the estimator's), with a stated relative
  tolerance and a bounded number of evaluations.
* :func:`scaled_requests` — the common-random-numbers request stream at another rate: the same requests with
  their inter-arrival times scaled, so every rate of a search sees the same draws.

Self-contained on purpose (a run description embeds :class:`Slo`): no simulator or estimator import.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hydra_opt.config.errors import ConfigError

__all__ = ["Slo", "CapacityResult", "capacity_search", "scaled_requests", "mean_rate_per_s", "slo_from_node",
           "DEFAULT_SLO"]


@dataclass(frozen=True)
class Slo:
    """A latency service-level objective.

    Attributes:
        ttft_s: Largest time to first token a request may have, s (default 2.0 s, the shipped TTFT SLO of
            ``objectives/throughput_ttft_slo.yaml``).
        tpot_s: Largest time per output token after the first, s/token (default 0.1 s: 10 tokens/s, faster than
            reading speed).
        attainment: Fraction of requests that must meet both bounds (default 0.9, DistServe's).
    """

    ttft_s: float = 2.0
    tpot_s: float = 0.1
    attainment: float = 0.9

    def __post_init__(self) -> None:
        for key in ("ttft_s", "tpot_s"):
            v = getattr(self, key)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ConfigError("must be a positive number of seconds", key=f"slo.{key}", value=v)
        a = self.attainment
        if not (isinstance(a, (int, float)) and 0 < a <= 1):
            raise ConfigError("must be in (0, 1]", key="slo.attainment", value=a)

    def met(self, ttft_s: np.ndarray, tpot_s: np.ndarray) -> np.ndarray:
        """Which requests meet both bounds (NaN TTFT = never got a first token = miss; NaN TPOT = one token = ok)."""
        ttft = np.asarray(ttft_s, dtype=np.float64)
        tpot = np.asarray(tpot_s, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            return (ttft <= self.ttft_s) & ~(tpot > self.tpot_s)

    def to_dict(self) -> dict[str, float]:
        """Plain dict (for JSON)."""
        return {"ttft_s": float(self.ttft_s), "tpot_s": float(self.tpot_s), "attainment": float(self.attainment)}


DEFAULT_SLO = Slo()


def slo_from_node(node: Any) -> Slo:
    """An :class:`Slo` from a YAML ``slo:`` mapping node (``hydra_opt.config.Node``); missing keys take defaults."""
    node.mapping()
    vals = {}
    for key in ("ttft_s", "tpot_s", "attainment"):
        if node.has(key):
            vals[key] = node.get(key).number(positive=True)
    node.done(["ttft_s", "tpot_s", "attainment"])
    try:
        return Slo(**vals)
    except ConfigError as exc:
        raise node.error(exc.problem, key=exc.key.split(".", 1)[-1], value=exc.value) from None


# -- request streams at another rate ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Scaled:
    """A request stream (``arrival_s``, ``prompt_tokens``, ``output_tokens``) under a name that carries its rate."""

    name: str
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray


def mean_rate_per_s(arrival_s: np.ndarray) -> float:
    """Mean request rate of an arrival stream, ``(n − 1) / (a_last − a_first)`` req/s (inf for < 2 or one instant)."""
    a = np.asarray(arrival_s, dtype=np.float64)
    span = float(a[-1] - a[0]) if a.size > 1 else 0.0
    return (a.size - 1) / span if span > 0 else math.inf


def scaled_requests(requests: Any, rate_per_s: float, *, name: str = "requests",
                    window_s: float | None = None) -> _Scaled:
    """The same requests at mean rate ``rate_per_s``: inter-arrival times scaled by ``rate₀ / rate`` (common random
    numbers: every rate replays the same draws, only time is stretched).

    Args:
        requests: The base stream (``arrival_s``, ``prompt_tokens``, ``output_tokens``; at least two arrival times).
        rate_per_s: Mean rate of the result, req/s (of the whole scaled base stream).
        name: Label; the result's name carries the rate.
        window_s: Keep only the requests arriving within this many seconds of the first (at least two): a run of
            fixed arrival duration, so a higher rate replays more requests and overload builds a backlog instead of
            a short burst hiding it (None: every request).
    """
    a = np.asarray(requests.arrival_s, dtype=np.float64)
    base = mean_rate_per_s(a)
    if not math.isfinite(base):
        raise ValueError("a capacity search needs at least two distinct arrival times")
    k = base / float(rate_per_s)
    arr = a[0] + (a - a[0]) * k
    n = arr.size if window_s is None else max(2, int(np.searchsorted(arr, arr[0] + float(window_s), side="right")))
    return _Scaled(f"{name}@{rate_per_s:.6g}req/s" + ("" if window_s is None else f"/{window_s:g}s"), arr[:n],
                   np.asarray(requests.prompt_tokens)[:n], np.asarray(requests.output_tokens)[:n])


# -- the search -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CapacityResult:
    """Outcome of :func:`capacity_search`.

    Attributes:
        capacity_req_s: Largest rate found at which the SLO is attained, req/s (0.0: not even at the lowest rate
            tried).
        runs: Every evaluation in order, ``(rate req/s, attainment fraction)``.
        bracket_req_s: ``(attained, not attained)`` rates bounding the capacity (``hi`` inf: attained at every rate
            tried).
        tolerance: Relative bracket width the search stopped at (or was stopped short of by ``max_runs``).
        converged: Whether ``hi / lo − 1 ≤ tolerance`` was reached.
    """

    capacity_req_s: float
    runs: tuple[tuple[float, float], ...]
    bracket_req_s: tuple[float, float]
    tolerance: float
    converged: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready keys ``capacity_*`` (an unbounded bracket end as None)."""
        lo, hi = self.bracket_req_s
        return {
            "capacity_req_s": self.capacity_req_s,
            "capacity_runs": [{"rate_req_s": r, "attainment": a} for r, a in self.runs],
            "capacity_bracket_req_s": [lo, hi if math.isfinite(hi) else None],
            "capacity_tolerance": self.tolerance,
            "capacity_converged": self.converged,
        }


def capacity_search(
    attainment_at: Callable[[float], float],
    start_req_s: float,
    target: float,
    *,
    tolerance: float = 0.02,
    max_runs: int = 14,
    factor: float = 2.0,
    max_steps: int = 10,
) -> CapacityResult:
    """Largest rate with ``attainment_at(rate) ≥ target``, assuming attainment falls with the rate above it.

    Bracketing: from ``start_req_s`` multiply by ``factor`` while attained (or divide while not) until the outcome
    flips or ``max_steps`` steps were taken; then geometric bisection of ``[lo attained, hi not]`` until
    ``hi/lo − 1 ≤ tolerance``. At most ``max_runs`` evaluations (each rate is evaluated once). Static batching can
    also miss the SLO at *low* rates (a batch waits to fill): when the start is not attained the search tries
    lower and higher rates alternately (``start/f, start·f, start/f², ...``), so it finds the upper edge of the
    first attained band it meets.
    """
    if not (start_req_s > 0 and math.isfinite(start_req_s)):
        raise ValueError(f"start_req_s must be a positive finite rate, got {start_req_s!r}")
    runs: list[tuple[float, float]] = []
    seen: dict[float, bool] = {}

    def ok(rate: float) -> bool:
        if rate not in seen:
            a = float(attainment_at(rate))
            runs.append((rate, a))
            seen[rate] = a >= target
        return seen[rate]

    def budget() -> bool:
        return len(runs) < max_runs

    lo, hi = 0.0, math.inf
    if ok(start_req_s):
        lo = start_req_s
    else:
        # Not attained at the start: overload (lower rates help) or, with static batching, batch formation (higher
        # rates help). Try both sides alternately, nearest first, until a rate is attained.
        hi = start_req_s
        for k in range(1, max_steps + 1):
            if not budget():
                break
            down = start_req_s / factor**k
            if ok(down):
                lo = down
                hi = start_req_s / factor ** (k - 1)
                break
            if not budget():
                break
            up = start_req_s * factor**k
            if ok(up):
                lo, hi = up, math.inf
                break
        if lo == 0.0:
            hi = min(r for r, _ in runs)
    if lo > 0 and math.isinf(hi):  # attained: raise the rate until it is not
        for _ in range(max_steps):
            if not budget():
                break
            r = lo * factor
            if ok(r):
                lo = r
            else:
                hi = r
                break
    while lo > 0 and math.isfinite(hi) and hi / lo - 1.0 > tolerance and budget():
        mid = math.sqrt(lo * hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    converged = lo > 0 and math.isfinite(hi) and hi / lo - 1.0 <= tolerance
    return CapacityResult(float(lo), tuple(runs), (float(lo), float(hi)), float(tolerance), bool(converged))

