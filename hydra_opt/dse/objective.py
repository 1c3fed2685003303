"""The study's objective, :class:`DseObjective`: estimate → promote → simulate, one Optuna trial at a time.

One trial:

1. the search space proposes a design dict; it is stored as the user attribute ``design``;
2. infeasible designs (memory capacity, area, ...) end PRUNED with constraint value > 0 and the reasons in the
   user attribute ``infeasible`` — Optuna constraints, not crashes;
3. the design is estimated on every pair; aggregated estimates go to ``est_<metric>`` user attributes;
4. :class:`~hydra_opt.dse.pruner.PromotionPruner` decides from the estimates of all trials in storage; a trial that
   is not promoted ends PRUNED with its estimates kept;
5. a promoted trial is simulated on every pair; it COMPLETEs with the aggregated simulated values (also stored as
   ``sim_<metric>``), and its artifacts (design YAML, NoI heatmap, per-request CSV) are uploaded.

A design already simulated in this study (same ``design_key``) reuses the stored values instead of simulating again.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import TrialState

from hydra_opt.config import ConfigError
from hydra_opt.dse.evaluators import Evaluator
from hydra_opt.dse.pruner import Promotion, PromotionPruner
from hydra_opt.dse.samplers import CONSTRAINTS_ATTR
from hydra_opt.dse.spec import StudySpec, design_key

__all__ = ["DseObjective", "TrialReport", "BudgetReached", "FINISHED_STATES", "PLAN_ATTR"]

#: States that count toward the budget (FAIL does not: a failed trial is retried or replaced).
FINISHED_STATES: tuple[TrialState, ...] = (TrialState.COMPLETE, TrialState.PRUNED)
#: Trial user attribute set on a trial the calibrated simulation plan enqueued (its value: the plan's reason).
PLAN_ATTR = "planned"


class BudgetReached(Exception):
    """Raised inside a trial that was created after the budget was already filled by other workers."""


@dataclass
class TrialReport:
    """What the objective learned about one trial (for progress lines)."""

    number: int
    state: str
    promotion: Promotion | None = None
    est: dict[str, float] = field(default_factory=dict)
    sim: dict[str, float] = field(default_factory=dict)
    design: dict[str, Any] = field(default_factory=dict)
    infeasible: list[str] = field(default_factory=list)


class DseObjective:
    """The study's objective: estimate, promote, simulate (see the module docstring).

    Args:
        spec: The study spec.
        evaluator: The evaluator.
        artifact_store: Optuna artifact store, or None.
        budget: Total finished-trial budget to respect (None = none).
    """

    def __init__(self, spec: StudySpec, evaluator: Evaluator, *, artifact_store: Any = None, budget: int | None = None) -> None:
        self.spec = spec
        self.evaluator = evaluator
        self.artifact_store = artifact_store
        self.budget = budget
        self.metrics = [m.name for m in spec.objectives.metrics]
        self.pruner = PromotionPruner(
            self.metrics, rule=spec.pruner.rule, k_ranks=spec.pruner.k_ranks, epsilon=spec.pruner.epsilon,
            n_warmup_trials=spec.pruner.n_warmup_trials, min_estimates=spec.pruner.min_estimates,
        )
        self.pairs = []
        for key, (m, w) in zip(spec.pair_keys, spec.pairs):
            try:
                self.pairs.append((key, *evaluator.load(m, w)))
            except ConfigError as exc:
                if exc.file:  # the error is inside a model/workload file: it names its own location
                    raise
                raise ConfigError(exc.problem, file=spec.file, key=exc.key or "pairs", value=exc.value,
                                  show_value=exc.show_value) from None
        self.last: TrialReport | None = None
        self.n_constraints = 1 + len(spec.objectives.constraints)

    def _check_budget(self, trial: optuna.Trial) -> None:
        if self.budget is None or trial.number < self.budget:
            return  # fewer than `budget` trials can precede this one: no storage read needed
        live = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)
        ahead = sum(1 for t in trial.study.get_trials(deepcopy=False, states=live) if t.number < trial.number)
        if ahead >= self.budget:
            trial.set_user_attr("budget_overflow", True)  # created in a race at the budget's end; not an error
            raise BudgetReached()

    def __call__(self, trial: optuna.Trial) -> Sequence[float]:
        self._check_budget(trial)
        spec = self.spec
        design_dict = spec.space.suggest(trial)
        key = design_key(design_dict)
        trial.set_user_attr("design", design_dict)
        trial.set_user_attr("design_key", key)
        report = TrialReport(trial.number, "PRUNED", design=design_dict)
        self.last = report

        reasons: list[str] = []
        try:
            design = self.evaluator.design(design_dict)
        except ConfigError as exc:
            design, reasons = None, [f"design rejected: {exc.problem}"]
        if design is not None:
            for pkey, model, _ in self.pairs:
                for r in self.evaluator.feasibility(design, model):
                    reasons.append(r if len(self.pairs) == 1 else f"{pkey}: {r}")
        if reasons:
            trial.set_user_attr("infeasible", reasons[:20])
            trial.set_user_attr(CONSTRAINTS_ATTR, [float(len(reasons))] + [1.0] * (self.n_constraints - 1))
            report.infeasible = reasons
            raise optuna.TrialPruned(f"infeasible: {reasons[0]}")

        per_pair = {pkey: self.evaluator.estimate(design, model, wl) for pkey, model, wl in self.pairs}
        est = spec.objectives.combine(per_pair)
        report.est = est
        for m, v in est.items():
            trial.set_user_attr(f"est_{m}", _finite(v))
        if len(self.pairs) > 1:
            trial.set_user_attr("est_pairs", {p: {m.name: _finite(m.read(r)) for m in spec.objectives.needed()} for p, r in per_pair.items()})
        trial.set_user_attr(CONSTRAINTS_ATTR, [0.0] + spec.objectives.constraint_values(est))
        if not all(math.isfinite(v) for v in spec.objectives.values(est)):
            # e.g. an unbounded TTFT: the estimator predicts the design cannot serve the load; never promoted.
            trial.set_user_attr("promotion", "non-finite-estimate")
            report.promotion = Promotion(False, "non-finite-estimate")
            raise optuna.TrialPruned("non-finite estimate")

        trials = trial.study.get_trials(deepcopy=False)
        # A design this study already simulated: reuse its values (same design, same simulation seed).
        for t in trials:
            if t.state == TrialState.COMPLETE and t.user_attrs.get("design_key") == key and t.values is not None:
                trial.set_user_attr("duplicate_of", t.number)
                trial.set_user_attr("promotion", "duplicate")
                for m in spec.objectives.needed():
                    if f"sim_{m.name}" in t.user_attrs:
                        trial.set_user_attr(f"sim_{m.name}", t.user_attrs[f"sim_{m.name}"])
                trial.set_user_attr(CONSTRAINTS_ATTR, t.user_attrs.get(CONSTRAINTS_ATTR, [0.0]))
                report.state, report.sim = "COMPLETE", {m.name: t.user_attrs.get(f"sim_{m.name}", math.nan) for m in spec.objectives.needed()}
                report.promotion = Promotion(True, "duplicate")
                return list(t.values)

        planned = trial.user_attrs.get(PLAN_ATTR) if spec.plan == "calibrated" else None
        if planned is not None:
            decision = Promotion(True, str(planned))  # chosen by the simulation plan (hydra_opt.dse.callbacks.plan_callback)
        elif spec.plan == "calibrated":
            decision = Promotion(False, "deferred")  # the plan spends the simulations at the end of the study
        elif spec.pruner.enabled:
            me = next(t for t in trials if t.number == trial.number)
            decision = self.pruner.decide_among(trials, me, trial.study.directions)
        else:
            decision = Promotion(True, "all")
        if decision.promoted and spec.max_simulations is not None:
            simulated = {t.user_attrs.get("design_key") for t in trials
                         if t.number != trial.number and "sim_wall_s" in t.user_attrs}
            if len(simulated) >= spec.max_simulations:
                decision = Promotion(False, "simulation-budget", decision.rank, decision.pool)
        report.promotion = decision
        trial.set_user_attr("promotion", decision.reason)
        trial.set_user_attr("est_rank", decision.rank)
        if not decision.promoted:
            raise optuna.TrialPruned(f"not promoted (estimated rank {decision.rank})")

        t0 = time.perf_counter()
        outcomes = {pkey: self.evaluator.simulate(design, model, wl, seed=spec.sim_seed) for pkey, model, wl in self.pairs}
        sim = spec.objectives.combine({p: o.metrics for p, o in outcomes.items()})
        trial.set_user_attr("sim_wall_s", round(time.perf_counter() - t0, 4))
        for m, v in sim.items():
            trial.set_user_attr(f"sim_{m}", _finite(v))
        trial.set_user_attr(CONSTRAINTS_ATTR, [0.0] + spec.objectives.constraint_values(sim))
        if self.artifact_store is not None:
            from hydra_opt.dse.artifacts import upload_trial_artifacts

            upload_trial_artifacts(self.artifact_store, trial, design_dict, outcomes, design_obj=design)
        values = spec.objectives.values(sim)
        if not all(math.isfinite(v) for v in values):
            raise optuna.TrialPruned(f"simulation gave non-finite objective values {values}")
        report.state, report.sim = "COMPLETE", sim
        return values


def _finite(v: float) -> float | None:
    """JSON-safe value for user attributes (non-finite → None)."""
    return float(v) if v is not None and math.isfinite(v) else None
