"""The study's objective, :class:`DseObjective`: estimate → promote → simulate, one Optuna trial at a time.

One trial:

1. the search space proposes a design dict; it is stored as the trial system attribute ``design`` (read it with
   :func:`trial_design`), its one-line label as the user attribute ``design`` (short: the dashboard's trial panel
   does not wrap attribute values);
2. infeasible designs (memory capacity, area, ...) end PRUNED with constraint value > 0 and the reasons in the
   user attribute ``infeasible`` — Optuna constraints, not crashes;
3. the design is estimated on every pair; aggregated estimates go to ``est_<metric>`` user attributes;
4. :class:`~hydra_opt.dse.pruner.PromotionPruner` decides from the estimates of all trials in storage; a trial that
   is not promoted ends PRUNED with its estimates kept;
5. a promoted trial is simulated on every pair; it COMPLETEs with the aggregated simulated values (also stored as
   ``sim_<metric>``), and its artifacts (design YAML, NoI heatmap, per-request CSV) are uploaded.

A design already simulated in this study (same ``design_key``) is not simulated again: the trial ends PRUNED with
``duplicate_of`` and the simulated values copied to ``sim_*`` — so Optuna's (and optuna-dashboard's) best trials
are the distinct simulated designs, the CLI's front.

Every trial that is not simulated gets an optuna-dashboard note saying why (:mod:`hydra_opt.dse.reasons`).
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import optuna
from optuna.trial import TrialState

from hydra_opt.config import ConfigError, Node
from hydra_opt.dse.pruner import Promotion, PromotionPruner
from hydra_opt.dse.reasons import PROMOTION_TEXT, note_markdown, save_trial_note
from hydra_opt.dse.samplers import CONSTRAINTS_ATTR
from hydra_opt.dse.search_space import SearchSpace, load_search_space
from hydra_opt.dse.spec import PrunerSpec, StudySpec, design_key, load_study_spec
from hydra_opt.dse.trial_design import DESIGN_ATTR, design_label, trial_design
from hydra_opt.evaluate.evaluators import Evaluator
from hydra_opt.evaluate.objectives import DEFAULT_OBJECTIVES, ObjectiveSpec, load_objectives, parse_objectives

__all__ = ["DseObjective", "TrialReport", "BudgetReached", "FINISHED_STATES", "PLAN_ATTR", "DESIGN_ATTR", "trial_design"]

#: States that count toward the budget. FAIL does not, as a failed trial is retried or replaced.
FINISHED_STATES: tuple[TrialState, ...] = (TrialState.COMPLETE, TrialState.PRUNED)
#: Trial user attribute set on a trial the calibrated simulation plan enqueued; its value is the plan's reason.
PLAN_ATTR = "planned"


def _store_design(trial: optuna.Trial, design: dict[str, Any]) -> None:
    trial.storage.set_trial_system_attr(trial._trial_id, DESIGN_ATTR, design)
    trial.set_user_attr(DESIGN_ATTR, design_label(design))


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
    """The objective of a design-space study: estimate, promote, simulate (see the module docstring).

    An instance is a callable for :meth:`optuna.study.Study.optimize` and works with any sampler, storage and
    callbacks. Build it from Python objects with :meth:`from_objects`, from a study file with :meth:`from_yaml`, or
    from a parsed :class:`~hydra_opt.dse.spec.StudySpec`. The study must have one direction per objective
    (:attr:`directions`). A :class:`~hydra_opt.dse.pruner.PromotionPruner` given to
    :func:`optuna.create_study` (``pruner=``) decides promotion in place of the objective's own.

    Example:

        .. code-block:: python

            import optuna
            from hydra_opt.dse import DseObjective

            objective = DseObjective.from_yaml("studies/quickstart.yaml")
            study = optuna.create_study(directions=objective.directions)
            study.optimize(objective, n_trials=10)

    Args:
        spec: The study spec (what defines a trial: pairs, space, objectives, pruner, simulation cap and seed).
        evaluator: The evaluator (None: :meth:`~hydra_opt.dse.spec.StudySpec.make_evaluator`, the real estimator
            and simulator).
        artifact_store: Optuna artifact store receiving each simulated trial's artifacts, or None.
        budget: Total finished-trial budget to respect across workers (None = none; the runner's).
    """

    def __init__(self, spec: StudySpec, evaluator: Evaluator | None = None, *, artifact_store: Any = None,
                 budget: int | None = None) -> None:
        evaluator = evaluator if evaluator is not None else spec.make_evaluator()
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
        self._labelled: set[str] = set()  # names of the studies this objective has labelled

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str], *, evaluator: Evaluator | None = None,
                  artifact_store: Any = None) -> DseObjective:
        """The objective of a study file (``studies/*.yaml``).

        The file's pairs, search space, objectives, pruner, ``budget.max_simulations``, ``estimate:``,
        ``simulate:`` and ``evaluator:`` apply; its sampler, storage, ``n_trials`` and timeout do not (the caller's
        :func:`optuna.create_study` and :meth:`~optuna.study.Study.optimize` decide those; use
        :func:`~hydra_opt.dse.runner.run_study` to apply them). A calibrated simulation plan
        (``budget.plan: calibrated``) is spent by the runner's callback, so here it runs greedily: the pruner
        promotes until ``max_simulations`` distinct designs are simulated.

        Args:
            path: The study file.
            evaluator: The evaluator (None: the file's).
            artifact_store: Optuna artifact store for simulated trials' artifacts, or None.

        Returns:
            The objective.

        Raises:
            ConfigError: The file is invalid (the message names file, key and value).
        """
        spec = load_study_spec(path)
        if spec.plan == "calibrated":
            # The calibrated plan is driven by the runner's callback; called from Optuna directly it never simulates.
            spec = replace(spec, plan="greedy", plan_pool="estimated")
        return cls(spec, evaluator, artifact_store=artifact_store)

    @classmethod
    def from_objects(
        cls,
        model: Any = None,
        workload: Any = None,
        search_space: SearchSpace | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        *,
        pairs: Sequence[tuple[Any, Any]] | None = None,
        objectives: ObjectiveSpec | Sequence[str] | Mapping[str, Any] | str | os.PathLike[str] = DEFAULT_OBJECTIVES,
        pruner: PromotionPruner | bool = True,
        estimate_options: Any = None,
        simulate_options: Any = None,
        scenario: Any = None,
        sim_seed: int = 0,
        max_simulations: int | None = None,
        evaluator: Evaluator | None = None,
        artifact_store: Any = None,
        name: str = "python",
    ) -> DseObjective:
        """The objective built from Python objects.

        Args:
            model: A ``hydra_opt.workload.models.Model`` or a model name/path (``"llama-3-8b"``).
            workload: A ``hydra_opt.workload.workload.Workload`` or a workload name/path (``"chat"``).
            search_space: A :class:`~hydra_opt.dse.search_space.SearchSpace`, a search-space mapping in the YAML
                schema (``docs/dse.md``; ``kind`` may be omitted), or a search-space file.
            pairs: Several (model, workload) pairs instead of ``model`` and ``workload``; values aggregate over
                them as ``objectives`` says.
            objectives: An :class:`~hydra_opt.evaluate.objectives.ObjectiveSpec`, metric names from
                :data:`~hydra_opt.evaluate.objectives.METRICS` (``["throughput_tok_s", "ttft_s"]``), an objectives
                mapping in the YAML schema, or an objectives file.
            pruner: Promotion to simulation: True (default settings, as a study file without ``pruner:``), a
                :class:`~hydra_opt.dse.pruner.PromotionPruner` (its metrics must be the objectives' and its
                prefix ``"est_"``), or False (simulate every feasible trial).
            estimate_options: ``EstimatorOptions`` or an ``estimate:`` mapping (None: defaults; see
                :class:`~hydra_opt.evaluate.evaluators.HydraEvaluator`).
            simulate_options: ``SimOptions`` or a ``simulate:`` mapping (None: defaults).
            scenario: The run both evaluators describe: a ``hydra_opt.evaluate.Scenario`` or a ``scenario:``
                mapping (``preset: paper`` allowed; None: the defaults).
            sim_seed: Seed of every simulation (all designs see the same requests).
            max_simulations: Cap on distinct simulated designs in the study (None: none).
            evaluator: An evaluator to use instead of the real one (then the options are not used).
            artifact_store: Optuna artifact store for simulated trials' artifacts, or None.
            name: Name used in error messages.

        Returns:
            The objective.

        Raises:
            ConfigError: An invalid search space, objectives mapping, model or workload (located).
            ValueError: Neither or both of (``model``, ``workload``) and ``pairs``; no search space; a pruner
              that does not match the objectives.
        """
        if pairs is None:
            if model is None or workload is None:
                raise ValueError("give model and workload, or pairs")
            pairs = ((model, workload),)
        elif model is not None or workload is not None:
            raise ValueError("give model and workload, or pairs, not both")
        if search_space is None:
            raise ValueError("search_space is required")
        space = _as_search_space(search_space)
        objective_spec = _as_objectives(objectives)
        spec = StudySpec(
            name=name, file=f"<{name}>", pairs=tuple(pairs),
            space=space, objectives=objective_spec, pruner=_pruner_spec(pruner, objective_spec), n_trials=None,
            max_simulations=max_simulations, artifact_dir=None, sim_seed=sim_seed,
            estimate_options=estimate_options, simulate_options=simulate_options, scenario=scenario,
        )
        return cls(spec, evaluator, artifact_store=artifact_store)

    @property
    def directions(self) -> list[str]:
        """Optimisation directions in objective order (``directions=`` of :func:`optuna.create_study`)."""
        return list(self.spec.objectives.directions)

    @property
    def metric_names(self) -> list[str]:
        """Display names with units (``["throughput [tok/s]", "TTFT [s]"]``; for ``study.set_metric_names``)."""
        return list(self.spec.objectives.metric_names)

    def _check_study(self, study: optuna.Study) -> None:
        """Refuse a study with other directions; name the objectives of a study created outside the runner
        (metric names, the ``hydra_opt_metrics`` attribute reports read), once per study."""
        if len(study.directions) != len(self.metrics):
            raise ValueError(f"the study has {len(study.directions)} direction(s); this objective returns "
                             f"{len(self.metrics)} values {self.metrics}: create it with directions={self.directions}")
        if study.study_name in self._labelled:
            return
        if not study.user_attrs.get("hydra_opt_metrics"):
            study.set_user_attr("hydra_opt_metrics", list(self.metrics))
            if study.metric_names is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    study.set_metric_names(self.metric_names)
        self._labelled.add(study.study_name)

    def _promotion_pruner(self, study: optuna.Study) -> PromotionPruner | None:
        """The study's pruner when it is a :class:`PromotionPruner`, else the objective's (None: promote all)."""
        if isinstance(study.pruner, PromotionPruner):
            return _checked_pruner(study.pruner, self.metrics)
        return self.pruner if self.spec.pruner.enabled else None

    def _check_budget(self, trial: optuna.Trial) -> None:
        if self.budget is None or trial.number < self.budget:
            return  # fewer than `budget` trials can precede this one: no storage read needed
        live = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)
        ahead = sum(1 for t in trial.study.get_trials(deepcopy=False, states=live) if t.number < trial.number)
        if ahead >= self.budget:
            trial.set_user_attr("budget_overflow", True)  # created in a race at the budget's end; not an error
            raise BudgetReached()

    def __call__(self, trial: optuna.Trial) -> Sequence[float]:
        """Evaluate one trial.

        Args:
            trial: The trial (its study must have :attr:`directions`).

        Returns:
            The simulated objective values (COMPLETE).

        Raises:
            optuna.TrialPruned: The design is infeasible, not promoted, or its values are not finite.
            ValueError: The study's directions do not match the objectives.
        """
        self._check_study(trial.study)
        self._check_budget(trial)
        spec = self.spec
        design_dict = spec.space.suggest(trial)
        key = design_key(design_dict)
        _store_design(trial, design_dict)
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
            # All reasons in the system attribute (trial_infeasible); the user attribute stays one short line.
            trial.storage.set_trial_system_attr(trial._trial_id, "infeasible", reasons[:20])
            trial.set_user_attr("infeasible", reasons[0] + (f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""))
            trial.set_user_attr(CONSTRAINTS_ATTR, [float(len(reasons))] + [1.0] * (self.n_constraints - 1))
            report.infeasible = reasons
            save_trial_note(trial, note_markdown("infeasible", reasons))
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
            save_trial_note(trial, note_markdown("not promoted", [PROMOTION_TEXT["non-finite-estimate"]]))
            raise optuna.TrialPruned("non-finite estimate")

        trials = trial.study.get_trials(deepcopy=False)
        # A design this study already simulated: reuse its values (same design, same simulation seed).
        # PRUNED, not COMPLETE: a copy of a front design must not be a second "best trial" in the dashboard.
        for t in trials:
            if t.state == TrialState.COMPLETE and t.user_attrs.get("design_key") == key and t.values is not None:
                trial.set_user_attr("duplicate_of", t.number)
                trial.set_user_attr("promotion", "duplicate")
                for m in spec.objectives.needed():
                    if f"sim_{m.name}" in t.user_attrs:
                        trial.set_user_attr(f"sim_{m.name}", t.user_attrs[f"sim_{m.name}"])
                trial.set_user_attr(CONSTRAINTS_ATTR, t.user_attrs.get(CONSTRAINTS_ATTR, [0.0]))
                report.sim = {m.name: t.user_attrs.get(f"sim_{m.name}", math.nan) for m in spec.objectives.needed()}
                report.promotion = Promotion(False, "duplicate")
                save_trial_note(trial, note_markdown("duplicate", [
                    f"same design as trial {t.number}, which was simulated: values {_values_text(spec, t.values)}",
                    f"trial {t.number} is the front candidate; this trial reuses its values and is not simulated"]))
                raise optuna.TrialPruned(f"duplicate of trial {t.number}")

        planned = trial.user_attrs.get(PLAN_ATTR) if spec.plan == "calibrated" else None
        if planned is not None:
            decision = Promotion(True, str(planned))  # chosen by the simulation plan (hydra_opt.dse.callbacks.plan_callback)
        elif spec.plan == "calibrated":
            decision = Promotion(False, "deferred")  # the plan spends the simulations at the end of the study
        elif (pruner := self._promotion_pruner(trial.study)) is not None:
            me = next(t for t in trials if t.number == trial.number)
            decision = pruner.decide_among(trials, me, trial.study.directions)
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
            why = PROMOTION_TEXT.get(decision.reason, decision.reason)
            save_trial_note(trial, note_markdown("not promoted", [
                f"{why} (estimated rank {decision.rank})",
                f"estimate: {_values_text(spec, spec.objectives.values(est))}"]))
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


def _values_text(spec: StudySpec, values: Sequence[float]) -> str:
    """``throughput [tok/s] 442.1, TTFT [s] 0.505`` (4 significant digits)."""
    return ", ".join(f"{n} {v:.4g}" for n, v in zip(spec.objectives.metric_names, values))


def _finite(v: float) -> float | None:
    """JSON-safe value for user attributes (non-finite → None)."""
    return float(v) if v is not None and math.isfinite(v) else None


# -- Python-object coercions of :meth:`DseObjective.from_objects` ---------------------------------------------------
def _as_search_space(space: Any) -> SearchSpace:
    """A :class:`SearchSpace` from itself, a mapping in the YAML schema, or a file."""
    if isinstance(space, SearchSpace):
        return space
    if isinstance(space, Mapping):
        return SearchSpace.from_dict(space)
    if isinstance(space, (str, os.PathLike)):
        return load_search_space(str(space))
    raise TypeError(f"search_space must be a SearchSpace, a mapping or a path, not {type(space).__name__}")


def _as_objectives(objectives: Any) -> ObjectiveSpec:
    """An :class:`ObjectiveSpec` from itself, metric names, a mapping in the YAML schema, or a file."""
    if isinstance(objectives, ObjectiveSpec):
        return objectives
    if isinstance(objectives, Mapping):
        return parse_objectives(Node({"kind": "objective", **objectives}, file="<objectives>"))
    if isinstance(objectives, (str, os.PathLike)):
        return load_objectives(str(objectives))
    names = list(objectives)
    return parse_objectives(Node({"name": "+".join(map(str, names)), "objectives": names}, file="<objectives>"))


def _pruner_spec(pruner: PromotionPruner | bool, objectives: ObjectiveSpec) -> PrunerSpec:
    """The :class:`PrunerSpec` of a ``pruner=`` argument (checked against the objectives)."""
    if isinstance(pruner, bool):
        return PrunerSpec(enabled=pruner)
    if not isinstance(pruner, PromotionPruner):
        raise TypeError(f"pruner must be a PromotionPruner or a bool, not {type(pruner).__name__}")
    _checked_pruner(pruner, [m.name for m in objectives.metrics])
    return PrunerSpec(True, pruner.rule, pruner.k_ranks, pruner.epsilon, pruner.n_warmup_trials, pruner.min_estimates)


def _checked_pruner(pruner: PromotionPruner, metrics: Sequence[str]) -> PromotionPruner:
    """``pruner``, when it reads the estimates the objective writes (its metrics, prefix ``est_``)."""
    if list(pruner.metrics) != list(metrics) or pruner.prefix != "est_":
        raise ValueError(f"the PromotionPruner reads {list(pruner.metrics)} (prefix {pruner.prefix!r}); the "
                         f"objectives are {list(metrics)} (prefix 'est_')")
    return pruner
