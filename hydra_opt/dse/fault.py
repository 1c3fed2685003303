"""Fault tolerance of distributed studies: per-trial sampler seeds, stale-trial recovery, finishing the budget.

Many workers (local processes or other machines) share one study through its storage. Three things can go wrong,
and this module handles each:

* **Seed collisions.** Two workers whose samplers hold the same seed propose the same designs at the same time
  (e.g. two machines both started with the default ``--worker-index 0`` on an empty study).
  :class:`PerTrialSeedSampler` reseeds every random state of the wrapped sampler from ``(study seed, trial
  number)`` right before the trial samples. Trial numbers are unique across all workers (the storage assigns
  them), so no two trials share a random stream, whatever the workers' seeds, and a single-worker run is still
  reproducible (trial *n* always gets the stream of *n*).
* **Killed workers.** A worker killed with SIGKILL (or a machine lost) leaves its trial RUNNING forever. On RDB
  storages Optuna's heartbeat detects it (``fail_stale_trials`` + ``RetryHeartbeatStaleTrialCallback``: FAIL, then
  a WAITING copy with the same parameters and the system attribute ``failed_trial`` = the killed trial's number).
  Journal storages have no heartbeat in Optuna, so :class:`JournalHeartbeat` writes the trial system attribute
  :data:`HEARTBEAT_ATTR` (epoch seconds) every ``interval_s`` while a trial runs, and
  :func:`recover_stale_trials` does for journals what Optuna does for RDBs (also by hand: ``python -m hydra_opt
  recover``).
* **The budget's tail.** Workers stop creating trials when finished + running trials reach the budget; if a
  running one then turns out to be dead, nobody would finish the budget. :func:`optimize_until_budget` keeps a
  worker alive at the end of the study until every running trial has finished or been recovered, and runs the
  retries, so the study ends with exactly the budget of finished trials.
"""

from __future__ import annotations

import copy
import math
import os
import signal
import socket
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from hydra_opt.dse.samplers import WrappedSampler

__all__ = [
    "FINISHED",
    "HEARTBEAT_ATTR",
    "RETRIED_ATTR",
    "WORKER_ATTR",
    "JournalHeartbeat",
    "PerTrialSeedSampler",
    "RecoveredTrial",
    "fail_stale",
    "find_stale_trials",
    "has_rdb_heartbeat",
    "ignore_further_interrupts",
    "interrupt_workers",
    "is_journal",
    "last_alive_s",
    "optimize_until_budget",
    "recover_stale_trials",
    "reseed_sampler",
    "sigterm_as_interrupt",
    "running_left_warning",
    "trial_seed",
    "with_journal_heartbeat",
    "worker_id",
    "worker_is_dead",
]

#: Trial system attribute holding the epoch seconds of the last journal heartbeat of a RUNNING trial.
HEARTBEAT_ATTR = "hydra_opt_heartbeat"
#: Trial system attribute holding the ``host:pid`` of the worker that ran the trial.
WORKER_ATTR = "hydra_opt_worker"
#: System attribute that Optuna's retry callback sets on a retry, holding the number of the original (failed) trial.
RETRIED_ATTR = "failed_trial"
#: States that count toward a study's budget.
FINISHED: tuple[TrialState, ...] = (TrialState.COMPLETE, TrialState.PRUNED)


# -- per-trial seeds -----------------------------------------------------------------------------------------
def trial_seed(seed: int, number: int) -> int:
    """The 32-bit seed of trial ``number`` of a study seeded with ``seed`` (distinct per trial, reproducible)."""
    ss = np.random.SeedSequence([int(seed) & 0xFFFFFFFF, 0x7E57, int(number)])
    return int(ss.generate_state(1, dtype=np.uint32)[0])


def _random_states(obj: Any, seen: set[int], depth: int = 0) -> list[np.random.RandomState]:
    """Every ``np.random.RandomState`` reachable from a sampler through Optuna/hydra_opt objects, in a fixed order."""
    from optuna.samplers._lazy_random_state import LazyRandomState

    if depth > 4 or id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, LazyRandomState):
        return [obj.rng]
    if isinstance(obj, np.random.RandomState):
        return [obj]
    mod = type(obj).__module__ or ""
    if not mod.startswith(("optuna", "hydra_opt")) or not hasattr(obj, "__dict__"):
        return []
    out: list[np.random.RandomState] = []
    for key in sorted(vars(obj)):
        out.extend(_random_states(vars(obj)[key], seen, depth + 1))
    return out


def reseed_sampler(sampler: BaseSampler, seed: int) -> int:
    """Seed, in place, every random state of ``sampler`` (and of samplers/strategies it holds) from ``seed``.

    In place, because samplers share one random state with their helpers (NSGA-II's crossover, TPE's startup
    random sampler); replacing the object would break that sharing. Returns how many states were seeded.
    """
    states = []
    seen_states: set[int] = set()
    for rs in _random_states(sampler, set()):
        if id(rs) not in seen_states:
            seen_states.add(id(rs))
            states.append(rs)
    seeds = np.random.SeedSequence(int(seed) & 0xFFFFFFFF).generate_state(max(len(states), 1), dtype=np.uint32)
    for rs, s in zip(states, seeds):
        rs.seed(int(s))
    return len(states)


class PerTrialSeedSampler(WrappedSampler):
    """Wrap a sampler so every trial samples from a random stream fixed by ``(seed, trial number)``.

    Args:
        inner: The wrapped sampler.
        seed: The study seed.
    """

    def __init__(self, inner: BaseSampler, seed: int) -> None:
        super().__init__(inner)
        self._seed = int(seed)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        # Optuna calls this in study.ask() after the storage assigned the (unique) trial number and before any
        # sampling, so the whole trial's proposals come from its own stream.
        reseed_sampler(self._inner, trial_seed(self._seed, trial.number))
        self._inner.before_trial(study, trial)


# -- storages ------------------------------------------------------------------------------------------------
def has_rdb_heartbeat(study: Study) -> bool:
    """Whether Optuna's own heartbeat watches this study's trials (RDB storage opened with a heartbeat)."""
    from optuna.storages._heartbeat import is_heartbeat_enabled

    return is_heartbeat_enabled(study._storage)


def is_journal(study: Study) -> bool:
    """Whether the study lives in a JournalStorage (file or Redis)."""
    return isinstance(study._storage, optuna.storages.JournalStorage)


def last_alive_s(trial: FrozenTrial) -> float:
    """Epoch seconds of the last sign of life of a RUNNING trial: its journal heartbeat, else its start."""
    beat = trial.system_attrs.get(HEARTBEAT_ATTR)
    start = trial.datetime_start.timestamp() if trial.datetime_start is not None else 0.0
    return max(float(beat), start) if isinstance(beat, (int, float)) else start


def worker_is_dead(trial: FrozenTrial) -> bool:
    """Whether the trial's worker (:data:`WORKER_ATTR`) ran on this host and its process no longer exists — proof
    of death without waiting for a heartbeat to go stale (a reused pid only delays detection, never fakes it)."""
    host, _, pid = str(trial.system_attrs.get(WORKER_ATTR, "")).rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: a process with that pid exists
        return False
    return False


def find_stale_trials(study: Study, older_than_s: float, *, now_s: float | None = None) -> list[FrozenTrial]:
    """RUNNING trials with no sign of life for more than ``older_than_s`` seconds, or whose local worker process
    is gone (:func:`worker_is_dead`)."""
    now_s = time.time() if now_s is None else now_s
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    return [t for t in running if now_s - last_alive_s(t) > older_than_s or worker_is_dead(t)]


@dataclass(frozen=True)
class RecoveredTrial:
    """A stale trial that was failed.

    Attributes:
        number: The stale trial's number (now FAIL).
        idle_s: Seconds since its last sign of life.
        retry_number: Number of the WAITING retry created for it, or None (retries exhausted / disabled).
    """

    number: int
    idle_s: float
    retry_number: int | None


def recover_stale_trials(
    study: Study, older_than_s: float, *, max_retry: int | None = 3, retry: bool = True, now_s: float | None = None
) -> list[RecoveredTrial]:
    """Fail RUNNING trials idle for more than ``older_than_s`` s and queue a retry with the same parameters.

    The retry is made by Optuna's ``RetryHeartbeatStaleTrialCallback``, exactly as RDB heartbeats do, so
    ``RetryHeartbeatStaleTrialCallback.retried_trial_number(retry)`` is the failed trial's number. A trial another
    worker finished or failed meanwhile is skipped.
    """
    now_s = time.time() if now_s is None else now_s
    out: list[RecoveredTrial] = []
    storage = study._storage
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        callback = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=max_retry)
        for t in find_stale_trials(study, older_than_s, now_s=now_s):
            try:
                if not storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL):
                    continue
            except optuna.exceptions.UpdateFinishedTrialError:
                continue  # another worker finished or recovered it first
            failed = copy.deepcopy(storage.get_trial(t._trial_id))
            before = {x.number for x in study.get_trials(deepcopy=False, states=(TrialState.WAITING,))}
            if retry:
                callback(study, failed)
            new = [
                x.number
                for x in study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
                if x.number not in before and x.system_attrs.get(RETRIED_ATTR) == (
                    failed.system_attrs.get(RETRIED_ATTR, failed.number))
            ]
            out.append(RecoveredTrial(t.number, round(now_s - last_alive_s(t), 3), new[0] if new else None))
    return out


class JournalHeartbeat:
    """Write :data:`HEARTBEAT_ATTR` on a running trial every ``interval_s`` (journal storages have none).

    Args:
        storage: The study's storage.
        trial_id: The running trial's storage id.
        interval_s: Seconds between beats.
    """

    def __init__(self, storage: Any, trial_id: int, interval_s: float) -> None:
        self._storage = storage
        self._trial_id = trial_id
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hydra-opt-heartbeat", daemon=True)

    def _run(self) -> None:
        while True:
            try:
                self._storage.set_trial_system_attr(self._trial_id, HEARTBEAT_ATTR, round(time.time(), 3))
            except Exception:  # noqa: BLE001 - the trial ended (or the storage hiccupped); the next beat retries
                pass
            if self._stop.wait(self._interval_s):
                return

    def __enter__(self) -> JournalHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def worker_id() -> str:
    """``host:pid`` of this worker process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def with_journal_heartbeat(objective: Callable[[optuna.Trial], Any], interval_s: float) -> Callable[[optuna.Trial], Any]:
    """``objective`` wrapped so that each trial records its worker (:data:`WORKER_ATTR`, ``host:pid``) and, on a
    journal storage, sends heartbeats every ``interval_s`` (0 disables them)."""

    def wrapped(trial: optuna.Trial) -> Any:
        storage = trial.study._storage
        storage.set_trial_system_attr(trial._trial_id, WORKER_ATTR, worker_id())
        if interval_s <= 0 or not isinstance(storage, optuna.storages.JournalStorage):
            return objective(trial)
        with JournalHeartbeat(storage, trial._trial_id, interval_s):
            return objective(trial)

    return wrapped


# -- finishing the budget ------------------------------------------------------------------------------------
def fail_stale(study: Study, grace_s: float, max_retry: int | None, now_s: float | None = None) -> int:
    """Fail stale trials by whichever mechanism the storage has, and trials of dead local workers on any storage;
    returns how many this call failed."""
    if not (is_journal(study) and grace_s > 0):  # the journal path below finds dead local workers itself
        dead = len(recover_stale_trials(study, math.inf, max_retry=max_retry, now_s=now_s))
        if dead:
            return dead
    if has_rdb_heartbeat(study):
        before = len(study.get_trials(deepcopy=False, states=(TrialState.FAIL,)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)
        return len(study.get_trials(deepcopy=False, states=(TrialState.FAIL,))) - before
    if is_journal(study) and grace_s > 0:
        return len(recover_stale_trials(study, grace_s, max_retry=max_retry, now_s=now_s))
    return 0


def optimize_until_budget(
    study: Study,
    run_round: Callable[[float | None], None],
    *,
    budget: int | None,
    timeout_s: float | None,
    poll_s: float = 1.0,
    journal_grace_s: float = 0.0,
    max_retry: int | None = 3,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> int:
    """Run optimisation rounds until the study holds ``budget`` finished trials (or time runs out).

    ``run_round(timeout)`` runs ``study.optimize`` once; it returns when the budget callback sees finished +
    running + waiting trials reach the budget. If some of those running trials belong to dead workers, this
    worker stays: it polls every ``poll_s``, fails stale trials (RDB heartbeat, or the journal heartbeat older
    than ``journal_grace_s``), and runs another round for their retries (or replacements when retries are
    exhausted). Without any heartbeat (journal with ``journal_grace_s = 0``) it returns instead of waiting
    forever; ``python -m hydra_opt recover`` then frees the trials. ``sleep`` and ``clock`` (epoch seconds, for
    journal staleness) are injectable for tests.

    Returns:
        The number of rounds run.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    rounds = 0
    watched = has_rdb_heartbeat(study) or (is_journal(study) and journal_grace_s > 0)
    must_run = True
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return rounds
        trials = study.get_trials(deepcopy=False)
        finished = sum(t.state in FINISHED for t in trials)
        running = sum(t.state == TrialState.RUNNING for t in trials)
        waiting = sum(t.state == TrialState.WAITING for t in trials)
        if budget is not None and finished >= budget:
            return rounds
        if must_run and (budget is None or waiting or finished + running < budget):
            must_run = False
            try:
                run_round(left)
            except optuna.exceptions.UpdateFinishedTrialError:
                # Another worker declared this worker's trial dead (a heartbeat gap longer than the grace period)
                # and failed it; its retry is queued. Not fatal here: carry on with the next trial.
                must_run = True
            rounds += 1
            if budget is None:
                return rounds
            continue
        if waiting:
            must_run = True
            continue
        if running and recover_stale_trials(study, math.inf, max_retry=max_retry):
            must_run = True  # a dead local worker's trial: failed at once, whatever the heartbeat; retry it here
            continue
        if not running or not watched:
            return rounds  # nothing left that could finish the budget here (a sampler stop, or no heartbeat)
        sleep(poll_s)
        if fail_stale(study, journal_grace_s, max_retry, clock()):
            must_run = True  # run the retries, or replacements if retries are exhausted


def running_left_warning(study: Study, grace_s: float) -> str | None:
    """One warning line when RUNNING trials remain as this process ends (e.g. its ``timeout_s`` came before a
    dead worker's grace period), else None. Trials of dead local workers are failed (and retried) first."""
    recover_stale_trials(study, math.inf)
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    if not running:
        return None
    now = time.time()
    shown = ", ".join(f"{t.number} ({t.system_attrs.get(WORKER_ATTR, 'unknown worker')}, silent "
                      f"{now - last_alive_s(t):.0f} s)" for t in running[:3])
    more = f" and {len(running) - 3} more" if len(running) > 3 else ""
    return (f"hydra_opt: warning: {len(running)} trial(s) still RUNNING at exit: {shown}{more}; if their worker is "
            f"alive it finishes them, if it died they are failed and retried once silent for {grace_s:g} s (the next "
            "run, or `python -m hydra_opt recover`)")


# -- signals -------------------------------------------------------------------------------------------------
def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def sigterm_as_interrupt() -> None:
    """Make SIGTERM (batch schedulers, ``kill``) stop this process like Ctrl-C: the running trial ends FAIL
    through Optuna's normal path (nothing half-written) and a re-run resumes; SIGINT inherited as ignored (a
    background job of a shell, a worker of such a launcher) is made Ctrl-C again. Main thread only."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)


def ignore_further_interrupts() -> None:
    """After the first interrupt was handled: a second one (a forwarded SIGINT) must not break the clean exit."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def interrupt_workers(procs: Sequence[Any], grace_s: float = 2.0) -> None:
    """The launcher was interrupted: give its worker processes ``grace_s`` to stop on their own (a terminal's
    Ctrl-C reaches the whole process group), then send SIGINT to those still running (a signal sent to the
    launcher alone, e.g. ``kill -INT``)."""
    deadline = time.monotonic() + grace_s
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive() and p.pid:
            try:
                os.kill(p.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
