"""The study runner: open (or resume) a study on any storage and run workers until the total budget is reached.

:func:`run_study` runs workers until the *total* budget of finished (COMPLETE + PRUNED) trials is reached, counted
over the whole study, so re-running the same command resumes and never exceeds it. :class:`RunOptions` are the
command-line overrides of a spec; :class:`RunSummary` is what a run did.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hydra_opt.config import ConfigError
from hydra_opt.dse.callbacks import budget_callback, plan_callback, revisit_callback
from hydra_opt.dse.exhaustive import prepare_sweep, run_sweep_worker
from hydra_opt.dse.objective import FINISHED_STATES, BudgetReached, DseObjective, TrialReport
from hydra_opt.dse.samplers import make_sampler, worker_seed
from hydra_opt.dse.spec import StudySpec, content_digest, load_study_spec, output_dir_problem
from hydra_opt.evaluate.evaluators import Evaluator
from hydra_opt.dse.storages import (
    StorageOptions,
    check_url,
    create_study_with_attrs,
    make_storage,
    redact_url,
    require_existing,
)

__all__ = [
    "check_study",
    "check_feasible_designs",
    "RunOptions",
    "RunSummary",
    "run_study",
    "run_worker",
    "open_study",
    "load_study_by_name",
    "apply_options",
    "count_finished",
    "summarize",
    "SPEC_ATTR",
    "FEASIBILITY_SCAN",
]

#: Study user attribute holding the fingerprint of the spec that created the study.
SPEC_ATTR = "hydra_opt_spec"


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
    adopt: bool = False


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
        finished_here: Trials this run's own worker processes finished (other launchers on the same study
            count theirs).
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
    finished_here: int = 0

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
        from hydra_opt.dse.artifacts import safe_name

        base = Path(spec.file).resolve().parent
        if spec.artifact_dir == base / "artifacts" / safe_name(spec.name):  # the default follows the name in use
            changes["artifact_dir"] = base / "artifacts" / safe_name(opts.study_name)
    if opts.n_trials is not None:
        if spec.exhaustive is not None:
            raise ConfigError("does not apply to an exhaustive sweep (its trials are the designs of "
                              "exhaustive.simulate)", file="<cli>", key="--n-trials", value=opts.n_trials)
        changes["n_trials"] = opts.n_trials
    if opts.timeout_s is not None:
        changes["timeout_s"] = opts.timeout_s
    if opts.seed is not None:
        changes["seed"] = opts.seed
    return replace(spec, **changes) if changes else spec


def open_study(spec: StudySpec, *, sampler: optuna.samplers.BaseSampler | None = None,
               storage_options: StorageOptions | None = None, create: bool = True, content: str = "",
               adopt: bool = False) -> optuna.Study:
    """Create or load the study of ``spec`` on its storage; refuse to resume a study defined differently.

    A new study is created together with its fingerprint (one transaction on RDB storages), so a kill during
    creation cannot leave a study without one. A study found without a fingerprint (created outside hydra_opt, or
    by an interrupted creation on a journal) is *unknown*: refused unless ``adopt``, which claims it for ``spec``.

    Args:
        content: :func:`~hydra_opt.dse.spec.content_digest` of the loaded pairs (part of the fingerprint).
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(spec.storage, storage_options)
    exists = spec.name in optuna.study.get_all_study_names(storage)
    if not exists and not create:
        raise ConfigError("no such study in the storage", key="--study-name", value=spec.name)
    attrs = _study_attrs(spec, content)
    created = False
    if not exists:
        try:
            create_study_with_attrs(storage, spec.name, spec.objectives.directions, attrs,
                                    {_METRIC_NAMES: spec.objectives.metric_names})
            created = True
        except optuna.exceptions.DuplicatedStudyError:
            pass  # another worker created it just now: check it like any existing study
    study = optuna.load_study(study_name=spec.name, storage=storage, sampler=sampler)
    if not created:
        _check_existing(study, spec, attrs, adopt)
    return study


#: Optuna's study system attribute holding the metric names (``Study.set_metric_names``).
_METRIC_NAMES = "study:metric_names"


def _study_attrs(spec: StudySpec, content: str) -> dict[str, Any]:
    return {SPEC_ATTR: spec.fingerprint(content), "hydra_opt_pairs": spec.pair_keys,
            "hydra_opt_metrics": [m.name for m in spec.objectives.metrics], "hydra_opt_space": spec.space.name}


def _check_existing(study: optuna.Study, spec: StudySpec, attrs: dict[str, Any], adopt: bool) -> None:
    if [d.name.lower() for d in study.directions] != spec.objectives.directions:
        raise ConfigError(
            f"exists in the storage with directions {[d.name.lower() for d in study.directions]}; the study file "
            f"asks for {spec.objectives.directions} (use another --study-name)", key="name", value=spec.name,
            file=spec.file,
        )
    old = study.user_attrs.get(SPEC_ATTR)
    for _ in range(20):  # a journal study is created, then fingerprinted: give a concurrent creator 2 s
        if old is not None or study.get_trials(deepcopy=False):
            break
        time.sleep(0.1)
        old = study.user_attrs.get(SPEC_ATTR)
    if old is None and adopt:
        for key, value in attrs.items():
            study.set_user_attr(key, value)
        study._storage.set_study_system_attr(study._study_id, _METRIC_NAMES, spec.objectives.metric_names)
        return
    if old is None:
        raise ConfigError(
            "exists in the storage without a hydra_opt fingerprint (created outside hydra_opt, or its creation "
            "was interrupted), so its trials may come from another search space or workload; pass --adopt to "
            "claim it for this study file, or choose another --study-name", key="name", value=spec.name,
            file=spec.file,
        )
    if old != attrs[SPEC_ATTR]:
        raise ConfigError(
            "exists in the storage with a different search space/objectives/workloads/pruner/settings (or their "
            "files' content changed); resume it with the same study file and inputs or choose another "
            "--study-name", key="name", value=spec.name, file=spec.file,
        )


def load_study_by_name(storage_url: str, name: str | None) -> optuna.Study:
    """Load an existing study (the only one in the storage when ``name`` is None)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    require_existing(storage_url)  # a read: never create an empty storage for a mistyped URL
    storage = make_storage(storage_url, StorageOptions(heartbeat_interval_s=0))
    names = optuna.study.get_all_study_names(storage)
    if name is None:
        if not names:
            raise ConfigError("holds no study", file="<cli>", key="--storage", value=redact_url(storage_url))
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


def run_worker(
    spec: StudySpec,
    *,
    worker_index: int = 0,
    n_existing: int = 0,
    evaluator: Evaluator | None = None,
    storage_options: StorageOptions | None = None,
    on_trial: Callable[[optuna.Study, FrozenTrial, TrialReport | None], None] | None = None,
    adopt: bool = False,
) -> None:
    """One worker: run trials on the shared study until the total budget or the timeout is reached."""
    evaluator = evaluator or spec.make_evaluator()
    objective = DseObjective(spec, evaluator, budget=spec.n_trials)
    content = pairs_digest(objective)
    if spec.exhaustive is not None:
        # A sweep: trials come only from its queue (no sampler proposes designs); see dse/sweep.py.
        study = open_study(spec, sampler=optuna.samplers.RandomSampler(spec.seed), storage_options=storage_options,
                           content=content, adopt=adopt)
        run_sweep_worker(study, spec, evaluator, storage_options=storage_options,
                         on_trial=None if on_trial is None else (lambda s, t: on_trial(s, t, None)))
        return
    seed = worker_seed(spec.seed, worker_index, n_existing)
    sampler = make_sampler(spec.sampler, seed=seed, grid=spec.space.grid() if spec.sampler.is_grid else None)
    from hydra_opt.dse.fault import PerTrialSeedSampler

    # Streams fixed by (study seed, trial number): no two workers anywhere share one (fault.py).
    sampler = PerTrialSeedSampler(sampler, spec.seed)
    study = open_study(spec, sampler=sampler, storage_options=storage_options, content=content, adopt=adopt)
    if spec.n_trials is not None and count_finished(study) >= spec.n_trials:
        return
    if spec.artifact_dir is not None:
        spec.artifact_dir.mkdir(parents=True, exist_ok=True)
        objective.artifact_store = optuna.artifacts.FileSystemArtifactStore(str(spec.artifact_dir))
    callbacks: list[Callable[[optuna.Study, FrozenTrial], None]] = [
        revisit_callback(spec, objective.pruner), plan_callback(spec, objective),
        budget_callback(spec.n_trials),
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
                func, n_trials=None, timeout=left, callbacks=callbacks, catch=(BudgetReached,),
                gc_after_trial=False, show_progress_bar=False,
            ),
            budget=spec.n_trials, timeout_s=spec.timeout_s, poll_s=min(10.0, max(1.0, so.heartbeat_interval_s / 2)),
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
    except Exception as exc:  # noqa: BLE001 - a storage outage past the retry bound: one line, not a traceback
        from hydra_opt.config.errors import EXIT_STORAGE
        from hydra_opt.dse.storage_retry import storage_outage

        outage = storage_outage(exc)
        if outage is None:
            raise
        print(f"hydra_opt: error: {outage}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_STORAGE) from None


def pairs_digest(objective: DseObjective) -> str:
    """:func:`~hydra_opt.dse.spec.content_digest` of the objective's loaded (model, workload) pairs."""
    return content_digest([(m, w) for _, m, w in objective.pairs])


def summarize(study: optuna.Study, spec: StudySpec, finished_before: int, wall_s: float,
              pids: tuple[int, ...] = ()) -> RunSummary:
    """What the run did; ``finished_here`` counts trials of the processes ``pids`` (default: this one)."""
    from hydra_opt.dse.fault import WORKER_ATTR

    host = socket.gethostname()
    mine = {f"{host}:{pid}" for pid in (pids or (os.getpid(),))}
    trials = study.get_trials(deepcopy=False)
    s = RunSummary(spec.name, redact_url(spec.storage), str(spec.artifact_dir) if spec.artifact_dir else None, finished_before)
    s.complete = sum(t.state == TrialState.COMPLETE for t in trials)
    s.pruned = sum(t.state == TrialState.PRUNED for t in trials)
    s.infeasible = sum(t.state == TrialState.PRUNED and "infeasible" in t.user_attrs for t in trials)
    s.failed = sum(t.state == TrialState.FAIL for t in trials)
    s.simulated = sum(t.state == TrialState.COMPLETE and "sim_wall_s" in t.user_attrs for t in trials)
    s.finished = s.complete + s.pruned
    s.finished_here = sum(t.state in FINISHED_STATES and t.system_attrs.get(WORKER_ATTR) in mine for t in trials)
    s.wall_s = wall_s
    return s


#: How many designs of the search space ``python -m hydra_opt validate`` checks for feasibility (evenly spread over
#: the first :data:`FEASIBILITY_SCAN` designs in enumeration order).
FEASIBILITY_SAMPLE = 400
#: How many designs, in enumeration order, that sample is spread over.
FEASIBILITY_SCAN = 100_000


def check_study(spec: StudySpec, evaluator: Evaluator | None = None) -> Evaluator:
    """Every check :func:`run_study` makes before it touches a storage (evaluator, models, workloads and their
    traces, objectives, a design of the search space); returns the evaluator. Raises :class:`ConfigError`."""
    evaluator = evaluator or spec.make_evaluator()
    DseObjective(spec, evaluator, budget=spec.n_trials)
    first = next(spec.space.enumerate(), None)
    if first is not None:
        try:
            evaluator.design(first)
        except ConfigError as exc:
            raise ConfigError(f"yields designs the system layer rejects ({exc.key}: {exc.problem})",
                              file=spec.space.file, key="chiplets" if exc.key and "chiplet" in exc.key else None) from None
    problem = output_dir_problem(spec.artifact_dir) if spec.artifact_dir is not None else None
    if problem:
        raise ConfigError(problem, file=spec.file, key="artifacts", value=str(spec.artifact_dir))
    return evaluator


def check_feasible_designs(spec: StudySpec, evaluator: Evaluator, sample: int = FEASIBILITY_SAMPLE) -> None:
    """Raise :class:`ConfigError` when none of ``sample`` designs spread evenly over the search space (its first
    :data:`FEASIBILITY_SCAN` designs) is feasible for every model (e.g. a Mamba model on a space of attention
    chiplets): such a study would only prune."""
    objective = DseObjective(spec, evaluator, budget=spec.n_trials)
    size = spec.space.size()
    step = max(1, -(-min(size, FEASIBILITY_SCAN) // sample))  # ceil: the sample spans the whole scan
    reasons: dict[str, int] = {}
    checked = 0
    for i, d in enumerate(spec.space.enumerate()):
        if checked >= sample or i >= FEASIBILITY_SCAN:
            break
        if i % step:
            continue
        checked += 1
        try:
            design = evaluator.design(d)
        except ConfigError as exc:
            reasons[exc.problem] = reasons.get(exc.problem, 0) + 1
            continue
        found = [f"{k}: {r}" if len(objective.pairs) > 1 else r
                 for k, model, _ in objective.pairs for r in evaluator.feasibility(design, model)]
        if not found:
            return
        reasons[found[0]] = reasons.get(found[0], 0) + 1
    if checked:
        top = max(reasons, key=reasons.get)
        raise ConfigError(f"every design checked is infeasible ({checked} of {size:,}, evenly spread); most common "
                          f"reason ({reasons[top]}x): {top}", file=spec.file, key="search_space")


def run_study(
    spec: StudySpec,
    opts: RunOptions = RunOptions(),
    *,
    evaluator: Evaluator | None = None,
    on_trial: Callable[[optuna.Study, FrozenTrial, TrialReport | None], None] | None = None,
    poll: Callable[[optuna.Study], None] | None = None,
    on_start: Callable[[optuna.Study], None] | None = None,
) -> tuple[optuna.Study, RunSummary]:
    """Run (or resume) a study with ``opts.workers`` local workers; returns the study and a summary.

    With one worker everything runs in this process and ``on_trial`` is called after each trial. With several,
    worker processes are spawned on the same storage and ``poll(study)`` is called about once a second.
    ``on_start(study)`` is called once everything is validated and the study is open (before any trial).
    """
    spec = apply_options(spec, opts)
    t0 = time.perf_counter()
    evaluator = check_study(spec, evaluator)
    study = open_study(spec, storage_options=opts.storage_options, adopt=opts.adopt,
                       content=pairs_digest(DseObjective(spec, evaluator, budget=spec.n_trials)))
    if spec.exhaustive is not None and opts.workers > 1:
        prepare_sweep(study, spec, evaluator)  # the launcher fills the queue once; its workers only pull
    if on_start is not None:
        on_start(study)
    before = count_finished(study)
    n_existing = len(study.get_trials(deepcopy=False))
    pids: tuple[int, ...] = ()
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
        pids = tuple(p.pid for p in procs if p.pid)
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
    from hydra_opt.dse.fault import running_left_warning

    so = opts.storage_options
    warning = running_left_warning(study, so.grace_period_s)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    return study, summarize(study, spec, before, time.perf_counter() - t0, pids)
