"""How a tight simulation budget is spent: the ``calibrated`` simulation plan.

The promotion pruner promotes a trial the moment its estimate looks good, so with a budget of a few simulations
(``budget.max_simulations``) the budget is gone after the first few estimated-front designs, most of them taken
from an early, sparse estimated front, and they are chosen by the estimator's ranking alone. The estimator's
*systematic* errors then decide the result: on the Llama-3-8B quickstart sub-space it under-rates the designs
with more HBM stacks by 10-20 % (throughput), so the estimated front holds none of the simulated best designs
(``benchmarks/results/dse_recovery_*.md``).

The calibrated plan (``budget: {plan: calibrated}``) instead

1. estimates trials only ("deferred") until the number of trials left in the study equals the simulations left,
   so every simulation is chosen from all the estimates the study will ever have;
2. spends the first third of the simulations (at least one) on the estimated front (the pruner's ``k_ranks``
   leading non-dominated fronts), extremes first: the best estimate of the first objective, the best of the
   second, then each time the front point farthest (normalised objective space) from those already taken — so the
   two ends and the middle of the front are pinned down;
3. spends the rest on the design with the best *calibrated* first objective: the estimate multiplied by
   ``exp(r(x))``, where ``r`` is a ridge regression (unit penalty on min-max-normalised design features, free
   intercept) of ``log(simulated / estimated)`` on the designs simulated so far. This learns the estimator's
   error as a function of the design (e.g. "more HBM: simulated throughput higher than estimated") and follows it,
   one simulation at a time. When a value is not positive the additive error ``simulated - estimated`` is used.

Everything here is a pure function of the designs, estimates and simulated values (the study adapter sorts its
pool by design key), so two storages holding the same trials plan the same next design.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hydra_opt.evaluate.front import front_ranks

__all__ = ["PLANS", "design_features", "front_phase_size", "plan_next", "calibrated_values"]

#: Simulation plans. ``greedy`` = promote as the pruner decides until the cap; ``calibrated`` (a study's ``auto``
#: default picks calibrated when ``budget.max_simulations`` is set, else greedy).
PLANS: tuple[str, ...] = ("greedy", "calibrated")

#: Ridge penalty on the normalised design features of the error model (a unit prior: "the estimator is right").
RIDGE = 1.0


def front_phase_size(n_budget: int) -> int:
    """Simulations spent on the estimated front before the calibrated phase: a third of the budget, ≥ 1."""
    return max(1, math.ceil(n_budget / 3))


def design_features(designs: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Feature matrix of design dicts: numeric leaves (nested keys flattened), one-hot string/bool leaves, each
    column min-max-normalised to [0, 1]; constant columns dropped. Shape ``(len(designs), n_features)``."""
    rows: list[dict[str, float]] = []
    for d in designs:
        row: dict[str, float] = {}

        def walk(node: Any, prefix: str) -> None:
            if isinstance(node, Mapping):
                for k in sorted(node):
                    walk(node[k], f"{prefix}{k}.")
            elif isinstance(node, bool) or isinstance(node, str):
                row[f"{prefix}={node}"] = 1.0
            elif isinstance(node, (int, float)) and math.isfinite(float(node)):
                row[prefix] = float(node)
            elif isinstance(node, (list, tuple)):
                for i, v in enumerate(node):
                    walk(v, f"{prefix}{i}.")

        walk(d, "")
        rows.append(row)
    cols = sorted({k for r in rows for k in r})
    x = np.array([[r.get(c, 0.0) for c in cols] for r in rows], dtype=float).reshape(len(rows), len(cols))
    if x.size == 0:
        return x
    lo, hi = x.min(axis=0), x.max(axis=0)
    keep = hi > lo
    return (x[:, keep] - lo[keep]) / (hi[keep] - lo[keep])


def spread_order(points: np.ndarray) -> list[int]:
    """Order of the rows of ``points`` (minimisation): best first column, best last column, then each time the row
    farthest (min-max-normalised Euclidean distance) from those already ordered; ties go to the lower index."""
    n = len(points)
    if n == 0:
        return []
    lo, hi = points.min(axis=0), points.max(axis=0)
    p = (points - lo) / np.where(hi > lo, hi - lo, 1.0)
    order = list(dict.fromkeys([int(np.argmin(points[:, 0])), int(np.argmin(points[:, -1]))]))
    while len(order) < n:
        dist = np.min(np.linalg.norm(p[:, None, :] - p[None, order, :], axis=2), axis=1)
        dist[order] = -1.0
        order.append(int(np.argmax(dist)))
    return order


def calibrated_values(est: np.ndarray, sim: np.ndarray, features: np.ndarray, *, ridge: float = RIDGE) -> np.ndarray:
    """The estimates ``est`` (one metric, all rows) corrected by the estimator's error learned on the rows where
    ``sim`` is finite (see the module docstring)."""
    done = np.isfinite(sim)
    if not done.any():
        return est.copy()
    log = bool(np.all(est > 0) and np.all(sim[done] > 0))
    y = np.log(sim[done] / est[done]) if log else sim[done] - est[done]
    x = features[done]
    mu = x.mean(axis=0)
    xc = x - mu
    w = np.linalg.solve(xc.T @ xc + ridge * np.eye(x.shape[1]), xc.T @ (y - y.mean())) if x.shape[1] else np.zeros(0)
    err = y.mean() + (features - mu) @ w
    return est * np.exp(err) if log else est + err


def plan_next(
    est: np.ndarray,
    sim: np.ndarray,
    features: np.ndarray,
    maximize: Sequence[bool],
    n_budget: int,
    *,
    k_ranks: int = 1,
) -> tuple[int, str] | None:
    """The next design to simulate under the calibrated plan.

    Args:
        est: ``(n, m)`` finite estimated objective values of the candidate pool (one row per distinct design).
        sim: ``(n, m)`` simulated values, NaN for the designs not simulated yet (any other non-finite value marks
            a simulated design without usable values: never picked again, not used for calibration).
        features: ``(n, f)`` design features (:func:`design_features`).
        maximize: Per objective, whether it is maximised.
        n_budget: Total simulation budget of the study.
        k_ranks: Leading non-dominated fronts of the estimates that form the "estimated front".

    Returns:
        ``(row, reason)`` with reason ``"plan-front"`` or ``"plan-calibrated"``, or None when every row is simulated.
    """
    est = np.asarray(est, dtype=float)
    sim = np.asarray(sim, dtype=float).reshape(est.shape)
    done = np.any(~np.isnan(sim), axis=1)
    if done.all():
        return None
    sign = np.array([-1.0 if mx else 1.0 for mx in maximize])
    pts = est * sign
    if done.sum() < front_phase_size(n_budget):
        front = np.flatnonzero(front_ranks(pts, k_ranks) < k_ranks)
        for j in spread_order(pts[front]):
            if not done[front[j]]:
                return int(front[j]), "plan-front"
    usable = np.all(np.isfinite(sim), axis=1)
    corrected = calibrated_values(est[:, 0], np.where(usable, sim[:, 0], np.nan), features) * sign[0]
    corrected[done] = np.inf
    return int(np.argmin(corrected)), "plan-calibrated"
