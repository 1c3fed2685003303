"""Exhaustive sweeps as Optuna studies on a shared storage: any number of workers, on any number of machines, join a
sweep with the same command and storage URL; a re-run resumes it; its table is read back from the storage.

A sweep is a fixed list of designs to simulate — every feasible design of the search space, a seeded uniform sample
of them, or the K nearest the estimated front (:func:`hydra_opt.dse.exhaustive.choose`). Each design becomes one
trial, enqueued with its deterministic key (``design_key``), its design dict and its estimates as user attributes;
workers claim WAITING trials through the storage's atomic WAITING → RUNNING transition (the one
``Study.ask`` uses), simulate, and tell. Workers never create trials of their own.

Why not ``BruteForceSampler`` / ``GridSampler``: both choose a trial's parameters before they are in the storage, so
concurrent workers can propose the same design (Optuna's ``GridSampler`` docs: "different workers will occasionally
suggest the same parameter configuration"; ``BruteForceSampler``'s: its options "may increase the number of
duplicate suggestions during distributed optimization"), and ``BruteForceSampler`` counts FAIL trials as explored,
so a killed worker's design would never be run again.

Every design is simulated exactly once:

* *enqueue*: a worker enqueues only designs that have no live trial (live = not FAIL and not a duplicate),
  re-reading the storage every chunk and visiting the chunks in its own rotated order, so workers that start
  together rarely enqueue the same design twice;
* *run*: a trial whose design has a live trial of lower number ends PRUNED with :data:`DUPLICATE_ATTR` before it
  simulates. Whatever the enqueue races, the lowest-numbered live trial of a design is the one that simulates it;
* *killed workers*: the storage's heartbeat fails their trial and Optuna's ``RetryHeartbeatStaleTrialCallback``
  queues a WAITING copy with the same parameters and user attributes (:mod:`hydra_opt.dse.fault`, as for normal
  studies); a worker whose queue is empty stays while trials run elsewhere, fails the stale ones and runs the retries;
* *resume*: re-running enqueues again every design whose trials all failed (an interrupt, exhausted retries).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hydra_opt.config import Node
from hydra_opt.dse import fault
from hydra_opt.dse.samplers import CONSTRAINTS_ATTR
from hydra_opt.dse.search_space import design_key
from hydra_opt.dse.storages import StorageOptions, make_storage
from hydra_opt.evaluate.evaluators import Evaluator
from hydra_opt.evaluate.objectives import ObjectiveSpec

__all__ = [
    "DUPLICATE_ATTR",
    "SWEEP_ATTR",
    "SweepSpec",
    "SweepObjective",
    "SweepQueue",
    "enqueue_missing",
    "parse_sweep",
    "requeue_failed",
    "row_attrs",
    "run_local_sweep",
    "simulated",
    "work",
]

#: The study user attribute holding the sweep's definition, its number of designs and whether its queue is complete.
SWEEP_ATTR = "hydra_opt_sweep"
#: Trial user attribute of a trial that did not simulate because a live trial of lower number holds its design
#: (the study's ``duplicate_of``: the run summary, report and dashboard count it as a duplicate).
DUPLICATE_ATTR = "duplicate_of"
_CHUNK = 64


@dataclass(frozen=True)
class SweepSpec:
    """The ``exhaustive:`` block of a study file.

    Attributes:
        simulate: ``"all"`` feasible designs, ``"front:K"`` (the K nearest the estimated front) or an integer N (a
            uniform sample of N feasible designs).
        sample_seed: Seed of the sample.
    """

    simulate: str | int = "all"
    sample_seed: int = 0

    def definition(self, sim_seed: int) -> dict[str, Any]:
        """What must match for a worker to join an existing sweep."""
        return {"simulate": str(self.simulate), "sample_seed": self.sample_seed, "sim_seed": sim_seed}


def parse_sweep(node: Node) -> SweepSpec:
    """``exhaustive: true`` or ``exhaustive: {simulate: all | N | front:K, sample_seed: S}``."""
    if node.data is True:
        return SweepSpec()
    node.mapping()
    raw = node.get("simulate", "all")
    if isinstance(raw.data, bool) or not isinstance(raw.data, (int, str)):
        raise raw.error("must be 'all', a number of designs N or 'front:K'")
    if isinstance(raw.data, int):
        simulate: str | int = raw.int(minimum=1, maximum=10**7)
    else:
        simulate = raw.str(max_len=32)
        head, _, k = simulate.partition(":")
        if simulate != "all" and not (head == "front" and k.isdigit() and int(k) >= 1):
            raise raw.error("must be 'all', a number of designs N or 'front:K'")
    seed = node.get("sample_seed", 0).int(minimum=0, maximum=2**32 - 1)
    node.done(["simulate", "sample_seed"])
    return SweepSpec(simulate, seed)


# -- the queue -------------------------------------------------------------------------------------------------
def _finite(v: float) -> float | None:
    return float(v) if v is not None and math.isfinite(v) else None


def _live(t: FrozenTrial) -> bool:
    """Whether ``t`` holds its design: it will simulate, is simulating or did (not FAIL, not a duplicate)."""
    return t.state != TrialState.FAIL and DUPLICATE_ATTR not in t.user_attrs


def _live_keys(study: optuna.Study) -> set[str]:
    return {t.user_attrs["design_key"] for t in study.get_trials(deepcopy=False)
            if "design_key" in t.user_attrs and _live(t)}


def row_attrs(design: Mapping[str, Any], est: Mapping[str, float]) -> dict[str, Any]:
    return {"design": dict(design), "design_key": design_key(design), "promotion": "exhaustive",
            **{f"est_{m}": _finite(v) for m, v in est.items()}}


def enqueue_missing(study: optuna.Study, rows: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> int:
    """Enqueue each ``(params, user_attrs)`` row whose ``design_key`` has no live trial; returns how many.

    The storage is re-read before every chunk and this worker starts at a chunk of its own (rotated by its pid),
    so several workers enqueueing at once mostly skip each other's work; a design they both enqueue anyway is
    simulated once (:meth:`SweepQueue.duplicate_of`).
    """
    chunks = [rows[i:i + _CHUNK] for i in range(0, len(rows), _CHUNK)]
    start = (os.getpid() * 7919) % max(len(chunks), 1)
    n = 0
    for chunk in chunks[start:] + chunks[:start]:
        live = _live_keys(study)
        for params, attrs in chunk:
            if attrs["design_key"] not in live:
                study.enqueue_trial(dict(params), user_attrs=dict(attrs))
                live.add(attrs["design_key"])
                n += 1
    return n


def requeue_failed(study: optuna.Study) -> int:
    """Enqueue again every design whose trials all failed (interrupted, or retries exhausted)."""
    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    live = {t.user_attrs["design_key"] for t in trials if "design_key" in t.user_attrs and _live(t)}
    rows, seen = [], set()
    for t in trials:
        key = t.user_attrs.get("design_key")
        if key is None or key in live or key in seen or t.state != TrialState.FAIL:
            continue
        seen.add(key)
        attrs = {k: v for k, v in t.user_attrs.items() if k in ("design", "design_key") or k.startswith("est_")}
        attrs["promotion"] = "exhaustive"
        rows.append((t.params, attrs))
    return enqueue_missing(study, rows) if rows else 0


class SweepQueue:
    """One worker's view of a sweep's trials: the WAITING trials it may claim and the trials of each design key.

    Re-read from the storage only when its claims run out or it meets a trial it has not seen (a retry, a late
    enqueue), so a trial costs no full read of the study. Claims are the storage's atomic WAITING → RUNNING
    transition (the one ``Study.ask`` uses), so a stale view can lose a claim race but never double-claim.
    """

    def __init__(self, study: optuna.Study) -> None:
        self.study = study
        self.refresh()

    def refresh(self) -> None:
        """Re-read the study's trials."""
        self.by_key: dict[str, list[tuple[int, int]]] = {}
        self.ids: set[int] = set()
        waiting = []
        self.running = 0
        for t in self.study.get_trials(deepcopy=False):
            self.ids.add(t._trial_id)
            key = t.user_attrs.get("design_key")
            if key is not None:
                self.by_key.setdefault(key, []).append((t.number, t._trial_id))
            if t.state == TrialState.WAITING:
                waiting.append(t._trial_id)
            self.running += t.state == TrialState.RUNNING
        start = (os.getpid() * 7919) % max(len(waiting), 1)  # workers start at different places: fewer lost races
        self.waiting = (waiting[start:] + waiting[:start])[::-1]  # pop() takes them in trial order

    def claim(self) -> int | None:
        """Claim a WAITING trial; its id, or None when the storage holds none."""
        storage = self.study._storage
        for fresh in (False, True):
            if fresh:
                self.refresh()
            while self.waiting:
                trial_id = self.waiting.pop()
                try:
                    if storage.set_trial_state_values(trial_id, state=TrialState.RUNNING):
                        return trial_id
                except optuna.exceptions.UpdateFinishedTrialError:
                    continue  # another worker ran it meanwhile
        return None

    def duplicate_of(self, trial_id: int, number: int, key: str) -> int | None:
        """Number of a live trial of lower number holding design ``key`` (then this trial must not simulate)."""
        if trial_id not in self.ids:
            self.refresh()
        for n, other in sorted(self.by_key.get(key, ())):
            if (n, other) < (number, trial_id) and _live(self.study._storage.get_trial(other)):
                return n
        return None


# -- one design ------------------------------------------------------------------------------------------------
class SweepObjective:
    """Simulate the design a sweep trial carries; duplicates end PRUNED without simulating.

    Args:
        evaluator: The evaluator.
        pairs: (model, workload) references.
        objectives: Objectives and aggregation over pairs.
        sim_seed: Seed of every simulation.
        suggest: The search space's ``suggest``, to record the trial's (enqueued) parameters; None for a design
            list without a space.
    """

    def __init__(self, evaluator: Evaluator, pairs: Sequence[tuple[str, str]], objectives: ObjectiveSpec,
                 sim_seed: int, *, suggest: Callable[[optuna.Trial], Any] | None = None) -> None:
        self.evaluator = evaluator
        self.objectives = objectives
        self.sim_seed = sim_seed
        self.suggest = suggest
        self.loaded = [(f"{m}/{w}", *evaluator.load(m, w)) for m, w in pairs]

    def __call__(self, trial: optuna.Trial, queue: SweepQueue | None = None) -> Sequence[float]:
        attrs = trial.user_attrs
        design, key = attrs.get("design"), attrs.get("design_key")
        if design is None or key is None:
            raise optuna.TrialPruned("not a sweep trial (no design)")
        if self.suggest is not None:
            self.suggest(trial)
        dup = (queue or SweepQueue(trial.study)).duplicate_of(trial._trial_id, trial.number, key)
        if dup is not None:
            trial.set_user_attr(DUPLICATE_ATTR, dup)
            raise optuna.TrialPruned(f"design already held by trial {dup}")
        obj = self.evaluator.design(design)
        t0 = time.perf_counter()
        per = {k: self.evaluator.simulate(obj, model, wl, seed=self.sim_seed).metrics for k, model, wl in self.loaded}
        sim = self.objectives.combine(per)
        trial.set_user_attr("sim_wall_s", round(time.perf_counter() - t0, 4))
        for m, v in sim.items():
            trial.set_user_attr(f"sim_{m}", _finite(v))
        trial.set_user_attr(CONSTRAINTS_ATTR, [0.0] + self.objectives.constraint_values(sim))
        values = self.objectives.values(sim)
        if not all(math.isfinite(v) for v in values):
            trial.set_user_attr("promotion", "non-finite-simulation")
            raise optuna.TrialPruned(f"simulation gave non-finite objective values {values}")
        return values


def _run_trial(study: optuna.Study, trial_id: int, func: Callable[[optuna.Trial], Any]) -> FrozenTrial:
    """Run a claimed trial under the storage's heartbeat and tell its outcome (FAIL, re-raised, on an error)."""
    from optuna.storages._heartbeat import get_heartbeat_thread

    trial = optuna.Trial(study, trial_id)
    state, values = None, None
    with get_heartbeat_thread(trial_id, study._storage):
        try:
            values = func(trial)
        except optuna.TrialPruned:
            state = TrialState.PRUNED
        except (Exception, KeyboardInterrupt):
            try:
                study.tell(trial, state=TrialState.FAIL)
            except optuna.exceptions.UpdateFinishedTrialError:
                pass
            raise
    try:
        return study.tell(trial, values, state=state)
    except optuna.exceptions.UpdateFinishedTrialError:
        # Another worker declared this one dead (a heartbeat gap beyond the grace period) and queued a retry.
        return study._storage.get_trial(trial_id)


def work(
    study: optuna.Study,
    objective: SweepObjective,
    *,
    storage_options: StorageOptions | None = None,
    timeout_s: float | None = None,
    on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Run queued trials until the queue is empty and no trial runs elsewhere (or ``timeout_s``); returns how many.

    Once the queue is empty, while other workers' trials run, this worker stays if the storage has a heartbeat (RDB,
    or journal with a grace period): it fails those that went silent (:func:`hydra_opt.dse.fault.fail_stale`, which
    queues their retries) and runs the retries. Stale trials are not looked for before: a check reads the study,
    and a retry only has to run before the sweep ends.
    """
    so = storage_options or StorageOptions()
    grace = so.grace_period_s if so.heartbeat_interval_s > 0 else 0.0
    watched = fault.has_rdb_heartbeat(study) or (fault.is_journal(study) and grace > 0)
    queue = SweepQueue(study)
    func = fault.with_journal_heartbeat(functools.partial(objective, queue=queue), so.heartbeat_interval_s)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    done = 0
    while deadline is None or time.monotonic() < deadline:
        trial_id = queue.claim()
        if trial_id is None:
            # Queue empty: stale trials matter now (a killed worker's design must be retried before the end).
            if watched and fault.fail_stale(study, grace, so.failed_trial_retries):
                continue
            if not watched or not queue.running:
                return done
            sleep(max(1.0, so.heartbeat_interval_s / 2))
            continue
        frozen = _run_trial(study, trial_id, func)
        done += 1
        if on_trial is not None:
            on_trial(study, frozen)
    return done


# -- reading back ----------------------------------------------------------------------------------------------
def simulated(study: optuna.Study) -> dict[str, tuple[dict[str, float], float]]:
    """``design_key → (simulated metrics, simulation wall s)`` of every design the sweep simulated (NaN for a
    non-finite value)."""
    out: dict[str, tuple[dict[str, float], float]] = {}
    for t in sorted(study.get_trials(deepcopy=False, states=fault.FINISHED), key=lambda t: t.number):
        key = t.user_attrs.get("design_key")
        if key is None or key in out or "sim_wall_s" not in t.user_attrs:
            continue
        sim = {k[4:]: (math.nan if v is None else float(v)) for k, v in t.user_attrs.items()
               if k.startswith("sim_") and k != "sim_wall_s"}
        out[key] = (sim, float(t.user_attrs["sim_wall_s"]))
    return out


# -- the local convenience (run_exhaustive) --------------------------------------------------------------------
def _local_worker(storage: str, name: str, evaluator: Evaluator, pairs: Sequence[tuple[str, str]],
                  objectives: ObjectiveSpec, sim_seed: int) -> None:
    fault.sigterm_as_interrupt()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name=name, storage=make_storage(storage))
    try:
        work(study, SweepObjective(evaluator, pairs, objectives, sim_seed))
    except KeyboardInterrupt:
        fault.ignore_further_interrupts()


def run_local_sweep(
    designs: Sequence[Mapping[str, Any]],
    pairs: Sequence[tuple[str, str]],
    objectives: ObjectiveSpec,
    evaluator: Evaluator,
    *,
    est_rows: Sequence[Mapping[str, float]] | None = None,
    sim_seed: int = 0,
    storage: str | None = None,
    study_name: str | None = None,
    workers: int = 1,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[list[dict[str, float]], float]:
    """Simulate ``designs`` as a sweep study (in memory unless ``storage``); returns their simulated metrics (in
    order) and the sum of the simulations' wall times, s. A re-run on the same storage and name resumes."""
    keys = [design_key(d) for d in designs]
    metrics = [m.name for m in objectives.needed()]
    ident = hashlib.sha256(json.dumps([sorted(keys), [list(p) for p in pairs], metrics, objectives.aggregate,
                                       sim_seed], default=str).encode()).hexdigest()[:16]
    name = study_name or f"exhaustive-{ident}"
    if workers > 1 and storage is None:
        raise ValueError("workers > 1 needs a storage URL the worker processes can open")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(storage=make_storage(storage) if storage else None, study_name=name,
                                    directions=objectives.directions, load_if_exists=True,
                                    sampler=optuna.samplers.RandomSampler(0))
    old = study.user_attrs.get(SWEEP_ATTR)
    if old is not None and old.get("ident") != ident:
        raise ValueError(f"study {name!r} holds another sweep (designs, pairs, objectives or sim_seed differ)")
    study.set_user_attr(SWEEP_ATTR, {"ident": ident, "designs": len(designs), "enqueued": False})
    ests = est_rows or [{} for _ in designs]
    enqueue_missing(study, [({}, row_attrs(d, e)) for d, e in zip(designs, ests)])
    study.set_user_attr(SWEEP_ATTR, {"ident": ident, "designs": len(designs), "enqueued": True})
    if workers > 1:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_local_worker, args=(storage, name, evaluator, pairs, objectives, sim_seed))
                 for _ in range(workers)]
        for p in procs:
            p.start()
        try:
            for p in procs:
                p.join()
        except KeyboardInterrupt:
            fault.ignore_further_interrupts()
            fault.interrupt_workers(procs)
            raise
    else:
        total = len(designs)

        def tick(s: optuna.Study, _t: FrozenTrial) -> None:
            if progress is not None:
                progress("simulate", len(simulated(s)), total)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.logging.set_verbosity(optuna.logging.ERROR)
            work(study, SweepObjective(evaluator, pairs, objectives, sim_seed), on_trial=tick)
    found = simulated(study)
    sims = [found[k][0] if k in found else {} for k in keys]
    return sims, sum(found[k][1] for k in set(keys) if k in found)
