"""The runner's Optuna callbacks: stop at the total budget, revisit the estimated front, spend a planned
simulation budget (``budget.plan: calibrated``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from hydra_opt.dse.objective import FINISHED_STATES, PLAN_ATTR, DseObjective, trial_design
from hydra_opt.dse.plan import design_features, plan_next
from hydra_opt.dse.pruner import PromotionPruner, estimate_vector
from hydra_opt.dse.spec import StudySpec, design_key

__all__ = ["budget_callback", "revisit_callback", "plan_callback", "REVISIT_ATTR"]


def budget_callback(budget: int | None) -> Callable[[optuna.Study, FrozenTrial], None]:
    def cb(study: optuna.Study, trial: FrozenTrial) -> None:
        # Counting is a storage read; far from the end of the budget it cannot trigger (numbers are sequential;
        # the margin covers trials created concurrently by up to 64 other workers).
        if budget is None or trial.number + 1 < budget - 64:
            return
        live = study.get_trials(deepcopy=False, states=(*FINISHED_STATES, TrialState.RUNNING, TrialState.WAITING))
        if len(live) >= budget:
            study.stop()

    return cb


REVISIT_ATTR = "hydra_opt_revisited"


def revisit_callback(spec: StudySpec, pruner: PromotionPruner) -> Callable[[optuna.Study, FrozenTrial], None]:
    """After the estimate-only phase, enqueue the collected designs that lie on the estimated front (once)."""

    def cb(study: optuna.Study, _trial: FrozenTrial) -> None:
        if (not spec.pruner.enabled or pruner.min_estimates <= 0 or spec.plan == "calibrated"
                or study.user_attrs.get(REVISIT_ATTR)):
            return
        trials = study.get_trials(deepcopy=False)
        estimated = [t for t in trials if all(t.user_attrs.get(f"est_{m}") is not None for m in pruner.metrics)]
        if len(estimated) <= pruner.min_estimates:
            return
        study.set_user_attr(REVISIT_ATTR, True)
        rank_only = PromotionPruner(pruner.metrics, rule="rank", k_ranks=pruner.k_ranks, n_warmup_trials=0)
        seen: set[str] = set()
        for t in estimated:
            key = t.user_attrs.get("design_key", "")
            if t.user_attrs.get("promotion") != "collecting" or key in seen:
                continue
            if rank_only.decide_among(estimated, t, study.directions).promoted:
                seen.add(key)
                study.enqueue_trial(t.params, user_attrs={"revisit_of": t.number})

    return cb


@dataclass
class _PoolRow:
    """One distinct design the calibrated plan may pick."""

    source: FrozenTrial | None  # the trial that estimated it (None: a space design no trial proposed)
    design: dict[str, Any]
    params: dict[str, Any]  # what to enqueue to draw it
    est: np.ndarray  # estimates in objective order
    sim: np.ndarray | None = None  # simulated values, once simulated


def _space_pool(spec: StudySpec, objective: DseObjective) -> list[tuple[str, dict, dict, np.ndarray]]:
    """``(design key, design, params, estimates)`` of every feasible, finitely estimated design of the space."""
    from hydra_opt.dse.exhaustive import run_exhaustive

    items = list(spec.space.enumerate_params())
    res = run_exhaustive([d for d, _ in items], spec.pairs, spec.objectives, objective.evaluator, simulate=0)
    est = np.column_stack([res.est[m] for m in objective.metrics])
    return [(design_key(d), d, p, est[i]) for i, (d, p) in enumerate(items)
            if res.feasible[i] and np.all(np.isfinite(est[i]))]


def plan_callback(spec: StudySpec, objective: DseObjective) -> Callable[[optuna.Study, FrozenTrial], None]:
    """Calibrated plan: once the trials left in the study equal the simulations left, enqueue (one at a time) the
    design :func:`hydra_opt.dse.plan.plan_next` picks among the estimated designs (``plan_pool: estimated``) or
    the whole space (``plan_pool: space``); the objective promotes it (``promotion: plan-*``)."""
    metrics = objective.metrics
    space: list[tuple[str, dict, dict, np.ndarray]] | None = None  # estimated once, when the plan first runs

    def cb(study: optuna.Study, _trial: FrozenTrial) -> None:
        nonlocal space
        if spec.plan != "calibrated" or spec.n_trials is None or spec.max_simulations is None:
            return
        trials = study.get_trials(deepcopy=False)
        if any(t.state == TrialState.WAITING for t in trials):
            return  # a planned trial is already queued
        finished = sum(t.state in FINISHED_STATES for t in trials)
        simulated = {t.user_attrs.get("design_key") for t in trials if "sim_wall_s" in t.user_attrs}
        # Planned trials another worker is running count as spent (their design is not planned twice).
        running = {t.user_attrs.get("design_key") for t in trials
                   if t.state == TrialState.RUNNING and PLAN_ATTR in t.user_attrs}
        simulated |= running
        left_sims = spec.max_simulations - len(simulated)
        left_trials = spec.n_trials - finished
        if left_sims <= 0 or left_trials <= 0 or left_trials > left_sims:
            return
        # Pool: one row per distinct design (sorted by key: storage order cannot matter).
        pool: dict[str, _PoolRow] = {}
        for t in trials:
            key = t.user_attrs.get("design_key")
            est = estimate_vector(t, metrics)
            if key is None or est is None or key in pool or key in running:
                continue
            pool[key] = _PoolRow(t, trial_design(t), t.params, est)
        if spec.plan_pool == "space":
            if space is None:
                space = _space_pool(spec, objective)
            for key, design, params, est in space:
                if key not in pool and key not in running:
                    pool[key] = _PoolRow(None, design, params, est)
        for t in trials:
            key = t.user_attrs.get("design_key")
            if key in pool and "sim_wall_s" in t.user_attrs:
                sim = estimate_vector(t, metrics, prefix="sim_")
                if sim is None:
                    pool.pop(key)  # simulated without finite values: never planned again
                else:
                    pool[key].sim = sim
        if not pool:
            return
        rows = [pool[k] for k in sorted(pool)]
        est = np.array([r.est for r in rows])
        sim = np.array([r.sim if r.sim is not None else np.full(len(metrics), np.nan) for r in rows])
        feats = design_features([r.design for r in rows])
        maximize = [d == optuna.study.StudyDirection.MAXIMIZE for d in study.directions]
        pick = plan_next(est, sim, feats, maximize, spec.max_simulations, k_ranks=spec.pruner.k_ranks)
        if pick is not None:
            row = rows[pick[0]]
            attrs: dict[str, Any] = {PLAN_ATTR: pick[1]}
            if row.source is not None:
                attrs["revisit_of"] = row.source.number
            study.enqueue_trial(row.params, user_attrs=attrs)

    return cb
