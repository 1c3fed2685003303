"""The estimator's options and result records."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = ["EstimatorOptions", "Estimate"]


@dataclass(frozen=True)
class EstimatorOptions:
    """Knobs of the estimator's model. Defaults are physical/documented, never tuned per workload (docs/estimator.md).

    What run is estimated (horizon, requests and arrivals, TTFT and window rules, precision, presets, token budget,
    pipeline depth, lending) is the :class:`~hydra_opt.evaluate.scenario.Scenario` the simulator reads too.

    Attributes:
        n_samples: Requests drawn from the workload to compute length moments.
        seed: Seed of the request stream the moments are drawn from (None: 0, the simulator's default seed).
        lend_efficiency: Fraction of a lent chiplet's opcost rate that is realised (migration and queue-status
            lag), in (0, 1].
        balance_efficiency: Fraction of the static-mapping imbalance that dynamic schedulers (fcfs, worksteal,
            elastic) remove, in [0, 1].
        window_s: ``(start, end)`` of the throughput/TTFT measurement window, s, overriding the scenario's window
            rule (None: the simulator's ``measure`` window, ``[a0 + warmup_frac·(a1 − a0), min(a1, horizon)]`` over
            the arrivals ``a0..a1`` before the horizon). For calibration studies of the model.
    """

    n_samples: int = 4000
    seed: int | None = None
    lend_efficiency: float = 0.9
    balance_efficiency: float = 1.0
    window_s: tuple[float, float] | None = None


@dataclass(frozen=True)
class Estimate:
    """Result of one estimate.

    Attributes:
        throughput_tok_s: Output tokens per second over the measurement window.
        ttft_mean_s: Mean time to first token, s.
        tpot_mean_s: Mean time per output token after the first, s.
        capacity_tok_s: Saturated output-token capacity (offered load unbounded), tokens/s.
        bottleneck: Name of the resource that limits the capacity (``"compute:<chiplet>"``, ``"hbm"``,
            ``"noi"``, ``"memory_capacity"``, ``"arrivals"``, ``"infeasible"``).
        diagnostics: Everything else (π over states, per-phase rates, utilisations...), JSON-friendly.
    """

    throughput_tok_s: float
    ttft_mean_s: float
    tpot_mean_s: float
    capacity_tok_s: float
    bottleneck: str
    diagnostics: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (numpy values converted, non-finite numbers as strings)."""
        return _clean(asdict(self))


def _clean(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, np.ndarray):
        return [_clean(x) for x in v.tolist()]
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return f if np.isfinite(f) else str(f)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v
