"""Storages by URL, with password redaction.

* ``sqlite:///path.db`` — embedded default; opened with a busy timeout so a few local workers can share it.
* ``postgresql://…``, ``mysql+pymysql://…`` (any SQLAlchemy URL) — Optuna's RDB storage, the distributed engine;
  heartbeats are enabled and a stale RUNNING trial (its worker died) is failed and retried with the same
  parameters (``RetryHeartbeatStaleTrialCallback``).
* ``journal:///path.log`` — Optuna's JournalStorage on a file (for NFS clusters without a database);
* ``redis://host:port/db`` — JournalStorage on Redis.

Journal storages have no heartbeat in Optuna; hydra_opt writes its own (:mod:`hydra_opt.dse.fault`), and
``python -m hydra_opt recover`` frees stale trials by hand. A journal file whose last record was torn by a crash
is repaired on open (:func:`repair_journal_tail`), as a write-ahead log would be: the torn bytes are cut, and a
backup copy of the file is kept.

Every storage retries its operations through short outages (:mod:`hydra_opt.dse.storage_retry`;
``StorageOptions.retry_s``). ``sqlite:///:memory:`` is refused: the study would vanish with the process.

Every URL shown to a user goes through :func:`redact_url` (progress lines, errors, the dashboard command).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from hydra_opt.config import ConfigError
from hydra_opt.dse.storage_retry import call_with_retries, enable_retries, is_transient, retrying_class

__all__ = [
    "StorageOptions",
    "make_storage",
    "redact_url",
    "is_rdb_url",
    "sqlite_url_for",
    "require_existing",
    "repair_journal_tail",
    "create_study_with_attrs",
    "SCHEMES",
]

#: URL schemes hydra_opt accepts (a ``+driver`` suffix is allowed on RDB schemes).
SCHEMES: tuple[str, ...] = ("sqlite", "postgresql", "postgres", "mysql", "mariadb", "journal", "redis", "rediss")

# The password runs to the *last* '@' of the authority: an unencoded '@' in a password must not leak its tail.
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^/\s]*)@")
_QUERY_SECRET = re.compile(r"(?i)([?&](?:password|passwd|pwd|token|secret)=)[^&\s]*")


def redact_url(text: str) -> str:
    """``text`` with every URL password (``scheme://user:pw@``, ``?password=``) replaced by ``***``."""
    text = _USERINFO.sub(lambda m: f"{m.group('scheme')}{m.group('user')}:***@", str(text))
    return _QUERY_SECRET.sub(r"\1***", text)


#: Drivers tried in order for an RDB URL without ``+driver``: SQLAlchemy's own default (psycopg 3, mysqlclient) is
#: often not the one installed (the ``postgresql``/``mysql`` extras install psycopg2-binary and PyMySQL).
_DRIVERS: dict[str, tuple[tuple[str, str], ...]] = {
    "postgresql": (("psycopg2", "psycopg2"), ("psycopg", "psycopg")),
    "mysql": (("pymysql", "pymysql"), ("MySQLdb", "mysqldb")),
    "mariadb": (("pymysql", "pymysql"), ("MySQLdb", "mysqldb")),
}


def with_driver(url: str) -> str:
    """An RDB URL with an installed driver named (``postgresql://`` → ``postgresql+psycopg2://``; ``postgres://``
    is accepted as ``postgresql://``); URLs that name a driver, or other schemes, are returned unchanged."""
    import importlib.util

    head, sep, rest = url.partition("://")
    if not sep or "+" in head:
        return url
    scheme = "postgresql" if head.lower() == "postgres" else head.lower()
    for module, driver in _DRIVERS.get(scheme, ()):
        if importlib.util.find_spec(module) is not None:
            return f"{scheme}+{driver}://{rest}"
    return url


#: Messages of the errors two processes get when both create the schema of a fresh database at once.
_SCHEMA_RACE = ("already exists", "duplicate key", "Duplicate entry", "UNIQUE constraint failed", "(1050,")


def _open_rdb(url: str, kwargs: dict, retry_s: float) -> optuna.storages.RDBStorage:
    """``RDBStorage(url, **kwargs)``, retried (a) when another worker is creating the same fresh schema right now
    (two machines starting together on an empty database; SQLAlchemy's create-if-absent is check-then-create) and
    (b) through an outage for up to ``retry_s`` s — unless the very first attempt is refused, which is far likelier
    a wrong host/port than an outage and is reported at once."""
    import random

    deadline = time.monotonic() + retry_s
    for attempt in range(10**6):
        try:
            return retrying_class(optuna.storages.RDBStorage)(url, **kwargs)
        except Exception as exc:  # noqa: BLE001 - re-raised unless the schema race or an outage
            race = attempt < 11 and any(m in str(exc) for m in _SCHEMA_RACE)
            outage = (is_transient(exc) and time.monotonic() < deadline
                      and not (attempt == 0 and "refused" in str(exc).lower()))
            if not (race or outage):
                raise
            # The other process finishes (part of) the schema meanwhile; several may race table by table.
            time.sleep(min(2.0, 0.1 * (attempt + 1)) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def scrub_secret(text: str, url: str) -> str:
    """``text`` without any piece of ``url``'s password (a driver may echo a host parsed from a password that
    holds an unencoded '@', e.g. ``could not translate host name "ss@host"``)."""
    m = _USERINFO.search(url)
    if not m or not m.group("pw"):
        return text
    for piece in sorted({m.group("pw"), *m.group("pw").split("@")}, key=len, reverse=True):
        if len(piece) >= 3:
            text = text.replace(piece, "***")
    return text


@dataclass(frozen=True)
class StorageOptions:
    """How RDB storages are opened.

    Attributes:
        sqlite_timeout_s: SQLite busy timeout, s (writers wait instead of failing with "database is locked").
        heartbeat_interval_s: Heartbeat period of RUNNING trials on RDB storages, s (0 disables).
        grace_period_s: A RUNNING trial whose last heartbeat is older than this is failed, s.
        failed_trial_retries: How often a trial failed by a stale heartbeat is retried (None = unlimited).
        retry_s: How long storage operations are retried through an outage (connection errors), s; then the
            worker stops with one line (0 disables retries).
        sqlite_wal: Open SQLite files in write-ahead-log mode with ``synchronous=NORMAL`` (measured 2.6x faster
            per trial on this machine's disk; safe on local disks, not on network file systems — use a journal
            storage there).
    """

    sqlite_timeout_s: float = 60.0
    heartbeat_interval_s: int = 30
    grace_period_s: int = 120
    failed_trial_retries: int | None = 3
    sqlite_wal: bool = True
    retry_s: float = 60.0


def _scheme(url: str) -> str:
    head = url.split("://", 1)[0] if "://" in url else ""
    return head.split("+", 1)[0].lower()


def is_rdb_url(url: str) -> bool:
    """Whether the URL is an SQLAlchemy (RDB) URL."""
    return _scheme(url) in ("sqlite", "postgresql", "postgres", "mysql", "mariadb")


def sqlite_url_for(path: str | Path) -> str:
    """``sqlite:///<absolute path>``."""
    return f"sqlite:///{Path(path).resolve()}"


def check_url(url: str, *, file: str | None = None, key: str | None = "storage") -> str:
    """Validate a storage URL (scheme known, no control characters); returns it unchanged."""
    if not isinstance(url, str) or not url or len(url) > 4096 or any(ord(c) < 32 for c in url):
        raise ConfigError("is not a storage URL", file=file, key=key, value=redact_url(str(url))[:80])
    scheme = _scheme(url)
    if scheme not in SCHEMES:
        raise ConfigError(
            f"has an unsupported scheme; use one of: {', '.join(s + '://' for s in SCHEMES)}",
            file=file,
            key=key,
            value=redact_url(url),
        )
    if scheme == "sqlite" and url.rstrip("/") in ("sqlite:", "sqlite:/", "sqlite://"):
        raise ConfigError("names no database file (use sqlite:///path.db)", file=file, key=key, value=url)
    if scheme == "sqlite" and ":memory:" in url or "mode=memory" in url:
        raise ConfigError("is an in-memory database: the study would be lost when the process exits, and worker "
                          "processes could not share it (use sqlite:///path.db)", file=file, key=key, value=url)
    return url


def repair_journal_tail(path: str | Path, *, lock: Any = None) -> Path | None:
    """Cut a torn last record off a journal file (a crash while appending); returns the backup copy, or None.

    Optuna appends one JSON record per line, under the journal's lock, and skips a last line without its newline
    when reading — but the next append lands after it and corrupts the file for good. Under the same lock (so no
    live writer is mid-record), a last line without its newline can only be a dead writer's: the file is copied
    to ``<file>.torn-<UTC time>.bak`` and truncated to its last complete record, and one warning line says so.
    """
    from optuna.storages.journal._file import get_lock_file

    p = Path(path)
    if not p.is_file() or p.stat().st_size == 0:
        return None
    lock = lock or optuna.storages.journal.JournalFileSymlinkLock(str(p))
    with get_lock_file(lock), open(p, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        end = size
        while end > 0:  # find the last newline, reading backwards in 64 KiB blocks
            start = max(0, end - 65536)
            f.seek(start)
            block = f.read(end - start)
            nl = block.rfind(b"\n")
            if nl >= 0:
                end = start + nl + 1
                break
            end = start
        if end == size:
            return None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        backup = p.with_name(f"{p.name}.torn-{stamp}-{os.getpid()}.bak")
        shutil.copy2(p, backup)
        f.truncate(end)
        f.flush()
        os.fsync(f.fileno())
    print(f"hydra_opt: warning: journal {p}: its last record was torn ({size - end} bytes without an end of line, "
          f"a crash while writing); cut it off, the original is kept as {backup}", file=sys.stderr, flush=True)
    return backup


def create_study_with_attrs(storage: optuna.storages.BaseStorage, name: str, directions: list[str],
                            user_attrs: dict[str, Any], system_attrs: dict[str, Any]) -> None:
    """Create study ``name`` with its attributes: in one transaction on an RDB storage (a kill cannot leave the
    study without them); elsewhere (journal) attribute records follow the creation record at once.

    Raises:
        optuna.exceptions.DuplicatedStudyError: The study exists (e.g. another worker created it first).
    """
    from optuna.study import StudyDirection

    dirs = [StudyDirection.MAXIMIZE if d == "maximize" else StudyDirection.MINIMIZE for d in directions]
    if not isinstance(storage, optuna.storages.RDBStorage):
        study_id = storage.create_new_study(dirs, name)
        for key, value in system_attrs.items():
            storage.set_study_system_attr(study_id, key, value)
        for key, value in user_attrs.items():
            storage.set_study_user_attr(study_id, key, value)
        return
    call_with_retries(storage, "create_new_study", _create_rdb_study, storage, name, dirs, user_attrs, system_attrs)


def _create_rdb_study(storage: optuna.storages.RDBStorage, name: str, dirs: list[Any], user_attrs: dict[str, Any],
                      system_attrs: dict[str, Any]) -> None:
    import json

    import sqlalchemy.exc
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session

    try:
        with _create_scoped_session(storage.scoped_session) as session:
            study = models.StudyModel(study_name=name, directions=[
                models.StudyDirectionModel(objective=i, direction=d) for i, d in enumerate(dirs)])
            session.add(study)
            for key, value in user_attrs.items():
                session.add(models.StudyUserAttributeModel(study=study, key=key, value_json=json.dumps(value)))
            for key, value in system_attrs.items():
                session.add(models.StudySystemAttributeModel(study=study, key=key, value_json=json.dumps(value)))
    except sqlalchemy.exc.IntegrityError:
        raise optuna.exceptions.DuplicatedStudyError(f"study {name!r} exists") from None


def _sqlite_wal(storage: optuna.storages.RDBStorage) -> None:
    """Switch every (new) connection of an SQLite storage to WAL + synchronous=NORMAL."""
    from sqlalchemy import event

    def on_connect(dbapi_conn, _record) -> None:  # noqa: ANN001 - SQLAlchemy callback signature
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    event.listen(storage.engine, "connect", on_connect)
    storage.engine.dispose()  # connections opened while creating the tables are replaced by configured ones


def make_storage(url: str, options: StorageOptions | None = None) -> optuna.storages.BaseStorage:
    """Open the storage a URL names (see the module docstring)."""
    opts = options or StorageOptions()
    check_url(url)
    scheme = _scheme(url)
    try:
        label = redact_url(url)
        if scheme == "journal":
            path = url.split("://", 1)[1]  # journal:///abs/file.log → /abs/file.log; journal://rel.log → rel.log
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            backend = optuna.storages.journal.JournalFileBackend(path)
            repair_journal_tail(path, lock=backend._lock)
            return enable_retries(retrying_class(optuna.storages.JournalStorage)(backend), opts.retry_s, label)
        if scheme in ("redis", "rediss"):
            with warnings.catch_warnings():  # "JournalRedisBackend is experimental": noise on every open
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                backend = optuna.storages.journal.JournalRedisBackend(url)
                storage = retrying_class(optuna.storages.JournalStorage)(backend)
            return enable_retries(storage, opts.retry_s, label, lambda t: scrub_secret(t, url))
        engine_kwargs: dict = {}
        if scheme == "sqlite":
            db = url.split(":///", 1)[1] if ":///" in url else ""
            if db:
                Path(db).parent.mkdir(parents=True, exist_ok=True)
            engine_kwargs = {"connect_args": {"timeout": opts.sqlite_timeout_s}}
        else:
            engine_kwargs = {"pool_pre_ping": True}
        kwargs: dict = {"engine_kwargs": engine_kwargs}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            if opts.heartbeat_interval_s > 0:
                kwargs.update(
                    heartbeat_interval=opts.heartbeat_interval_s,
                    grace_period=opts.grace_period_s,
                    heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(
                        max_retry=opts.failed_trial_retries
                    ),
                )
            storage = _open_rdb(with_driver(url), kwargs, opts.retry_s)
        if scheme == "sqlite" and opts.sqlite_wal:
            _sqlite_wal(storage)
        return enable_retries(storage, opts.retry_s, label, lambda t: scrub_secret(t, url))
    except ConfigError:
        raise
    except ImportError as exc:
        missing = exc.name or getattr(exc.__cause__, "name", None) or "see the URL's +driver"
        raise ConfigError(f"needs a database driver that is not installed: {missing}", key="storage", value=redact_url(url)) from None
    except Exception as exc:  # noqa: BLE001 - any connection problem is a user-facing storage error
        raise ConfigError(
            f"could not be opened: {scrub_secret(redact_url(str(exc)), url).splitlines()[0][:200]}", key="storage",
            value=redact_url(url),
        ) from None


def require_existing(url: str, *, key: str = "--storage") -> None:
    """Refuse a storage that does not exist yet, without creating it (read-only commands: ``report``, ``recover``).

    A missing SQLite or journal file, or a database server without Optuna's tables, is a :class:`ConfigError`
    (opening it with Optuna would create an empty storage). Redis is not checked: reading creates nothing there.
    """
    check_url(url, key=key)
    scheme = _scheme(url)
    shown = redact_url(url)
    if scheme == "journal" or (scheme == "sqlite" and ":///" in url):
        path = url.split("://", 1)[1] if scheme == "journal" else url.split(":///", 1)[1].split("?", 1)[0]
        if path and path != ":memory:" and not Path(path).is_file():
            raise ConfigError("does not exist (no such file; read-only commands never create a storage)",
                              file="<cli>", key=key, value=shown)
        return
    if not is_rdb_url(url):
        return
    import sqlalchemy

    try:
        engine = sqlalchemy.create_engine(with_driver(url), pool_pre_ping=True)
        try:
            has = sqlalchemy.inspect(engine).has_table("studies")
        finally:
            engine.dispose()
    except ImportError as exc:
        raise ConfigError(f"needs a database driver that is not installed: {exc.name}", file="<cli>", key=key,
                          value=shown) from None
    except Exception as exc:  # noqa: BLE001 - a connection problem is a user-facing storage error
        raise ConfigError(f"could not be opened: {scrub_secret(redact_url(str(exc)), url).splitlines()[0][:200]}",
                          file="<cli>", key=key, value=shown) from None
    if not has:
        raise ConfigError("holds no Optuna storage (no 'studies' table; read-only commands never create one)",
                          file="<cli>", key=key, value=shown)
