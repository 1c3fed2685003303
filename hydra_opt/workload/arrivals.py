"""Arrival processes: Poisson, Gamma (rate, CV), fixed interval, and trace timestamps with time scaling.

All draw from a seeded :class:`numpy.random.Generator`, so the same seed gives the same arrival times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hydra_opt.config.errors import ConfigError
from hydra_opt.config.reader import Node

__all__ = [
    "Arrival",
    "PoissonArrival",
    "GammaArrival",
    "FixedArrival",
    "TraceArrival",
    "arrival_from_node",
    "PROCESSES",
]

#: Accepted ``arrival.process`` values.
PROCESSES: tuple[str, ...] = ("poisson", "gamma", "fixed", "trace")


class Arrival:
    """Base class: ``times(n, rng, horizon_s)`` gives sorted arrival times in seconds."""

    #: Whether the process needs trace timestamps.
    needs_trace = False

    def times(self, n: int | None, rng: np.random.Generator, horizon_s: float | None = None) -> np.ndarray:
        """Arrival times (s, sorted, starting near 0): ``n`` of them, or all before ``horizon_s``."""
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - overridden
        return type(self).__name__


def _renewal(gaps, n: int | None, horizon_s: float | None, mean_gap: float) -> np.ndarray:
    """Cumulative sums of i.i.d. gaps: ``n`` arrivals, cut at ``horizon_s`` if given."""
    if n is None:
        # Enough gaps to pass the horizon with overwhelming probability, then cut.
        assert horizon_s is not None
        n_est = int(horizon_s / mean_gap * 1.2 + 10 * np.sqrt(horizon_s / mean_gap + 1) + 10)
        t = np.cumsum(gaps(n_est))
        while t[-1] < horizon_s:
            t = np.concatenate([t, t[-1] + np.cumsum(gaps(n_est))])
        return t[t < horizon_s]
    t = np.cumsum(gaps(n))
    return t[t < horizon_s] if horizon_s is not None else t


@dataclass(frozen=True)
class PoissonArrival(Arrival):
    """Poisson process: exponential gaps with mean ``1/rate_per_s``."""

    rate_per_s: float

    def times(self, n, rng, horizon_s=None):
        return _renewal(lambda k: rng.exponential(1.0 / self.rate_per_s, k), n, horizon_s, 1.0 / self.rate_per_s)

    def describe(self) -> str:
        return f"Poisson {self.rate_per_s:g} req/s"


@dataclass(frozen=True)
class GammaArrival(Arrival):
    """Gamma renewal process: gaps with mean ``1/rate_per_s`` and coefficient of variation ``cv``.

    Shape ``k = 1/cv²``, scale ``1/(rate·k)``; ``cv = 1`` is Poisson, ``cv > 1`` is burstier.
    """

    rate_per_s: float
    cv: float

    def times(self, n, rng, horizon_s=None):
        shape = 1.0 / (self.cv * self.cv)
        scale = 1.0 / (self.rate_per_s * shape)
        return _renewal(lambda k: rng.gamma(shape, scale, k), n, horizon_s, 1.0 / self.rate_per_s)

    def describe(self) -> str:
        return f"Gamma {self.rate_per_s:g} req/s, CV {self.cv:g}"


@dataclass(frozen=True)
class FixedArrival(Arrival):
    """Deterministic arrivals every ``interval_s`` starting at t = 0 (HYDRA: 0.01 s, i.e. 100 req/s)."""

    interval_s: float

    def times(self, n, rng, horizon_s=None):
        if n is None:
            assert horizon_s is not None
            n = int(np.ceil(horizon_s / self.interval_s))
        t = np.arange(n, dtype=np.float64) * self.interval_s
        return t[t < horizon_s] if horizon_s is not None else t

    def describe(self) -> str:
        return f"fixed every {self.interval_s * 1e3:g} ms"


@dataclass(frozen=True)
class TraceArrival(Arrival):
    """The trace's own timestamps (relative to its first request), multiplied by ``time_scale``.

    ``time_scale`` < 1 compresses time (a higher rate). With ``rate_per_s`` set instead, the scale is chosen so
    that the trace's mean rate becomes ``rate_per_s``.
    """

    time_scale: float = 1.0
    rate_per_s: float | None = None
    needs_trace = True

    def scale_for(self, trace_rate_per_s: float | None) -> float:
        """The multiplier applied to trace timestamps."""
        if self.rate_per_s is None:
            return self.time_scale
        if not trace_rate_per_s:
            raise ConfigError("cannot rescale a trace without a time span to a rate", key="arrival.rate_per_s")
        return trace_rate_per_s / self.rate_per_s

    def times(self, n, rng, horizon_s=None):  # pragma: no cover - the workload applies trace times itself
        raise ConfigError("trace arrivals need a trace with timestamps", key="arrival.process", value="trace")

    def describe(self) -> str:
        if self.rate_per_s is not None:
            return f"trace timestamps rescaled to {self.rate_per_s:g} req/s"
        return f"trace timestamps x{self.time_scale:g}"


def arrival_from_node(node: Node) -> Arrival:
    """Parse an ``arrival:`` mapping (``process`` plus its parameters; unknown keys are errors)."""
    node.mapping()
    process = node.get("process").str(choices=PROCESSES)
    arr: Arrival
    if process == "poisson":
        arr = PoissonArrival(node.get("rate_per_s").number(positive=True))
    elif process == "gamma":
        arr = GammaArrival(node.get("rate_per_s").number(positive=True), node.get("cv").number(positive=True))
    elif process == "fixed":
        arr = FixedArrival(node.get("interval_s").number(positive=True))
    else:
        scale = node.get("time_scale", None)
        rate = node.get("rate_per_s", None)
        if scale.data is not None and rate.data is not None:
            raise rate.error("cannot be combined with time_scale; give one of them")
        arr = TraceArrival(
            time_scale=scale.number(positive=True) if scale.data is not None else 1.0,
            rate_per_s=rate.number(positive=True) if rate.data is not None else None,
        )
    node.done()
    return arr
