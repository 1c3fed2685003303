"""The promotion pruner: which estimated trials deserve a full simulation.

HYDRA §VI-B uses its fast estimator to find *candidate* Pareto-optimal designs and only simulates those. Here every
trial is first estimated; the estimates are stored as user attributes ``est_<metric>`` (see
:mod:`hydra_opt.evaluate.objectives`). :class:`PromotionPruner` then decides from the estimates of *all trials in the
storage* — so it works unchanged across distributed workers — whether the trial is promoted to simulation
(``prune`` returns False) or ends PRUNED with its estimates kept (``prune`` returns True).

Rules (``rule``):

* ``rank``: promoted when the trial's estimate lies in the first ``k_ranks`` non-dominated fronts (non-dominated
  sorting, as in NSGA-II) of all estimates in storage;
* ``epsilon``: promoted when the trial, improved by a relative ``epsilon`` in every objective (throughput × (1+ε),
  latency ÷ (1+ε)), is not dominated by any stored estimate — i.e. it is within ε of the estimated front;
* ``either`` (default): promoted when either holds.

During warm-up (fewer than ``n_warmup_trials`` *other* estimated trials in storage) every trial is promoted, so the
sampler quickly gets simulated values to learn from.

Optuna 5 forbids ``trial.report``/``should_prune`` in multi-objective studies, so the objective calls
``pruner.prune(study, frozen_trial)`` itself. The decision is a pure function of the set of (estimate vector,
direction) values in storage: two storages holding the same trials give the same decisions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import optuna
from optuna.study import StudyDirection

from hydra_opt.evaluate.front import pareto_mask

__all__ = [
    "PromotionPruner",
    "Promotion",
    "RULES",
    "estimate_vector",
    "dominated_by_any",
    "nondominated_rank",
    "within_epsilon",
]

#: Promotion rules.
RULES: tuple[str, ...] = ("rank", "epsilon", "either")


@dataclass(frozen=True)
class Promotion:
    """A promotion decision with its reason.

    Attributes:
        promoted: Whether the trial is simulated.
        reason: ``"warmup"``, ``"collecting"``, ``"rank"``, ``"epsilon"``, ``"dominated"`` or ``"no-estimate"``.
        rank: The trial's non-dominated rank (0 = on the estimated front), or -1 when not computed.
        pool: Number of estimated trials the decision looked at (including this one).
    """

    promoted: bool
    reason: str
    rank: int = -1
    pool: int = 0


def estimate_vector(trial: optuna.trial.FrozenTrial, metrics: Sequence[str], prefix: str = "est_") -> np.ndarray | None:
    """The trial's estimates in objective order, or None when any is missing or not finite."""
    vals = []
    for m in metrics:
        v = trial.user_attrs.get(prefix + m)
        if v is None or isinstance(v, bool):
            return None
        try:
            f = float(v)
        except (TypeError, ValueError):
            return None
        if not math.isfinite(f):
            return None
        vals.append(f)
    return np.asarray(vals, dtype=np.float64)


def _as_minimization(points: np.ndarray, directions: Sequence[StudyDirection]) -> np.ndarray:
    sign = np.array([-1.0 if d == StudyDirection.MAXIMIZE else 1.0 for d in directions])
    return points * sign


def dominated_by_any(point: np.ndarray, others: np.ndarray) -> bool:
    """Whether some row of ``others`` dominates ``point`` (minimisation: ≤ everywhere, < somewhere)."""
    if others.size == 0:
        return False
    le = np.all(others <= point, axis=1)
    lt = np.any(others < point, axis=1)
    return bool(np.any(le & lt))


def nondominated_rank(points: np.ndarray, index: int, max_rank: int) -> int:
    """Non-dominated rank of row ``index`` (0 = front), or ``max_rank`` when it is ``max_rank`` or worse.

    Points are in minimisation orientation. Fronts are peeled one at a time, at most ``max_rank`` of them.
    """
    if not dominated_by_any(points[index], np.delete(points, index, axis=0)):
        return 0
    alive = np.ones(len(points), dtype=bool)
    for r in range(max_rank):
        idx = np.flatnonzero(alive)
        front = pareto_mask(points[idx])
        if front[np.searchsorted(idx, index)]:
            return r
        alive[idx[front]] = False
    return max_rank


def _improve(point: np.ndarray, maximized: np.ndarray, epsilon: float) -> np.ndarray:
    # Minimisation orientation: a maximised metric x is stored as -x, so "x × (1+ε)" is "-x - ε·|x|";
    # a minimised metric x improves to x ÷ (1+ε) = x - ε·|x|/(1+ε) (for x > 0).
    mag = np.abs(point)
    return np.where(maximized, point - epsilon * mag, point - epsilon * mag / (1.0 + epsilon))


def within_epsilon(points: np.ndarray, index: int, epsilon: float, maximized: np.ndarray) -> bool:
    """Whether row ``index``, improved by a relative ``epsilon`` in every objective, is not dominated.

    Args:
        points: Objective vectors in minimisation orientation (maximised metrics negated).
        index: The row to judge.
        epsilon: Relative slack (0.05 = throughput × 1.05 and latency ÷ 1.05).
        maximized: Per column, whether the metric is maximised (negated in ``points``).
    """
    improved = _improve(points[index], maximized, epsilon)
    return not dominated_by_any(improved, np.delete(points, index, axis=0))


class PromotionPruner(optuna.pruners.BasePruner):
    """Promote a trial to simulation when its estimate is near the estimated Pareto front.

    Args:
        metrics: Metric names in objective order; the estimates are read from the user attributes
            ``<prefix><metric>``.
        rule: ``"rank"``, ``"epsilon"`` or ``"either"`` (see the module docstring).
        k_ranks: Number of leading non-dominated fronts that are promoted (``rank`` rule), ≥ 1.
        epsilon: Relative slack of the ``epsilon`` rule, ≥ 0 (0.05 = within 5 %).
        n_warmup_trials: Every trial is promoted while fewer than this many other estimated trials exist.
        min_estimates: After the warm-up, no trial is promoted while fewer than this many other estimated trials
            exist (reason ``collecting``); the study runner then re-proposes the collected designs that lie on
            the estimated front, so they are simulated (useful with a tight simulation budget).
        prefix: User-attribute prefix of the estimates.
    """

    def __init__(
        self,
        metrics: Sequence[str],
        *,
        rule: str = "either",
        k_ranks: int = 1,
        epsilon: float = 0.05,
        n_warmup_trials: int = 10,
        min_estimates: int = 0,
        prefix: str = "est_",
    ) -> None:
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        if k_ranks < 1:
            raise ValueError("k_ranks must be >= 1")
        if not (epsilon >= 0 and math.isfinite(epsilon)):
            raise ValueError("epsilon must be a finite number >= 0")
        if n_warmup_trials < 0:
            raise ValueError("n_warmup_trials must be >= 0")
        if min_estimates < 0:
            raise ValueError("min_estimates must be >= 0")
        if not metrics:
            raise ValueError("metrics must not be empty")
        self.metrics = tuple(metrics)
        self.rule = rule
        self.k_ranks = int(k_ranks)
        self.epsilon = float(epsilon)
        self.n_warmup_trials = int(n_warmup_trials)
        self.min_estimates = int(min_estimates)
        self.prefix = prefix

    def prune(self, study: optuna.study.Study, trial: optuna.trial.FrozenTrial) -> bool:
        """True when the trial should end PRUNED (not promoted); see :meth:`decide`."""
        return not self.decide(study, trial).promoted

    def decide(self, study: optuna.study.Study, trial: optuna.trial.FrozenTrial) -> Promotion:
        """The promotion decision for ``trial`` given every estimated trial in ``study``'s storage."""
        return self.decide_among(study.get_trials(deepcopy=False), trial, study.directions)

    def decide_among(
        self,
        trials: Sequence[optuna.trial.FrozenTrial],
        trial: optuna.trial.FrozenTrial,
        directions: Sequence[StudyDirection],
    ) -> Promotion:
        """The decision for ``trial`` among ``trials`` (the storage's content); pure and order-independent."""
        if len(directions) != len(self.metrics):
            raise ValueError(f"the study has {len(directions)} objectives but the pruner {len(self.metrics)} metrics")
        mine = estimate_vector(trial, self.metrics, self.prefix)
        if mine is None:
            # Nothing to judge on: keep the trial (never silently drop a design we cannot rank).
            return Promotion(True, "no-estimate")
        others = [
            v for t in trials if t.number != trial.number and (v := estimate_vector(t, self.metrics, self.prefix)) is not None
        ]
        pool = len(others) + 1
        if len(others) < self.n_warmup_trials:
            return Promotion(True, "warmup", pool=pool)
        if len(others) < self.min_estimates:
            # Estimate-only phase: build the estimated front before spending simulations (tight budgets).
            return Promotion(False, "collecting", pool=pool)
        # Sort so the decision cannot depend on the storage's row order (it does not mathematically, but float
        # reductions stay bit-identical this way).
        others_arr = np.array(sorted(map(tuple, others))) if others else np.empty((0, len(self.metrics)))
        points = _as_minimization(np.vstack([mine[None, :], others_arr]), directions)
        maximized = np.array([d == StudyDirection.MAXIMIZE for d in directions])
        rank = nondominated_rank(points, 0, self.k_ranks)
        if self.rule in ("rank", "either") and rank < self.k_ranks:
            return Promotion(True, "rank", rank, pool)
        if self.rule in ("epsilon", "either") and within_epsilon(points, 0, self.epsilon, maximized):
            return Promotion(True, "epsilon", rank, pool)
        return Promotion(False, "dominated", rank, pool)
