"""Study specs (``studies/*.yaml``) and the study runner: estimate → promote → simulate, on any storage.

A study file names the (model, workload) pairs, a search space, objectives, a sampler, the promotion pruner, a
budget, a storage URL and an artifact folder (schema in ``docs/dse.md``). :func:`run_study` opens (or resumes) the
Optuna study and runs workers until the *total* budget of finished (COMPLETE + PRUNED) trials is reached, counted
over the whole study, so re-running the same command resumes and never exceeds it.

One trial (:class:`DseObjective`):

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

import hashlib
import importlib
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from hydra_opt.config import ConfigError, Node, load_yaml
from hydra_opt.dse.evaluators import Evaluator, HydraEvaluator
from hydra_opt.dse.objectives import DEFAULT_OBJECTIVES, ObjectiveSpec, load_objectives, parse_objectives
from hydra_opt.dse.plan import PLANS, design_features, plan_next
from hydra_opt.dse.pruner import Promotion, PromotionPruner, estimate_vector
from hydra_opt.dse.samplers import CONSTRAINTS_ATTR, SamplerSpec, make_sampler, worker_seed
from hydra_opt.dse.search_space import SearchSpace, load_search_space, parse_search_space
from hydra_opt.dse.storages import StorageOptions, check_url, make_storage, redact_url, sqlite_url_for

__all__ = [
    "StudySpec",
    "PrunerSpec",
    "RunOptions",
    "RunSummary",
    "DseObjective",
    "load_study_spec",
    "parse_study_spec",
    "run_study",
    "open_study",
    "load_study_by_name",
    "design_key",
    "FINISHED_STATES",
    "SPEC_ATTR",
]

#: States that count toward the budget (FAIL does not: a failed trial is retried or replaced).
FINISHED_STATES: tuple[TrialState, ...] = (TrialState.COMPLETE, TrialState.PRUNED)
#: Study user attribute holding the fingerprint of the spec that created the study.
SPEC_ATTR = "hydra_opt_spec"


@dataclass(frozen=True)
class PrunerSpec:
    """Promotion settings; ``enabled=False`` simulates every feasible trial."""

    enabled: bool = True
    rule: str = "either"
    k_ranks: int = 1
    epsilon: float = 0.05
    n_warmup_trials: int = 10
    min_estimates: int = 0


@dataclass(frozen=True)
class StudySpec:
    """A parsed study file.

    Attributes:
        name: Study name (the Optuna study name unless overridden).
        file: The study file.
        pairs: (model, workload) names or paths.
        space: The search space.
        objectives: Objectives, aggregation and constraints.
        sampler: The sampler choice.
        pruner: Promotion settings.
        n_trials: Total budget of finished trials over the whole study (None = unbounded).
        max_simulations: Cap on distinct simulated designs over the whole study (None = none); once reached,
            trials are still estimated but end PRUNED (``promotion: simulation-budget``).
        plan: How the simulation budget is spent: ``"greedy"`` (promote as the pruner decides until the cap) or
            ``"calibrated"`` (estimate only until the trials left equal the simulations left, then simulate the
            designs :func:`hydra_opt.dse.plan.plan_next` picks; needs ``max_simulations``). The file's ``auto``
            (default) resolves to calibrated when ``budget.max_simulations`` is set, else greedy.
        plan_pool: Where the calibrated plan picks from: ``"estimated"`` (the designs the study's trials estimated)
            or ``"space"`` (every design of the search space, estimated once, vectorised, when the plan starts — a
            design no trial proposed is enqueued with the parameters that draw it; the space must have at most
            :data:`PLAN_POOL_MAX` designs). The file's ``auto`` (default) resolves to space for a calibrated plan on
            a space that small, else estimated.
        timeout_s: Wall-time limit of one invocation, s (None = none).
        storage: Storage URL.
        artifact_dir: Folder of the artifact store (None = no artifacts).
        seed: Study seed (per-worker sampler seeds derive from it).
        sim_seed: Seed of every simulation (common random numbers: all designs see the same request sample).
        estimate_options: ``EstimatorOptions`` knobs (older files: scenario settings too, moved to the scenario).
        simulate_options: ``SimOptions`` knobs (older files: scenario settings and design overrides too).
        scenario: The study's ``scenario:`` block: the one run description both evaluators read
            (``hydra_opt.evaluate.scenario``; ``preset: paper`` allowed).
        design_overrides: The study's ``design_overrides:`` block (``max_batch``, ``batching``, ``scheduler``,
            ``placement`` given to every design before it is evaluated).
        evaluator: ``"module:callable"`` building the evaluator (default: the real estimator + simulator).
    """

    name: str
    file: str
    pairs: tuple[tuple[str, str], ...]
    space: SearchSpace
    objectives: ObjectiveSpec = DEFAULT_OBJECTIVES
    sampler: SamplerSpec = field(default_factory=SamplerSpec)
    pruner: PrunerSpec = PrunerSpec()
    n_trials: int | None = 100
    timeout_s: float | None = None
    max_simulations: int | None = None
    plan: str = "greedy"
    plan_pool: str = "estimated"
    storage: str = ""
    artifact_dir: Path | None = None
    seed: int = 0
    sim_seed: int = 0
    estimate_options: Mapping[str, Any] | None = None
    simulate_options: Mapping[str, Any] | None = None
    evaluator: str = ""
    scenario: Mapping[str, Any] | None = None
    design_overrides: Mapping[str, Any] | None = None

    @property
    def pair_keys(self) -> list[str]:
        return [f"{m}/{w}" for m, w in self.pairs]

    def fingerprint(self) -> str:
        """Hash of what defines the study's trials (space, objectives, pairs, pruner); not budget or storage."""
        blob = json.dumps(
            {
                "pairs": self.pairs,
                "space": [self.space.composition.slots, [(p.name, p.values) for p in self.space.composition.parts],
                          [(d.name, list(map(repr, d.values))) for d in self.space.scalars], self.space.encoding,
                          sorted(self.space.package.items())],
                "objectives": [m.name for m in self.objectives.metrics],
                "aggregate": self.objectives.aggregate,
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def make_evaluator(self) -> Evaluator:
        """The evaluator named by ``evaluator`` (default :class:`HydraEvaluator`)."""
        if not self.evaluator:
            return HydraEvaluator(self.estimate_options, self.simulate_options, file=self.file,
                                  scenario=self.scenario, design_overrides=self.design_overrides)
        mod, _, attr = self.evaluator.partition(":")
        try:
            factory = getattr(importlib.import_module(mod), attr)
        except Exception:  # noqa: BLE001 - ImportError, or anything a module raises on import
            raise ConfigError("cannot be imported (expected module:callable)", file=self.file, key="evaluator",
                              value=self.evaluator) from None
        try:
            evaluator = factory(self)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. `os:system` called with a spec: a bad value, not a crash
            raise ConfigError(f"failed to build an evaluator ({type(exc).__name__})", file=self.file, key="evaluator",
                              value=self.evaluator) from None
        if not isinstance(evaluator, Evaluator):
            raise ConfigError("did not return an evaluator (design/load/feasibility/estimate/simulate)",
                              file=self.file, key="evaluator", value=self.evaluator)
        return evaluator


def design_key(design: Mapping[str, Any]) -> str:
    """A short stable hash of a design dict (identical designs share it)."""
    return hashlib.sha256(json.dumps(design, sort_keys=True, default=str).encode()).hexdigest()[:16]


# -- parsing ---------------------------------------------------------------------------------------------------
def load_study_spec(path: str | os.PathLike[str]) -> StudySpec:
    """Read and validate a study file (relative paths inside resolve against its folder)."""
    return parse_study_spec(load_yaml(path))


def _names(root: Node, single: str, plural: str) -> list[str]:
    if root.has(plural):
        return [n.str(max_len=1024) for n in root.get(plural).list(min_len=1, max_len=64)]
    return [root.get(single).str(max_len=1024)]


def _safe_output_dir(node: Node, base: Path) -> Path:
    """An output folder; a relative one must stay inside ``base`` (no ``..`` escapes)."""
    raw = node.str(max_len=4096)
    if "\x00" in raw or not raw.strip():
        raise node.error("is not a folder path")
    p = Path(os.path.expanduser(raw))
    if not p.is_absolute():
        if ".." in p.parts:
            raise node.error("must not contain '..' (write artifacts inside the study folder or give an absolute path)")
        p = base / p
    return p


def parse_study_spec(root: Node) -> StudySpec:
    """Validate a parsed study document."""
    root.mapping()
    base = Path(root.file).resolve().parent
    kind = root.get("kind", "study").str()
    if kind != "study":
        raise root.error("must be 'study'", value=kind, key="kind")
    name = root.get("name").str(max_len=128)
    if not name.strip() or any(ord(c) < 32 for c in name):
        raise root.error("must be a non-empty printable name", value=name, key="name")

    if root.has("pairs"):
        pairs = []
        for item in root.get("pairs").list(min_len=1, max_len=64):
            item.mapping()
            pairs.append((item.get("model").str(max_len=1024), item.get("workload").str(max_len=1024)))
            item.done(["model", "workload"])
    else:
        models = _names(root, "model", "models")
        workloads = _names(root, "workload", "workloads")
        pairs = [(m, w) for m in models for w in workloads]
    pairs = [(_resolve_ref(m, base), _resolve_ref(w, base)) for m, w in pairs]

    snode = root.get("search_space")
    if isinstance(snode.data, dict):
        space = parse_search_space(Node(snode.data, file=root.file, key=snode.key))
    else:
        space = load_search_space(str(snode.path(base=base, must_exist=True)))
    if root.has("objectives"):
        onode = root.get("objectives")
        if isinstance(onode.data, dict):
            objectives = parse_objectives(Node(onode.data, file=root.file, key=onode.key))
        else:
            objectives = load_objectives(str(onode.path(base=base, must_exist=True)))
    else:
        objectives = DEFAULT_OBJECTIVES

    sampler = SamplerSpec(file=root.file)
    if root.has("sampler"):
        sn = root.get("sampler")
        if isinstance(sn.data, str):
            sampler = SamplerSpec(sn.str(max_len=64), file=root.file)
        else:
            sn.mapping()
            args = sn.get("args", {}).mapping().data
            sampler = SamplerSpec(sn.get("name", "tpe").str(max_len=64), args, file=root.file)
            sn.done(["name", "args"])
    if sampler.needs_static_space and space.encoding == "conditional" and not space.encoding_explicit:
        # Samplers that model a fixed space cannot use conditional (dynamic-range) parameters well.
        space = space.with_encoding("stick_breaking")
    if sampler.is_grid:
        space = space.with_encoding("enumerated")

    pruner = PrunerSpec()
    if root.has("pruner"):
        pn = root.get("pruner")
        if pn.data in ("none", False):
            pruner = PrunerSpec(enabled=False)
        else:
            pn.mapping()
            pruner = PrunerSpec(
                enabled=pn.get("enabled", True).bool(),
                rule=pn.get("rule", "either").str(choices=("rank", "epsilon", "either")),
                k_ranks=pn.get("k_ranks", 1).int(minimum=1, maximum=1000),
                epsilon=pn.get("epsilon", 0.05).number(minimum=0.0, maximum=100.0),
                n_warmup_trials=pn.get("n_warmup_trials", 10).int(minimum=0, maximum=10**6),
                min_estimates=pn.get("min_estimates", 0).int(minimum=0, maximum=10**6),
            )
            pn.done(["enabled", "rule", "k_ranks", "epsilon", "n_warmup_trials", "min_estimates"])

    n_trials: int | None = 100
    timeout_s: float | None = None
    max_simulations: int | None = None
    plan = "greedy"
    plan_pool = "estimated"
    if root.has("budget"):
        bn = root.get("budget").mapping()
        n_trials = bn.get("n_trials", 100).int(minimum=1, maximum=10**7)
        if bn.has("timeout_s"):
            timeout_s = bn.get("timeout_s").number(positive=True, maximum=10**8)
        if bn.has("max_simulations"):
            max_simulations = bn.get("max_simulations").int(minimum=1, maximum=10**7)
        plan = bn.get("plan", "auto").str(choices=("auto", *PLANS))
        if plan == "auto":
            # The recovery benchmark (docs/dse.md): with a known simulation budget, planning it beats greedy promotion.
            plan = "calibrated" if max_simulations is not None else "greedy"
        if plan == "calibrated" and max_simulations is None:
            raise ConfigError("needs budget.max_simulations (the budget it plans)", file=root.file, key="budget.plan",
                              value=plan)
        plan_pool = bn.get("plan_pool", "auto").str(choices=("auto", *PLAN_POOLS))
        if plan_pool == "auto":
            plan_pool = "space" if plan == "calibrated" and space.size() <= PLAN_POOL_MAX else "estimated"
        if plan_pool == "space":
            if plan != "calibrated":
                raise ConfigError("needs budget.plan: calibrated", file=root.file, key="budget.plan_pool",
                                  value=plan_pool)
            if space.size() > PLAN_POOL_MAX:
                raise ConfigError(f"space has {space.size():,} designs; plan_pool: space allows at most "
                                  f"{PLAN_POOL_MAX:,} (use plan_pool: estimated)", file=root.file,
                                  key="budget.plan_pool", value=plan_pool)
        bn.done(["n_trials", "timeout_s", "max_simulations", "plan", "plan_pool"])

    stem = Path(root.file).stem
    if root.has("storage"):
        storage = root.get("storage").str(max_len=4096)
        if storage.startswith("sqlite:///") and not storage.startswith("sqlite:////"):
            rel = storage[len("sqlite:///"):]
            if rel and rel != ":memory:" and not Path(rel).is_absolute():
                storage = sqlite_url_for(base / rel)  # relative SQLite files live next to the study file
        check_url(storage, file=root.file, key="storage")
    else:
        storage = sqlite_url_for(base / f"{stem}.db")

    from hydra_opt.dse.artifacts import safe_name

    artifact_dir: Path | None = base / "artifacts" / safe_name(name)  # a name like "../../x" must not escape
    if root.has("artifacts"):
        an = root.get("artifacts")
        artifact_dir = None if an.data is False else _safe_output_dir(an, base)

    seed = root.get("seed", 0).int(minimum=0, maximum=2**32 - 1)
    est_opts = root.get("estimate", {}).mapping().data or None
    sim_node = root.get("simulate", {}).mapping()
    sim_opts = dict(sim_node.data) if sim_node.data else {}
    sim_seed = int(sim_opts.pop("seed", 0)) if isinstance(sim_opts.get("seed", 0), int) else 0
    scenario = root.get("scenario", {}).mapping().data or None
    overrides = root.get("design_overrides", {}).mapping().data or None
    evaluator = root.get("evaluator", "").str(max_len=256)
    root.get("description", "").str(max_len=4096)
    root.done(
        ["kind", "name", "description", "model", "models", "workload", "workloads", "pairs", "search_space",
         "objectives", "sampler", "pruner", "budget", "storage", "artifacts", "seed", "estimate", "simulate",
         "scenario", "design_overrides", "evaluator"]
    )
    return StudySpec(
        name=name, file=root.file, pairs=tuple(pairs), space=space, objectives=objectives, sampler=sampler,
        pruner=pruner, n_trials=n_trials, timeout_s=timeout_s, max_simulations=max_simulations, plan=plan, plan_pool=plan_pool,
        storage=storage, artifact_dir=artifact_dir,
        seed=seed, sim_seed=sim_seed, estimate_options=est_opts, simulate_options=sim_opts or None,
        evaluator=evaluator, scenario=scenario, design_overrides=overrides,
    )


def _resolve_ref(ref: str, base: Path) -> str:
    """A model/workload reference: a shipped name stays a name; a relative file path resolves against ``base``."""
    if ref.endswith((".yaml", ".yml", ".csv", ".jsonl", ".json")) and not Path(ref).is_absolute():
        return str((base / ref).resolve())
    return ref


# -- the objective ---------------------------------------------------------------------------------------------
class _BudgetReached(Exception):
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
            raise _BudgetReached()

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
            decision = Promotion(True, str(planned))  # chosen by the simulation plan (_plan_callback)
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


# -- running ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunOptions:
    """Command-line overrides of a study spec."""

    storage: str | None = None
    study_name: str | None = None
    n_trials: int | None = None
    timeout_s: float | None = None
    workers: int = 1
    seed: int | None = None
    worker_index: int = 0
    quiet: bool = False
    storage_options: StorageOptions = StorageOptions()


@dataclass
class RunSummary:
    """What a run did.

    Attributes:
        study_name: Optuna study name.
        storage: Storage URL, redacted.
        artifact_dir: Artifact folder or None.
        finished_before: Finished trials in the study when the run started.
        finished: Finished trials at the end.
        complete: COMPLETE trials at the end (simulated, or reusing an identical design's simulation).
        pruned: PRUNED trials at the end (not promoted or infeasible).
        infeasible: PRUNED trials that were infeasible.
        failed: FAIL trials at the end.
        wall_s: Wall time of the run, s.
    """

    study_name: str
    storage: str
    artifact_dir: str | None
    finished_before: int
    finished: int = 0
    complete: int = 0
    pruned: int = 0
    infeasible: int = 0
    failed: int = 0
    wall_s: float = 0.0

    simulated: int = 0

    @property
    def promotion_rate(self) -> float:
        """Simulated / feasible finished trials (the share of estimated trials that ran a simulation; trials that
        reused the values of an already simulated design do not count as simulated)."""
        feasible = self.complete + self.pruned - self.infeasible
        return self.simulated / feasible if feasible else 0.0


def apply_options(spec: StudySpec, opts: RunOptions) -> StudySpec:
    """The spec with command-line overrides applied."""
    changes: dict[str, Any] = {}
    if opts.storage:
        changes["storage"] = check_url(opts.storage, file="<cli>", key="--storage")
    if opts.study_name:
        changes["name"] = opts.study_name
    if opts.n_trials is not None:
        changes["n_trials"] = opts.n_trials
    if opts.timeout_s is not None:
        changes["timeout_s"] = opts.timeout_s
    if opts.seed is not None:
        changes["seed"] = opts.seed
    return replace(spec, **changes) if changes else spec


def open_study(spec: StudySpec, *, sampler: optuna.samplers.BaseSampler | None = None, storage_options: StorageOptions | None = None, create: bool = True) -> optuna.Study:
    """Create or load the study of ``spec`` on its storage; refuse to resume a study defined differently."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(spec.storage, storage_options)
    exists = spec.name in optuna.study.get_all_study_names(storage)
    if not exists and not create:
        raise ConfigError("no such study in the storage", key="--study-name", value=spec.name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study = optuna.create_study(
            storage=storage, study_name=spec.name, directions=spec.objectives.directions,
            sampler=sampler, load_if_exists=True,
        ) if (create or exists) else None
    assert study is not None
    if exists:
        if [d.name.lower() for d in study.directions] != spec.objectives.directions:
            raise ConfigError(
                f"exists in the storage with directions {[d.name.lower() for d in study.directions]}; the study file "
                f"asks for {spec.objectives.directions} (use another --study-name)", key="name", value=spec.name, file=spec.file,
            )
        old = study.user_attrs.get(SPEC_ATTR)
        if old is not None and old != spec.fingerprint():
            raise ConfigError(
                "exists in the storage with a different search space/objectives/workloads; resume it with the same "
                "study file or choose another --study-name", key="name", value=spec.name, file=spec.file,
            )
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(spec.objectives.metric_names)
        study.set_user_attr(SPEC_ATTR, spec.fingerprint())
        study.set_user_attr("hydra_opt_pairs", spec.pair_keys)
        study.set_user_attr("hydra_opt_metrics", [m.name for m in spec.objectives.metrics])
        study.set_user_attr("hydra_opt_space", spec.space.name)
    return study


def load_study_by_name(storage_url: str, name: str | None) -> optuna.Study:
    """Load an existing study (the only one in the storage when ``name`` is None)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(storage_url, StorageOptions(heartbeat_interval_s=0))
    names = optuna.study.get_all_study_names(storage)
    if name is None:
        if len(names) != 1:
            raise ConfigError(f"is required: the storage holds {len(names)} studies ({', '.join(names[:10])})",
                              file="<cli>", key="--study-name")
        name = names[0]
    if name not in names:
        raise ConfigError(f"is not in the storage; it holds: {', '.join(names[:10]) or 'no study'}", file="<cli>",
                          key="--study-name", value=name)
    return optuna.load_study(study_name=name, storage=storage)


def count_finished(study: optuna.Study) -> int:
    """Trials that count toward the budget (COMPLETE + PRUNED)."""
    return len(study.get_trials(deepcopy=False, states=FINISHED_STATES))


def _budget_callback(budget: int | None) -> Callable[[optuna.Study, FrozenTrial], None]:
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


def _revisit_callback(spec: StudySpec, pruner: PromotionPruner) -> Callable[[optuna.Study, FrozenTrial], None]:
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


PLAN_ATTR = "planned"
#: ``budget.plan_pool`` values.
PLAN_POOLS: tuple[str, ...] = ("estimated", "space")
#: Largest search space ``plan_pool: space`` estimates in full (≈ 1 ms per design and pair, once per worker).
PLAN_POOL_MAX = 20_000


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


def _plan_callback(spec: StudySpec, objective: DseObjective) -> Callable[[optuna.Study, FrozenTrial], None]:
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
            pool[key] = _PoolRow(t, t.user_attrs.get("design", {}), t.params, est)
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


def run_worker(
    spec: StudySpec,
    *,
    worker_index: int = 0,
    n_existing: int = 0,
    evaluator: Evaluator | None = None,
    storage_options: StorageOptions | None = None,
    on_trial: Callable[[optuna.Study, FrozenTrial, TrialReport | None], None] | None = None,
) -> None:
    """One worker: run trials on the shared study until the total budget or the timeout is reached."""
    evaluator = evaluator or spec.make_evaluator()
    seed = worker_seed(spec.seed, worker_index, n_existing)
    sampler = make_sampler(spec.sampler, seed=seed, grid=spec.space.grid() if spec.sampler.is_grid else None)
    from hydra_opt.dse.fault import PerTrialSeedSampler

    # Streams fixed by (study seed, trial number): no two workers anywhere share one (fault.py).
    sampler = PerTrialSeedSampler(sampler, spec.seed)
    study = open_study(spec, sampler=sampler, storage_options=storage_options)
    if spec.n_trials is not None and count_finished(study) >= spec.n_trials:
        return
    store = None
    if spec.artifact_dir is not None:
        spec.artifact_dir.mkdir(parents=True, exist_ok=True)
        store = optuna.artifacts.FileSystemArtifactStore(str(spec.artifact_dir))
    objective = DseObjective(spec, evaluator, artifact_store=store, budget=spec.n_trials)
    callbacks: list[Callable[[optuna.Study, FrozenTrial], None]] = [
        _revisit_callback(spec, objective.pruner), _plan_callback(spec, objective),
        _budget_callback(spec.n_trials),
    ]
    if on_trial is not None:
        callbacks.append(lambda s, t: on_trial(s, t, objective.last if objective.last and objective.last.number == t.number else None))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        # fault.py: journal heartbeats, and staying until dead workers' trials are recovered so the budget is exact.
        from hydra_opt.dse import fault

        so = storage_options or StorageOptions()
        func = fault.with_journal_heartbeat(objective, so.heartbeat_interval_s)
        fault.optimize_until_budget(
            study,
            lambda left: study.optimize(
                func, n_trials=None, timeout=left, callbacks=callbacks, catch=(_BudgetReached,),
                gc_after_trial=False, show_progress_bar=False,
            ),
            budget=spec.n_trials, timeout_s=spec.timeout_s, poll_s=max(1.0, so.heartbeat_interval_s / 2),
            journal_grace_s=so.grace_period_s if so.heartbeat_interval_s > 0 else 0.0,
            max_retry=so.failed_trial_retries,
        )


def _child(study_file: str, opts: RunOptions, index: int, n_existing: int) -> None:
    """Entry point of a worker process (spawned): re-read the spec, apply the same overrides, run."""
    from hydra_opt.dse import fault

    fault.sigterm_as_interrupt()
    spec = apply_options(load_study_spec(study_file), opts)
    try:
        run_worker(spec, worker_index=index, n_existing=n_existing, storage_options=opts.storage_options)
    except KeyboardInterrupt:
        fault.ignore_further_interrupts()


def summarize(study: optuna.Study, spec: StudySpec, finished_before: int, wall_s: float) -> RunSummary:
    trials = study.get_trials(deepcopy=False)
    s = RunSummary(spec.name, redact_url(spec.storage), str(spec.artifact_dir) if spec.artifact_dir else None, finished_before)
    s.complete = sum(t.state == TrialState.COMPLETE for t in trials)
    s.pruned = sum(t.state == TrialState.PRUNED for t in trials)
    s.infeasible = sum(t.state == TrialState.PRUNED and "infeasible" in t.user_attrs for t in trials)
    s.failed = sum(t.state == TrialState.FAIL for t in trials)
    s.simulated = sum(t.state == TrialState.COMPLETE and "sim_wall_s" in t.user_attrs for t in trials)
    s.finished = s.complete + s.pruned
    s.wall_s = wall_s
    return s


def run_study(
    spec: StudySpec,
    opts: RunOptions = RunOptions(),
    *,
    evaluator: Evaluator | None = None,
    on_trial: Callable[[optuna.Study, FrozenTrial, TrialReport | None], None] | None = None,
    poll: Callable[[optuna.Study], None] | None = None,
) -> tuple[optuna.Study, RunSummary]:
    """Run (or resume) a study with ``opts.workers`` local workers; returns the study and a summary.

    With one worker everything runs in this process and ``on_trial`` is called after each trial. With several,
    worker processes are spawned on the same storage and ``poll(study)`` is called about once a second.
    """
    spec = apply_options(spec, opts)
    t0 = time.perf_counter()
    evaluator = evaluator or spec.make_evaluator()
    # Validate everything that can be validated before a study is created in the storage.
    DseObjective(spec, evaluator, budget=spec.n_trials)
    first = next(spec.space.enumerate(), None)
    if first is not None:
        try:
            evaluator.design(first)
        except ConfigError as exc:
            raise ConfigError(f"yields designs the system layer rejects ({exc.key}: {exc.problem})",
                              file=spec.space.file, key="chiplets" if exc.key and "chiplet" in exc.key else None) from None
    study = open_study(spec, storage_options=opts.storage_options)
    before = count_finished(study)
    n_existing = len(study.get_trials(deepcopy=False))
    if opts.workers <= 1:
        run_worker(spec, worker_index=opts.worker_index, n_existing=n_existing, evaluator=evaluator,
                   storage_options=opts.storage_options, on_trial=on_trial)
    else:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_child, args=(spec.file, opts, opts.worker_index + i, n_existing), daemon=False)
                 for i in range(opts.workers)]
        for p in procs:
            p.start()
        try:
            while any(p.is_alive() for p in procs):
                if poll is not None:
                    poll(study)
                for p in procs:
                    p.join(timeout=1.0 / len(procs))
        except KeyboardInterrupt:
            from hydra_opt.dse.fault import ignore_further_interrupts, interrupt_workers

            ignore_further_interrupts()
            interrupt_workers(procs)  # a SIGINT sent to this launcher alone must stop the workers too
            raise
        finally:
            for p in procs:
                p.join()
        if poll is not None:
            poll(study)
    return study, summarize(study, spec, before, time.perf_counter() - t0)
