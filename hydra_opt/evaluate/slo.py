"""Service-level objectives and the capacity search shared by the simulator and the estimator (docs/metrics.md).

* :class:`Slo` — a request *meets the SLO* when its time to first token is at most ``ttft_s`` and its time per
  output token at most ``tpot_s``; a design *attains* the SLO at a request rate when at least ``attainment`` of
  the measured requests meet it (DistServe's goodput definition; with the default 0.9 the bounds are p90 bounds).
* :func:`capacity_search` — the largest request rate at which the SLO is attained, by a bracketing search over
  the rate on any ``rate -> attainment`` function (the simulator's and the estimator's), with a stated relative
  tolerance and a bounded number of evaluations.
* :func:`scaled_requests` — the common-random-numbers request stream at another rate: the same requests with
  their inter-arrival times scaled, so every rate of a search sees the same draws.
* :class:`CapacitySettings` — how a capacity is searched (base stream, arrival window, tolerance, runs): the one
  definition the objective YAML (``capacity:``), the CLI (``--capacity-*``) and both evaluators read.
* :class:`CapacityStream` — the base stream of a search, extended from the workload's own generator when a rate's
  window needs more requests than it holds, so no run is a short burst that hides overload.

Self-contained on purpose (a run description embeds :class:`Slo`): no simulator or estimator import.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hydra_opt.config.errors import ConfigError

__all__ = ["Slo", "CapacityResult", "capacity_search", "coarse_grid", "scaled_requests", "mean_rate_per_s",
           "slo_from_node", "DEFAULT_SLO", "CapacitySettings", "DEFAULT_CAPACITY", "CapacityStream",
           "MAX_STREAM_REQUESTS"]


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
                    window_s: float | None = None, base_rate_per_s: float | None = None,
                    min_requests: int | None = None) -> _Scaled:
    """The same requests at mean rate ``rate_per_s``: inter-arrival times scaled by ``rate₀ / rate`` (common random
    numbers: every rate replays the same draws, only time is stretched).

    Args:
        requests: The base stream (``arrival_s``, ``prompt_tokens``, ``output_tokens``; at least two arrival times).
        rate_per_s: Mean rate of the result, req/s (of the whole scaled base stream).
        name: Label; the result's name carries the rate.
        window_s: Keep only the requests arriving within this many seconds of the first (at least two): a run of
            fixed arrival duration, so a higher rate replays more requests and overload builds a backlog instead of
            a short burst hiding it (None: every request).
        base_rate_per_s: The rate ``rate_per_s`` is relative to (None: the stream's own mean rate; a
            :class:`CapacityStream` passes its first chunk's, so extending the stream does not move the rates).
        min_requests: With a window: keep at least this many requests (as many as the stream has), stretching the
            window at rates too low to fill it — so that few requests do not decide a run's attainment.
    """
    a = np.asarray(requests.arrival_s, dtype=np.float64)
    base = mean_rate_per_s(a) if base_rate_per_s is None else float(base_rate_per_s)
    if not math.isfinite(base):
        raise ValueError("a capacity search needs at least two distinct arrival times")
    k = base / float(rate_per_s)
    arr = a[0] + (a - a[0]) * k
    n = arr.size if window_s is None else max(2, int(np.searchsorted(arr, arr[0] + float(window_s), side="right")))
    label = "" if window_s is None else f"/{window_s:g}s"
    if window_s is not None and min_requests and n < min(int(min_requests), arr.size):
        n = min(int(min_requests), arr.size)
        label += f"/min{int(min_requests)}"
    return _Scaled(f"{name}@{rate_per_s:.6g}req/s{label}", arr[:n],
                   np.asarray(requests.prompt_tokens)[:n], np.asarray(requests.output_tokens)[:n])


# -- the settings and the base stream of a search ----------------------------------------------------------------
#: Most requests a capacity run's stream is extended to; a run that needs more is flagged and its capacity is a
#: lower bound.
MAX_STREAM_REQUESTS = 200_000


@dataclass(frozen=True)
class CapacitySettings:
    """How ``capacity_req_s`` is searched (docs/metrics.md "SLO, goodput and capacity"); the defaults are those of
    ``objectives/capacity_slo.yaml``, the objective YAML's ``capacity:`` and the CLI's ``--capacity-*`` flags.

    Attributes:
        tolerance: Relative width of the final rate bracket (0.02 = 2 %).
        max_runs: Most simulations per search (the estimator's search takes at least 30 evaluations: they are
            cheap).
        requests: Requests of the base stream, drawn from the workload's generator with the run's seed (None: the
            workload's own count). When a rate's window needs more, the stream is extended by further draws of
            this many (:class:`~hydra_opt.evaluate.slo.CapacityStream`).
        window_s: Arrival duration of each run, s: only the requests arriving within it at the rate under test are
            replayed, so a higher rate is a longer overload, not a shorter burst (None: every request of the base
            stream, whose finite length then hides overload; docs/metrics.md "Finite runs hide overload").
        min_requests: Fewest requests a run replays: at rates too low to fill ``window_s`` with them, the window
            stretches to the first ``min_requests`` arrivals (None: the window alone; docs/metrics.md "Few
            requests decide a low rate").
    """

    tolerance: float = 0.02
    max_runs: int = 10
    requests: int | None = 1000
    window_s: float | None = 30.0
    min_requests: int | None = 50

    def __post_init__(self) -> None:
        checks = (("tolerance", self.tolerance, 0 < _f(self.tolerance) <= 0.5, "must be in (0, 0.5]"),
                  ("max_runs", self.max_runs, _int(self.max_runs) and 2 <= self.max_runs <= 64,
                   "must be an integer in [2, 64]"),
                  ("requests", self.requests, self.requests is None or (_int(self.requests) and
                                                                        2 <= self.requests <= 100_000),
                   "must be an integer in [2, 100000]"),
                  ("window_s", self.window_s, self.window_s is None or 0 < _f(self.window_s) < math.inf,
                   "must be a positive number of seconds"),
                  ("min_requests", self.min_requests, self.min_requests is None or (
                      _int(self.min_requests) and 2 <= self.min_requests <= 100_000),
                   "must be an integer in [2, 100000]"))
        for key, value, ok, problem in checks:
            if not ok:
                raise ConfigError(problem, key=f"capacity.{key}", value=value)


def _f(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else math.nan


def _int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


DEFAULT_CAPACITY = CapacitySettings()


class CapacityStream:
    """The base request stream of one capacity search, long enough for the window at every rate tried.

    The first chunk is the workload's own draw (``requests`` requests, seed ``seed``); rates are relative to its
    mean rate. When the window at a rate needs a longer arrival span, further chunks are drawn from the same
    generator (seeds derived from ``seed`` and the chunk number) and appended after the last arrival, so the
    stream keeps its statistics and every earlier run's requests stay a prefix (common random numbers). A stream
    that cannot grow (a timed trace, a fixed request list, fixed arrivals) or reaches :data:`MAX_STREAM_REQUESTS`
    fills the window only up to :meth:`max_rate_req_s`; the search does not go above it and reports a capacity
    that reaches it as a lower bound.
    """

    def __init__(self, workload: Any, seed: int, settings: CapacitySettings = DEFAULT_CAPACITY, *,
                 n_requests: int | None = None, arrival_interval_s: float | None = None) -> None:
        import dataclasses

        from hydra_opt.workload.workload import Requests, Workload

        self.window_s = settings.window_s
        self.min_requests = settings.min_requests if settings.window_s is not None else None
        self.name = str(getattr(workload, "name", "requests"))
        self._draw = None
        if isinstance(workload, Workload):
            n = settings.requests or n_requests or workload.n_requests
            wl = dataclasses.replace(workload, n_requests=n, horizon_s=None if n else workload.horizon_s)
            first = wl.requests(seed)
            if not wl.arrival.needs_trace and arrival_interval_s is None:
                self._draw = lambda k: wl.requests(int(np.random.SeedSequence([seed, k]).generate_state(1)[0]))
            self.extendable_by = "the workload's generator" if self._draw else "a timed trace (no generator)"
        else:
            first = workload
            self.extendable_by = "a fixed request list"
        n = n_requests if settings.requests is None and n_requests is not None else None
        arr = np.asarray(first.arrival_s, dtype=np.float64)[:n]
        if arrival_interval_s is not None:
            arr = np.arange(arr.size, dtype=np.float64) * arrival_interval_s
            self.extendable_by = "fixed arrivals (arrival_interval_s)"
        self._req = Requests(arr, np.maximum(np.asarray(first.prompt_tokens)[:n], 1),
                             np.maximum(np.asarray(first.output_tokens)[:n], 1))
        self.rate0_req_s = mean_rate_per_s(arr)
        if not math.isfinite(self.rate0_req_s):
            raise ValueError("a capacity search needs at least two distinct arrival times")
        self._chunks = 1

    @property
    def requests(self) -> Any:
        """The stream as drawn so far (``Requests``)."""
        return self._req

    def _span_needed(self, rate: float) -> float:
        return math.inf if self.window_s is None else self.window_s * rate / self.rate0_req_s

    def _extend(self, span: float) -> None:
        from hydra_opt.workload.workload import Requests

        r = self._req
        need = self.min_requests or 0
        while self._draw is not None and (r.arrival_s[-1] - r.arrival_s[0] < span or r.arrival_s.size < need) \
                and r.arrival_s.size < MAX_STREAM_REQUESTS:
            c = self._draw(self._chunks)
            self._chunks += 1
            t = np.asarray(c.arrival_s, dtype=np.float64)
            first_gap = t[0] if t[0] > 0 else (t[-1] - t[0]) / max(t.size - 1, 1)  # renewal: t[0] is a gap
            r = Requests(np.concatenate([r.arrival_s, r.arrival_s[-1] + first_gap + (t - t[0])]),
                         np.concatenate([r.prompt_tokens, np.maximum(c.prompt_tokens, 1)]),
                         np.concatenate([r.output_tokens, np.maximum(c.output_tokens, 1)]))
        self._req = r

    def max_rate_req_s(self, rate: float = 0.0) -> float:
        """Largest rate whose window this stream can fill (after extending it for ``rate``); inf without a window."""
        if self.window_s is None:
            return math.inf
        self._extend(self._span_needed(rate))
        a = self._req.arrival_s
        grow = self._draw is not None and a.size < MAX_STREAM_REQUESTS
        return math.inf if grow else self.rate0_req_s * float(a[-1] - a[0]) / self.window_s

    def at(self, rate: float) -> _Scaled:
        """The run at mean rate ``rate`` (req/s, relative to the first chunk): the requests arriving within the
        window, the stream extended first if the window needs more."""
        self._extend(self._span_needed(rate))
        return scaled_requests(self._req, rate, name=self.name, window_s=self.window_s,
                               base_rate_per_s=self.rate0_req_s, min_requests=self.min_requests)


# -- the search -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CapacityResult:
    """Outcome of :func:`capacity_search`.

    Attributes:
        capacity_req_s: Largest rate found at which the SLO is attained, req/s (0.0: not even at the lowest rate
            tried). With ``status`` ``"lower_bound"`` the capacity is at least this, not measured.
        runs: Every evaluation in order, ``(rate req/s, attainment fraction)``.
        bracket_req_s: ``(attained, not attained)`` rates bounding the capacity (``hi`` inf: attained at every rate
            tried).
        tolerance: Relative bracket width the search stopped at (or was stopped short of by ``max_runs``).
        converged: Whether ``hi / lo − 1 ≤ tolerance`` was reached.
        status: ``"converged"``; ``"lower_bound"`` (attained at every rate tried: no upper end was found);
            ``"max_runs"`` (bracketed, wider than the tolerance); ``"none"`` (attained at no rate tried).
        note: One line saying why, for anything but ``"converged"``.
    """

    capacity_req_s: float
    runs: tuple[tuple[float, float], ...]
    bracket_req_s: tuple[float, float]
    tolerance: float
    converged: bool
    status: str = "converged"
    note: str = ""

    @property
    def lower_bound(self) -> bool:
        """Whether the capacity is only a lower bound (the search never found a rate where the SLO is missed)."""
        return self.status == "lower_bound"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready keys ``capacity_*`` (an unbounded bracket end as None)."""
        lo, hi = self.bracket_req_s
        return {
            "capacity_req_s": self.capacity_req_s,
            "capacity_runs": [{"rate_req_s": r, "attainment": a} for r, a in self.runs],
            "capacity_bracket_req_s": [lo, hi if math.isfinite(hi) else None],
            "capacity_tolerance": self.tolerance,
            "capacity_converged": self.converged,
            "capacity_status": self.status,
            "capacity_lower_bound": self.lower_bound,
            "capacity_note": self.note,
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
    band: bool = True,
    max_rate_req_s: Callable[[float], float] | None = None,
    accelerate: bool = False,
) -> CapacityResult:
    """Largest rate with ``attainment_at(rate) ≥ target``, assuming attainment falls with the rate above it.

    Bracketing: from ``start_req_s`` multiply by ``factor`` while attained (or divide while not) until the outcome
    flips or ``max_steps`` steps were taken; then geometric bisection of ``[lo attained, hi not]`` until
    ``hi/lo − 1 ≤ tolerance``. At most ``max_runs`` evaluations (each rate is evaluated once). Static batching can
    also miss the SLO at *low* rates (a batch waits to fill): when the start is not attained the search tries
    lower and higher rates alternately (``start/f, start·f, start/f², ...``), so it finds the upper edge of the
    first attained band it meets. ``band=False`` (attainment known to fall with the rate, as under continuous and
    chunked batching) only tries lower rates then. ``max_rate_req_s(rate)``: the highest rate that can be
    evaluated honestly (e.g. the request stream fills the window only up to it); higher rates are clipped to it,
    and a capacity that reaches it is reported as a lower bound. ``accelerate``: the k-th step away from the start
    multiplies by ``factor**k`` (cumulative ``factor**(k(k+1)/2)``), so a small factor still reaches a start that
    is far off within the budget (1.25: ×9.3 in 4 steps, ×28 in 5, where fixed steps reach ×3.1) — a close start
    brackets exactly as without it.

    Every rate tried lies on the lattice ``(1 + tolerance)**k`` req/s (``k`` integer; the evaluable ceiling
    excepted), and the bracketing steps on its coarse grid, ``k`` a multiple of ``M`` (the largest power of two with
    ``(1 + tolerance)**M ≤ 1.5``: 16 at 2 %, 8 at 5 %). The bisection halves on the coarse grid until the bracket is
    one coarse cell ``[jM, (j+1)M]``, then on the lattice inside it (``log2 M`` runs), and stops when no lattice
    rate is left in the bracket. So the start decides only which coarse rates are tried: where attainment falls
    with the rate *on the coarse grid* — near the capacity a simulated attainment is not monotone from one lattice
    rate to the next (Llama-3-8B, 14 + 2 chiplets, B16: 0.854 at 11.20 req/s, 0.978 at 11.42) — every search that
    converges ends in the same cell, tries the same rates inside it and reports the same capacity, whatever its
    start: a study's search from the estimator's capacity and ``simulate --capacity``'s from the workload's rate.
    Plain geometric midpoints on the lattice (de69439) agreed on 26 of the capacity study's 96 designs.
    """
    if not (start_req_s > 0 and math.isfinite(start_req_s)):
        raise ValueError(f"start_req_s must be a positive finite rate, got {start_req_s!r}")
    if not (tolerance > 0 and math.isfinite(tolerance)):
        raise ValueError(f"tolerance must be a positive finite fraction, got {tolerance!r}")
    lg = math.log1p(tolerance)
    grid = coarse_grid(tolerance)
    runs: list[tuple[float, float]] = []
    levels: dict[float, float] = {}  # rate -> attainment (NaN read as 0), of every rate tried
    ceiling = [math.inf]

    def clip(rate: float) -> float:
        if max_rate_req_s is not None:
            ceiling[0] = min(ceiling[0], float(max_rate_req_s(rate)))
        return min(rate, ceiling[0])

    def ok(rate: float) -> bool:
        if rate not in levels:
            a = float(attainment_at(rate))
            runs.append((rate, a))
            levels[rate] = a if math.isfinite(a) else 0.0
        return levels[rate] >= target

    def budget() -> bool:
        return len(runs) < max_runs

    start = clip(_on_lattice(start_req_s, 1.0, lg, grid))
    lo, hi = 0.0, math.inf
    if ok(start):
        lo = start
    else:
        lo, hi = _below_start(ok, budget, clip, start, factor, max_steps, band, accelerate, lg, grid, levels)
    if lo > 0 and math.isinf(hi):  # attained: raise the rate until it is not
        for k in range(1, max_steps + 1):
            r = clip(_on_lattice(lo, factor ** (k if accelerate else 1), lg, grid))
            if not budget() or r <= lo:
                break
            if ok(r):
                lo = r
            else:
                hi = r
                break
    while lo > 0 and math.isfinite(hi) and budget():
        mid = _lattice_mid(lo, hi, lg, grid)
        if mid is None:
            break
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return _result(lo, hi, runs, tolerance, ceiling[0], max_runs)


def coarse_grid(tolerance: float) -> int:
    """Lattice steps per coarse step of :func:`capacity_search`: the largest power of two ``M`` with
    ``(1 + tolerance)**M ≤ 1.5`` (1 where one step is already wider)."""
    m = 1
    while (2 * m) * math.log1p(tolerance) <= math.log(1.5) + 1e-12:
        m *= 2
    return m


def _on_lattice(rate: float, step: float, lg: float, grid: int) -> float:
    """The coarse-grid rate ``exp(k·lg)`` (``k`` a multiple of ``grid``) nearest ``rate·step``, at least one coarse
    step away from ``rate``'s own grid point in the step's direction (``step`` 1: ``rate`` snapped)."""
    k0 = grid * round(math.log(rate) / (lg * grid))
    k = grid * round(math.log(rate * step) / (lg * grid))
    if step > 1.0:
        k = max(k, k0 + grid)
    elif step < 1.0:
        k = min(k, k0 - grid)
    return math.exp(k * lg)


def _lattice_mid(lo: float, hi: float, lg: float, grid: int) -> float | None:
    """The next rate of the bisection of ``(lo, hi)``, or None when no lattice rate is strictly inside: the
    coarse-grid rate (``k`` a multiple of ``grid``) nearest the geometric mean while one is inside, else the
    lattice rate nearest it."""
    a = math.floor(math.log(lo) / lg + 1e-9) + 1
    b = math.ceil(math.log(hi) / lg - 1e-9) - 1
    if a > b:
        return None
    mid = (math.log(lo) + math.log(hi)) / (2.0 * lg)
    ca, cb = -(-a // grid), b // grid  # coarse points inside: grid * [ca, cb]
    if grid > 1 and ca <= cb:
        return math.exp(grid * min(max(round(mid / grid), ca), cb) * lg)
    return math.exp(min(max(round(mid), a), b) * lg)


def _below_start(ok: Callable[[float], bool], budget: Callable[[], bool], clip: Callable[[float], float],
                 start: float, factor: float, max_steps: int, band: bool, accelerate: bool, lg: float, grid: int,
                 levels: dict[float, float]) -> tuple[float, float]:
    """Not attained at the start: overload (lower rates help) or, with static batching (``band``), batch formation
    (higher rates help). Try both sides alternately, nearest first, until a rate is attained → ``(lo, hi)``
    (``accelerate``: the k-th step reaches ``factor**(k(k+1)/2)`` from the start, else ``factor**k``).

    With ``band`` and the attainments ``levels`` (rate → fraction, of every rate tried), the attained band can be
    narrower than a step: once the best attainment so far lies between two tried rates with lower attainment, the
    steps stop and the band is looked for between them (:func:`_peak`). Llama-3-8B on the quickstart's chat
    workload, 12 + 2 chiplets, B16, static batching: estimated attainment 0.857 at 3.23 req/s and 0 at 7.04, attained
    on 3.9–5.5 req/s only; stepping on by ×2.18 tried 1.48, 15.4, 0.67, … down to 0.006 and up to 7,922 req/s and
    reported no capacity."""
    tried = [start]
    for k in range(1, max_steps + 1):
        if not budget():
            break
        e, e_prev = (k * (k + 1) // 2, k * (k - 1) // 2) if accelerate else (k, k - 1)
        down = _on_lattice(start, 1.0 / factor**e, lg, grid)
        tried.append(down)
        if ok(down):
            return down, (start if e_prev == 0 else _on_lattice(start, 1.0 / factor**e_prev, lg, grid))
        if not band or not budget():
            continue
        if _bracketed_peak(levels) is not None:
            break
        up = clip(_on_lattice(start, factor**e, lg, grid))
        if up not in tried:
            tried.append(up)
            if ok(up):
                return up, math.inf
        if _bracketed_peak(levels) is not None:
            break
    if band and _bracketed_peak(levels) is not None:
        return _peak(ok, budget, levels, lg, grid)
    return 0.0, min(tried)


def _bracketed_peak(levels: dict[float, float]) -> tuple[float, float, float] | None:
    """``(below, best, above)``: the tried rate of highest attainment (> 0) with the tried rates next to it on
    both sides, when both are lower; else None."""
    rates = sorted(levels)
    i = max(range(len(rates)), key=lambda j: (levels[rates[j]], rates[j]))
    best = levels[rates[i]]
    if best <= 0.0 or i == 0 or i == len(rates) - 1 or levels[rates[i - 1]] >= best:
        return None  # (the rate above is lower: ties go to the higher rate)
    return rates[i - 1], rates[i], rates[i + 1]


def _peak(ok: Callable[[float], bool], budget: Callable[[], bool], levels: dict[float, float], lg: float,
          grid: int) -> tuple[float, float]:
    """Look for an attained rate around the best attainment, between its lower-attaining neighbours: probe the
    bisection point of the wider (log) gap beside it, keep whichever attains more, until one is attained →
    ``(it, the tried rate above it)``, or no rate is left in either gap or in the budget → ``(0, lowest tried)``."""
    while budget():
        peak = _bracketed_peak(levels)
        if peak is None:
            break
        lo, best, hi = peak
        # The wider gap in lattice steps first, the one above on a tie (the capacity is the band's upper edge).
        gaps = sorted(((round(math.log(hi / best) / lg), 1, best, hi), (round(math.log(best / lo) / lg), 0, lo, best)),
                      reverse=True)
        mid = next((m for *_, a, b in gaps if (m := _lattice_mid(a, b, lg, grid)) is not None), None)
        if mid is None:
            break
        if ok(mid):
            return mid, min((r for r in levels if r > mid), default=math.inf)
    return 0.0, min(levels)


def _result(lo: float, hi: float, runs: list, tolerance: float, ceiling: float, max_runs: int) -> CapacityResult:
    """The :class:`CapacityResult` of a finished search, with its status and note."""
    converged = lo > 0 and math.isfinite(hi) and hi / lo - 1.0 <= tolerance * (1.0 + 1e-9)  # lattice neighbours
    if converged:
        status, note = "converged", ""
    elif lo > 0 and math.isinf(hi):
        status = "lower_bound"
        note = f"attained at every rate tried, up to {lo:.4g} req/s: the capacity is at least this"
        note += (" (the request stream fills the window only up to this rate)" if lo >= ceiling else
                 f" (no rate missing the SLO found in {len(runs)} runs)")
    elif lo == 0.0:
        status, note = "none", f"not attained at any rate tried (down to {min(r for r, _ in runs):.4g} req/s)"
    else:
        status, note = "max_runs", f"bracket {lo:.4g}-{hi:.4g} req/s is wider than the tolerance after {max_runs} runs"
    return CapacityResult(float(lo), tuple(runs), (float(lo), float(hi)), float(tolerance), bool(converged),
                          status, note)
