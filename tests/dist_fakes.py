"""Evaluator and helpers for the distributed / fault-tolerance tests (tiny, CPU-light, observable).

``make(spec)`` builds :class:`dse_fakes.FakeEvaluator` (closed form, deterministic) with two test hooks read
from the environment of the worker process:

* ``HYDRA_OPT_TEST_SIM_S``: seconds each simulation sleeps (a "slowed simulation");
* ``HYDRA_OPT_TEST_HANG_DIR``: when set, the first simulation of the first process to claim ``<dir>/claimed``
  writes ``<dir>/<pid>.hang`` (so a test knows that worker is inside a simulation) and then sleeps for 10 minutes,
  to be killed or interrupted there; with ``HYDRA_OPT_TEST_HANG_AFTER=N`` that process first completes N
  simulations;
* ``HYDRA_OPT_TEST_SIM_LOG``: a file to which every simulation appends ``<pid> <design_key>`` when it starts (one
  ``O_APPEND`` write, so concurrent workers' lines never interleave).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from dse_fakes import FakeEvaluator

PG_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
MARIADB_URL = "mysql+pymysql://root@127.0.0.1:3306/test"
REDIS_URL = "redis://127.0.0.1:6379/15"


class SlowFakeEvaluator(FakeEvaluator):
    def __init__(self, spec: Any = None) -> None:
        super().__init__(spec)
        self.sim_delay_s = float(os.environ.get("HYDRA_OPT_TEST_SIM_S", "0"))
        self.hang_dir = os.environ.get("HYDRA_OPT_TEST_HANG_DIR")
        self.hang_after = int(os.environ.get("HYDRA_OPT_TEST_HANG_AFTER", "0"))
        self.sim_log = os.environ.get("HYDRA_OPT_TEST_SIM_LOG")

    def simulate(self, design: Any, model: Any, workload: Any, *, seed: int) -> Any:
        if self.sim_log:
            from hydra_opt.dse.search_space import design_key

            fd = os.open(self.sim_log, os.O_CREAT | os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, f"{os.getpid()} {design_key(design)}\n".encode())
            finally:
                os.close(fd)
        if self.hang_dir and self.n_simulated >= self.hang_after:
            d, self.hang_dir = self.hang_dir, None
            try:  # only the first process to get here hangs (the others keep working)
                os.close(os.open(Path(d, "claimed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return super().simulate(design, model, workload, seed=seed)
            Path(d, f"{os.getpid()}.hang").write_text(str(design))
            time.sleep(600)
        return super().simulate(design, model, workload, seed=seed)


def make(spec: Any) -> SlowFakeEvaluator:
    return SlowFakeEvaluator(spec)


def unique_name(prefix: str) -> str:
    """A study name no other test run uses (the servers are shared)."""
    return f"{prefix}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def server_reachable(url: str) -> str | None:
    """None if the database in ``url`` accepts a connection within a few seconds, else the reason."""
    host, port = "127.0.0.1", {"postgresql": 5432, "mysql": 3306, "redis": 6379}[url.split("+")[0].split(":")[0]]
    try:
        socket.create_connection((host, port), timeout=2).close()
        if url.startswith("postgresql"):
            import psycopg2

            psycopg2.connect(host=host, port=port, user="postgres", dbname="test", connect_timeout=3).close()
        elif url.startswith("mysql"):
            import pymysql

            pymysql.connect(host=host, port=port, user="root", password="", database="test", connect_timeout=3).close()
        else:
            import redis

            redis.Redis(host=host, port=port, socket_connect_timeout=3).ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "skip"
        return f"{url.split('://')[0]} server on {host}:{port} not usable: {type(exc).__name__}: {exc}"[:200]
    return None


def delete_study(url: str, name: str) -> None:
    import optuna

    from hydra_opt.dse.storages import StorageOptions, make_storage

    try:
        optuna.delete_study(study_name=name, storage=make_storage(url, StorageOptions(heartbeat_interval_s=0)))
    except Exception:  # noqa: BLE001 - already gone / never created
        pass
