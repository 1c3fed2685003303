"""The estimator's options and result records."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = ["EstimatorOptions", "Estimate"]


@dataclass(frozen=True)
class EstimatorOptions:
    """Knobs of the estimator. Defaults are physical/documented, never tuned per workload (docs/estimator.md).

    Attributes:
        n_samples: Requests drawn from the workload to compute length moments.
        n_requests: Use only the first ``n_requests`` requests of the workload (as ``SimOptions.n_requests``).
        seed: Seed of that draw (None: the workload's own seed).
        precision: Numeric precision name (None: the model's/HYDRA default ``int8``).
        lend: Cross-phase lending under the elastic scheduler (decode chiplets may take prefill work and vice
            versa); None: follow the design/simulator default (off).
        lend_efficiency: Fraction of a lent chiplet's opcost rate that is realised (migration and queue-status
            lag), in (0, 1].
        balance_efficiency: Fraction of the static-mapping imbalance that dynamic schedulers (fcfs, worksteal,
            elastic) remove, in [0, 1].
        max_batches_in_flight: Upper bound on concurrently running batches (None: the simulator's rule).
        window_s: ``(start, end)`` of the throughput/TTFT measurement window, s (None: the simulator's default,
            ``[a0 + warmup_frac·(a1 − a0), min(a1, horizon)]`` over the arrivals ``a0..a1`` before the horizon).
        horizon_s: Simulated horizon the estimate refers to, s (None: the workload's; None there = until done).
        warmup_frac: Fraction of the arrival span excluded at the start of the window (the simulator's 0.1).
        ttft_from: ``"arrival"`` (default: includes queueing before admission) or ``"batch_start"`` (the HYDRA
            artifact's definition).
        placement_preset: Placement preset whose memory groups the estimator assumes, as the simulator's
            (``"clean"``: ``SimOptions()``; ``"paper"``: ``SimOptions.paper()``).
        token_budget: Tokens of one pass (``SimOptions.token_budget``): continuous batching's prefill pass,
            chunked prefill's whole pass (decodes + chunks).
    """

    n_samples: int = 4000
    n_requests: int | None = None
    seed: int | None = None
    precision: str | None = None
    lend: bool | None = None
    lend_efficiency: float = 0.9
    balance_efficiency: float = 1.0
    max_batches_in_flight: int | None = None
    window_s: tuple[float, float] | None = None
    horizon_s: float | None = None
    warmup_frac: float = 0.1
    ttft_from: str = "arrival"
    placement_preset: str = "clean"
    token_budget: int = 8192

    def __post_init__(self) -> None:
        if self.placement_preset not in ("clean", "paper"):
            raise ValueError(f"placement_preset must be 'clean' or 'paper', got {self.placement_preset!r}")


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
