"""Storage operations that survive a short outage: bounded exponential backoff, then one clear error.

A database restart, a failover or a dropped network link makes every storage call of every worker fail for some
seconds. Without retries each worker dies with chained tracebacks and leaves its trial RUNNING. Here every call
of the storage's public interface (and the private calls Optuna's cache makes) is retried while the error is a
*connection* problem (SQLAlchemy ``OperationalError``/``InterfaceError``, Redis/socket connection errors), waiting
0.25 s, 0.5 s, 1 s, ... (at most :data:`MAX_WAIT_S` per wait) until ``retry_s`` seconds have passed; then
:class:`StorageUnavailableError` is raised, with one line naming the storage (redacted) and the last error.
Once a process has given up, later calls fail at once (no second wait in Optuna's clean-up path).

Retrying a call whose commit reached the server just before the connection dropped could repeat it; the one case
that matters, a trial's final state written twice, is recognised (the trial already has that state) and treated as
success. Other errors (integrity, programming) are raised at once, as before.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

import optuna
from optuna.trial import TrialState

__all__ = ["StorageUnavailableError", "retrying_class", "enable_retries", "call_with_retries", "is_transient",
           "storage_outage", "MAX_WAIT_S", "RETRIED_METHODS"]

#: Longest single wait between two attempts, s.
MAX_WAIT_S = 8.0
#: First wait, s (doubled after every failed attempt).
FIRST_WAIT_S = 0.25

#: Methods retried (public BaseStorage API, plus the private ones ``_CachedStorage`` calls on an RDB backend).
RETRIED_METHODS: tuple[str, ...] = (
    "check_trial_is_updatable", "create_new_study", "create_new_trial", "delete_study", "get_all_studies",
    "get_all_trials", "get_best_trial", "get_n_trials", "get_study_directions", "get_study_id_from_name",
    "get_study_name_from_id", "get_study_system_attrs", "get_study_user_attrs", "get_trial",
    "get_trial_id_from_study_id_trial_number", "get_trial_number_from_id", "get_trial_param", "get_trial_params",
    "get_trial_system_attrs", "get_trial_user_attrs", "set_study_system_attr", "set_study_user_attr",
    "set_trial_intermediate_value", "set_trial_param", "set_trial_state_values", "set_trial_system_attr",
    "set_trial_user_attr", "_create_new_trial", "_get_best_trial_id", "_get_stale_trial_ids", "_get_trials",
    "_set_trial_param",
)


class StorageUnavailableError(RuntimeError):
    """The storage stayed unreachable for longer than the retry bound."""


def storage_outage(exc: BaseException) -> str | None:
    """The one-line message of a storage outage past the retry bound in ``exc``'s chain (Optuna may raise its own
    error while cleaning up after it), else None."""
    cur: BaseException | None = exc
    for _ in range(12):
        if cur is None:
            return None
        if isinstance(cur, StorageUnavailableError):
            return str(cur)
        cur = cur.__cause__ or cur.__context__
    return None


def _transient_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [ConnectionError, TimeoutError]
    try:
        import sqlalchemy.exc as sa

        types += [sa.OperationalError, sa.InterfaceError, sa.DisconnectionError, sa.TimeoutError]
    except ImportError:  # pragma: no cover - SQLAlchemy is an Optuna dependency
        pass
    try:
        import redis.exceptions as rx

        types += [rx.ConnectionError, rx.TimeoutError, rx.BusyLoadingError]
    except ImportError:
        pass
    return tuple(types)


_TRANSIENT: tuple[type[BaseException], ...] | None = None


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) is a connection problem worth retrying."""
    global _TRANSIENT
    if _TRANSIENT is None:
        _TRANSIENT = _transient_types()
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 12:
        if isinstance(cur, StorageUnavailableError):
            return False
        if isinstance(cur, _TRANSIENT):
            return True
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return False


def _short(exc: BaseException) -> str:
    cur: BaseException = exc
    while (cur.__cause__ or cur.__context__) is not None and not str(cur).strip():
        cur = cur.__cause__ or cur.__context__  # type: ignore[assignment]
    text = " ".join(str(cur).split())
    return f"{type(cur).__name__}: {text}"[:160]


class _RetryState:
    """Per-storage retry settings and the 'gave up' flag (shared by all threads of the process)."""

    def __init__(self, retry_s: float, label: str, scrub: Callable[[str], str], sleep: Callable[[float], None]):
        self.retry_s = retry_s
        self.label = label
        self.scrub = scrub
        self.sleep = sleep
        self.down: str | None = None
        self.lock = threading.Lock()


def _call(state: _RetryState, name: str, func: Callable[..., Any], self: Any, args: tuple, kwargs: dict) -> Any:
    if state.down is not None:
        raise StorageUnavailableError(state.down)
    deadline = time.monotonic() + state.retry_s
    wait = FIRST_WAIT_S
    failed_once = False
    while True:
        try:
            return func(self, *args, **kwargs)
        except optuna.exceptions.UpdateFinishedTrialError:
            if failed_once and name == "set_trial_state_values" and _already_set(self, args, kwargs):
                return True  # the attempt that lost its connection had committed
            raise
        except Exception as exc:  # noqa: BLE001 - re-raised unless a connection problem
            if not is_transient(exc):
                raise
            failed_once = True
            left = deadline - time.monotonic()
            if left <= 0:
                msg = state.scrub(
                    f"storage {state.label}: unreachable for {state.retry_s:g} s ({_short(exc)}); the study is "
                    "kept as far as it was written: re-run the same command to resume")
                with state.lock:
                    state.down = state.down or msg
                raise StorageUnavailableError(msg) from None
            state.sleep(min(wait * (0.75 + 0.5 * random.random()), left, MAX_WAIT_S))
            wait *= 2


def _already_set(storage: Any, args: tuple, kwargs: dict) -> bool:
    trial_id = args[0] if args else kwargs.get("trial_id")
    state = args[1] if len(args) > 1 else kwargs.get("state")
    try:
        return storage.get_trial(trial_id).state == state and state != TrialState.RUNNING
    except Exception:  # noqa: BLE001 - cannot tell: report the original error
        return False


def _wrap(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        state = self.__dict__.get("_hydra_retry")
        if state is None:
            return func(self, *args, **kwargs)
        return _call(state, name, func, self, args, kwargs)

    method.__name__ = name
    method.__doc__ = func.__doc__
    return method


def _record_heartbeat(func: Callable[..., Any]) -> Callable[..., Any]:
    def record_heartbeat(self: Any, trial_id: int) -> None:
        try:
            func(self, trial_id)
        except Exception as exc:  # noqa: BLE001 - a missed beat is harmless; the next one retries
            if not is_transient(exc):
                raise

    return record_heartbeat


_CLASSES: dict[type, type] = {}


def retrying_class(cls: type) -> type:
    """A subclass of the storage class ``cls`` whose operations retry (see the module docstring).

    A subclass, not a wrapper object, so that Optuna still recognises the storage (``RDBStorage`` gets its cache
    and heartbeat, ``JournalStorage`` its journal code paths). Enable retries on an instance with
    :func:`enable_retries`; without it the subclass behaves exactly as ``cls``.
    """
    if cls not in _CLASSES:
        ns: dict[str, Any] = {name: _wrap(name, getattr(cls, name)) for name in RETRIED_METHODS if hasattr(cls, name)}
        if hasattr(cls, "record_heartbeat"):
            ns["record_heartbeat"] = _record_heartbeat(cls.record_heartbeat)
        ns["__doc__"] = f"{cls.__name__} whose operations retry through short outages (hydra_opt.dse.storage_retry)."
        _CLASSES[cls] = type(f"Retrying{cls.__name__}", (cls,), ns)
    return _CLASSES[cls]


def enable_retries(storage: Any, retry_s: float, label: str, scrub: Callable[[str], str] = str,
                   sleep: Callable[[float], None] = time.sleep) -> Any:
    """Turn retries on for ``storage`` (an instance of a :func:`retrying_class` class); returns it."""
    if retry_s > 0:
        storage.__dict__["_hydra_retry"] = _RetryState(retry_s, label, scrub, sleep)
    return storage



def call_with_retries(storage: Any, name: str, func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)`` retried with ``storage``'s retry settings (for an operation written outside its methods)."""
    state = storage.__dict__.get("_hydra_retry")
    if state is None:
        return func(*args)
    return _call(state, name, lambda _self, *a: func(*a), storage, args, {})
