"""Fault tolerance on real storages: a worker SIGKILLed inside a (deliberately hanging) simulation leaves a trial
that is failed and retried with the same design, and the study still ends with exactly its budget; Ctrl-C stops
cleanly and a re-run resumes; journal storages (file, Redis) recover dead trials by heartbeat or by
``python -m hydra_opt recover``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import optuna
import pytest
import yaml
from dist_fakes import PG_URL, REDIS_URL, delete_study, server_reachable, unique_name
from optuna.trial import TrialState
from test_distributed_workers import FINISHED, cli_env, load, run_cli, write_study

FAST_HEARTBEAT = ("--heartbeat-interval", "1", "--grace-period", "3")


def retried_number(t: optuna.trial.FrozenTrial) -> int | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return optuna.storages.RetryHeartbeatStaleTrialCallback.retried_trial_number(t)


def start_hanging(args: list[str], hang_dir: Path, sigint: object = signal.SIG_DFL) -> subprocess.Popen[str]:
    """Start the run CLI whose first simulation hangs; return once a worker is inside that simulation.

    The child starts with SIGINT set to ``sigint``: SIG_DFL by default, so the tests work when pytest itself runs
    in the background (a shell starts background jobs with SIGINT ignored, and children inherit that)."""
    hang_dir.mkdir(exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "hydra_opt.run", *args], env=cli_env(HYDRA_OPT_TEST_HANG_DIR=str(hang_dir)),
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
    deadline = time.monotonic() + 120
    while not list(hang_dir.glob("*.hang")):
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate(timeout=10) if proc.poll() is not None else ("", "")
            proc.kill()
            pytest.fail(f"worker never reached the simulation: rc={proc.returncode} {err[-1500:]}")
        time.sleep(0.1)
    return proc


def hung_pid(hang_dir: Path) -> int:
    return int(next(hang_dir.glob("*.hang")).stem)


@pytest.fixture(params=["sqlite", "postgresql"])
def rdb(request: pytest.FixtureRequest, tmp_path: Path):
    name = unique_name("t7kill")
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'kill.db'}", name
        return
    reason = server_reachable(PG_URL)
    if reason:
        pytest.skip(reason)
    yield PG_URL, name
    delete_study(PG_URL, name)


def assert_killed_trial_retried(trials: list[optuna.trial.FrozenTrial], budget: int) -> None:
    assert sum(t.state in FINISHED for t in trials) == budget
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    killed = [t for t in trials if t.state == TrialState.FAIL and not t.user_attrs.get("budget_overflow")]
    assert len(killed) == 1, [(t.number, t.state.name) for t in trials]
    retries = [t for t in trials if retried_number(t) == killed[0].number]
    assert len(retries) == 1 and retries[0].state in FINISHED
    assert retries[0].params == killed[0].params  # the same design, run again


@pytest.mark.db
@pytest.mark.slow
def test_sigkill_mid_simulation_then_restart_finishes_exact_budget(rdb: tuple[str, str], tmp_path: Path) -> None:
    url, name = rdb
    study = write_study(tmp_path, n_trials=6, pruner="none")  # every trial simulates; the first one hangs
    args = [str(study), "--storage", url, "--study-name", name, "--quiet", *FAST_HEARTBEAT]
    proc = start_hanging(args, tmp_path / "hang")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    running = [t for t in load(url, name) if t.state == TrialState.RUNNING]
    assert len(running) == 1  # the killed worker's trial, left behind

    res = run_cli(*args)  # restart: the dead trial is failed by heartbeat and retried with its design
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert_killed_trial_retried(load(url, name), 6)
    assert [t for t in load(url, name) if t.number == running[0].number][0].state == TrialState.FAIL


@pytest.mark.slow
def test_surviving_worker_recovers_a_killed_one(tmp_path: Path) -> None:
    """Two local workers; one is SIGKILLed mid-simulation; the other finishes the exact budget without restart."""
    url, name = f"sqlite:///{tmp_path / 'two.db'}", "two"
    args = [str(write_study(tmp_path, n_trials=8, pruner="none")), "--storage", url, "--study-name", name,
            "--workers", "2", "--quiet", *FAST_HEARTBEAT]
    hang = tmp_path / "hang"
    proc = start_hanging(args, hang)
    os.kill(hung_pid(hang), signal.SIGKILL)  # one worker process, not the launcher
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0 and "Traceback" not in err, err[-2000:]
    assert_killed_trial_retried(load(url, name), 8)


@pytest.mark.parametrize("workers,inherited", [("1", signal.SIG_DFL), ("2", signal.SIG_DFL), ("1", signal.SIG_IGN),
                                               ("2", signal.SIG_IGN)], ids=["1", "2", "1-ignored", "2-ignored"])
def test_sigint_stops_cleanly_and_a_rerun_resumes(tmp_path: Path, workers: str, inherited: object) -> None:
    """Also when the CLI inherits SIGINT ignored (started from a background job): it restores the default."""
    url = f"sqlite:///{tmp_path / 'int.db'}"
    args = [str(write_study(tmp_path, n_trials=5, pruner="none")), "--storage", url, "--quiet", "--workers", workers]
    proc = start_hanging(args, tmp_path / "hang", sigint=inherited)
    proc.send_signal(signal.SIGINT)  # to the launching process only (a terminal's Ctrl-C reaches all of them)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the CLI ignored SIGINT")
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "hydra_opt: interrupted", err[-2000:]
    trials = load(url, "dist")
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]  # nothing half-written
    assert [t for t in trials if t.state == TrialState.FAIL]  # the interrupted trial is failed, not left running
    res = run_cli(*args[:-1], "1")  # resume with one worker
    assert res.returncode == 0, res.stderr[-2000:]
    assert sum(t.state in FINISHED for t in load(url, "dist")) == 5


def _journal_with_a_killed_worker(tmp_path: Path) -> tuple[str, str, list[str]]:
    """(url, study name, run arguments) of a journal study whose only worker was SIGKILLed mid-simulation; its
    heartbeats are 10 minutes apart, so only a pid check can tell at once that the trial is dead."""
    url, name = f"journal:///{tmp_path / 'study.log'}", "jf"
    args = [str(write_study(tmp_path, n_trials=4, pruner="none")), "--storage", url, "--study-name", name,
            "--quiet", "--heartbeat-interval", "600", "--grace-period", "3600"]
    proc = start_hanging(args, tmp_path / "hang")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    return url, name, args


def test_journal_file_recover_command(tmp_path: Path) -> None:
    """Journal file, no worker running: ``recover`` fails the dead trial and requeues it; the next run runs it."""
    url, name, args = _journal_with_a_killed_worker(tmp_path)
    dead = [t for t in load(url, name) if t.state == TrialState.RUNNING]
    assert len(dead) == 1

    rec = subprocess.run([sys.executable, "-m", "hydra_opt", "recover", "--storage", url, "--study-name", name,
                          "--older-than", "0"], env=cli_env(), text=True, capture_output=True, timeout=120)
    assert rec.returncode == 0, rec.stderr
    assert f"trial {dead[0].number}: RUNNING -> FAIL" in rec.stdout and "retry queued" in rec.stdout
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr[-2000:]
    assert_killed_trial_retried(load(url, name), 4)


def test_dead_local_worker_is_recovered_without_waiting_for_heartbeats(tmp_path: Path) -> None:
    """Issue 17 D6: a killed worker of this host is provably dead (its pid is gone): the next run fails and
    retries its trial at once, even with heartbeats far apart, instead of leaving it RUNNING."""
    url, name, args = _journal_with_a_killed_worker(tmp_path)
    t0 = time.monotonic()
    res = run_cli(*args)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert time.monotonic() - t0 < 120  # not the 3600 s grace period
    assert_killed_trial_retried(load(url, name), 4)


def test_heartbeat_interval_zero_is_refused(tmp_path: Path) -> None:
    """Issue 17 D6: ``--heartbeat-interval 0`` would make a dead worker undetectable: refused, nothing created."""
    db = tmp_path / "hb0.db"
    res = run_cli(str(write_study(tmp_path, n_trials=2, pruner="none")), "--storage", f"sqlite:///{db}",
                  "--heartbeat-interval", "0")
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "--heartbeat-interval" in lines[0], res.stderr
    assert not db.exists()


@pytest.mark.db
def test_redis_journal_recovers_by_heartbeat(tmp_path: Path) -> None:
    reason = server_reachable(REDIS_URL)
    if reason:
        pytest.skip(reason)
    name = unique_name("t7redis")
    args = [str(write_study(tmp_path, n_trials=4, pruner="none")), "--storage", REDIS_URL, "--study-name", name,
            "--quiet", *FAST_HEARTBEAT]
    try:
        proc = start_hanging(args, tmp_path / "hang")
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        res = run_cli(*args)
        assert res.returncode == 0, res.stderr[-2000:]
        assert_killed_trial_retried(load(REDIS_URL, name), 4)
    finally:
        delete_study(REDIS_URL, name)


def _journal_study(tmp_path: Path) -> optuna.Study:
    from hydra_opt.dse.storages import make_storage

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return optuna.create_study(storage=make_storage(f"journal:///{tmp_path / 'unit.log'}"), study_name="unit")


def test_recover_fails_only_silent_trials_and_queues_same_params(tmp_path: Path) -> None:
    from hydra_opt.dse.fault import HEARTBEAT_ATTR, recover_stale_trials

    study = _journal_study(tmp_path)
    dead, alive = study.ask(), study.ask()
    for t, x in ((dead, 1), (alive, 2)):
        study._storage.set_trial_param(t._trial_id, "x", float(x), optuna.distributions.IntDistribution(0, 10))
    now = time.time() + 1000  # both started ~1000 s before "now"; one kept beating, the other fell silent
    study._storage.set_trial_system_attr(dead._trial_id, HEARTBEAT_ATTR, now - 500)
    study._storage.set_trial_system_attr(alive._trial_id, HEARTBEAT_ATTR, now - 5)
    got = recover_stale_trials(study, 60.0, now_s=now)
    assert [r.number for r in got] == [dead.number] and got[0].idle_s == pytest.approx(500, abs=1)
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    assert trials[dead.number].state == TrialState.FAIL and trials[alive.number].state == TrialState.RUNNING
    retry = trials[got[0].retry_number]
    assert retry.state == TrialState.WAITING and retry.params == {"x": 1} and retried_number(retry) == dead.number
    assert recover_stale_trials(study, 60.0, now_s=now) == []  # idempotent


def test_optimize_until_budget_waits_for_a_dead_trial_and_runs_its_retry(tmp_path: Path) -> None:
    from hydra_opt.dse.fault import HEARTBEAT_ATTR, optimize_until_budget

    study = _journal_study(tmp_path)
    zombie = study.ask({"x": optuna.distributions.IntDistribution(0, 10)})  # a worker that died mid-trial
    now = [time.time()]
    study._storage.set_trial_system_attr(zombie._trial_id, HEARTBEAT_ATTR, now[0])

    def stop_at_budget(s: optuna.Study, _t: object) -> None:
        live = (*FINISHED, TrialState.RUNNING, TrialState.WAITING)
        if len(s.get_trials(deepcopy=False, states=live)) >= 3:
            s.stop()

    sleeps: list[float] = []
    rounds = optimize_until_budget(
        study,
        lambda left: study.optimize(lambda t: float(t.suggest_int("x", 0, 10)), callbacks=[stop_at_budget]),
        budget=3, timeout_s=60, poll_s=7.0, journal_grace_s=30.0,
        sleep=lambda s: (sleeps.append(s), now.__setitem__(0, now[0] + 20.0)),  # 20 s pass per poll
        clock=lambda: now[0],
    )
    trials = study.get_trials(deepcopy=False)
    assert sum(t.state in FINISHED for t in trials) == 3 and rounds == 2 and sleeps == [7.0, 7.0]  # 40 s > 30 s
    assert trials[zombie.number].state == TrialState.FAIL
    retry = [t for t in trials if retried_number(t) == zombie.number]
    assert len(retry) == 1 and retry[0].state == TrialState.COMPLETE and retry[0].params == trials[zombie.number].params


def test_optimize_until_budget_does_not_wait_without_heartbeat(tmp_path: Path) -> None:
    from hydra_opt.dse.fault import optimize_until_budget

    study = _journal_study(tmp_path)
    study.ask()  # RUNNING forever; without a heartbeat nobody can tell it is dead
    calls: list[float | None] = []
    rounds = optimize_until_budget(study, lambda left: calls.append(left), budget=1, timeout_s=None,
                                   journal_grace_s=0.0, sleep=lambda s: pytest.fail("must not wait"))
    assert rounds == 0 and calls == []  # finished + running already fill the budget: no overflow trial either


# -- issue 17: outages, creation, the budget's end -------------------------------------------------------------
def _pg_or_skip() -> None:
    reason = server_reachable(PG_URL)
    if reason:
        pytest.skip(reason)


def _wait_for_trials(url: str, name: str, n: int, timeout_s: float = 120) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            if len(load(url, name)) >= n:
                return
        except KeyError:
            pass
        time.sleep(0.3)
    pytest.fail(f"no {n} trials after {timeout_s} s")


@contextlib.contextmanager
def _pg_behind_proxy(prefix: str):
    """(proxy, URL through it, unique study name) for PostgreSQL behind a local TCP proxy; the study is deleted."""
    from tcp_proxy import TcpProxy

    _pg_or_skip()
    name = unique_name(prefix)
    try:
        with TcpProxy(("127.0.0.1", 5432)) as proxy:
            yield proxy, PG_URL.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}"), name
    finally:
        delete_study(PG_URL, name)


def _slow_launchers(study: Path, url: str, name: str, n: int, *extra: str) -> list[subprocess.Popen[str]]:
    """``n`` launchers of ``study`` on ``url`` whose simulations take 0.4 s (so an outage meets running trials)."""
    cmd = [sys.executable, "-m", "hydra_opt.run", str(study), "--storage", url, "--study-name", name, "--quiet", *extra]
    return [subprocess.Popen([*cmd, "--worker-index", str(i)], env=cli_env(HYDRA_OPT_TEST_SIM_S="0.4"), text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(n)]


@pytest.mark.db
@pytest.mark.slow
def test_database_outage_through_a_tcp_proxy_is_ridden_out(tmp_path: Path) -> None:
    """Issue 17 D4: PostgreSQL unreachable for 8 s (a proxy in front of it stopped) while two workers run: both
    exit 0 without a traceback, and the study ends with exactly its budget and no trial left RUNNING."""
    study = write_study(tmp_path, n_trials=14, pruner="none")
    with _pg_behind_proxy("t17outage") as (proxy, url, name):
        procs = _slow_launchers(study, url, name, 2, "--heartbeat-interval", "2", "--grace-period", "30")
        _wait_for_trials(PG_URL, name, 3)
        proxy.down()
        time.sleep(8)
        proxy.up()
        outs = [p.communicate(timeout=240) for p in procs]
        for p, (_out, err) in zip(procs, outs):
            assert p.returncode == 0 and "Traceback" not in err, err[-3000:]
        trials = load(PG_URL, name)
        assert sum(t.state in FINISHED for t in trials) == 14
        assert not [t for t in trials if t.state == TrialState.RUNNING]


@pytest.mark.db
def test_outage_longer_than_the_retry_bound_stops_with_one_line(tmp_path: Path) -> None:
    """Issue 17 D4: past ``--storage-retry`` the worker stops with one ``hydra_opt: error:`` line naming the
    storage (exit 3), not Optuna's chained tracebacks."""
    study = write_study(tmp_path, n_trials=40, pruner="none")
    with _pg_behind_proxy("t17bound") as (proxy, url, name):
        proc = _slow_launchers(study, url, name, 1, "--storage-retry", "3")[0]
        _wait_for_trials(PG_URL, name, 2)
        proxy.down()
        t0 = time.monotonic()
        _out, err = proc.communicate(timeout=120)
        elapsed = time.monotonic() - t0
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        assert proc.returncode == 3 and "Traceback" not in err, err[-3000:]
        assert len(lines) == 1 and lines[0].startswith("hydra_opt: error: storage ") and "unreachable" in lines[0]
        assert elapsed < 60  # 3 s of retries (+ the heartbeat thread's wait), not a hang


def test_interrupted_creation_cannot_leave_a_study_without_fingerprint(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 17 D2: a kill between creating the study and writing its fingerprint (simulated by interrupting the
    first attribute write) must not leave a study that a later run with another search space resumes."""
    from hydra_opt.dse.spec import load_study_spec
    from hydra_opt.dse.runner import open_study

    url = f"sqlite:///{tmp_path / 'c.db'}"
    spec = load_study_spec(write_study(tmp_path, n_trials=2, pruner="none"))
    from dataclasses import replace

    spec = replace(spec, storage=url)

    def killed(*_a: object, **_k: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(optuna.storages.RDBStorage, "set_study_user_attr", killed)
        m.setattr(optuna.storages.RDBStorage, "set_study_system_attr", killed)
        try:
            open_study(spec)
        except KeyboardInterrupt:
            pass
    other = write_study(tmp_path, name="dist2", n_trials=4, pruner="none",
                        search_space={**yaml.safe_load(Path(spec.file).read_text())["search_space"],
                                      "max_batch": [64, 128]})
    res = run_cli(str(other), "--storage", url, "--study-name", spec.name, "--quiet")
    lines = res.stderr.strip().splitlines()
    assert res.returncode in (0, 2) and "Traceback" not in res.stderr, res.stderr[-2000:]
    if res.returncode == 0:  # the creation was atomic: the study is the first file's, and resuming it is refused
        pytest.fail(f"a study with another search space was resumed: {res.stdout[-500:]}")
    assert len(lines) == 1 and "different search space" in lines[0], lines


def test_study_without_fingerprint_is_refused_unless_adopted(tmp_path: Path) -> None:
    """Issue 17 D2: a study created outside hydra_opt (same state as a creation killed half-way on a journal) is
    unknown: refused with one line; ``--adopt`` claims it, after which another search space is refused."""
    url = f"sqlite:///{tmp_path / 'u.db'}"
    optuna.create_study(storage=url, study_name="dist", directions=["maximize", "minimize"])
    study = write_study(tmp_path, n_trials=2, pruner="none")
    res = run_cli(str(study), "--storage", url, "--quiet")
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "without a hydra_opt fingerprint" in lines[0], res.stderr
    assert load(url, "dist") == []  # nothing written
    res = run_cli(str(study), "--storage", url, "--quiet", "--adopt")
    assert res.returncode == 0, res.stderr[-2000:]
    other = write_study(tmp_path, name="dist2", n_trials=4, pruner="none",
                        search_space={**yaml.safe_load(study.read_text())["search_space"], "max_batch": [64, 128]})
    res = run_cli(str(other), "--storage", url, "--study-name", "dist", "--quiet")
    assert res.returncode == 2 and "different search space" in res.stderr, res.stderr


@pytest.mark.slow
def test_kill_at_the_end_of_the_budget_with_default_heartbeats(tmp_path: Path) -> None:
    """Issue 17 D6: two local workers with the default heartbeat (30 s, grace 120 s); the one holding the last
    trial is SIGKILLed. The survivor fails and retries it at once (its pid is gone) and exits 0 with exactly the
    budget finished and nothing RUNNING — not after the grace period, and not leaving the trial behind."""
    url, name = f"sqlite:///{tmp_path / 'end.db'}", "dist"
    args = [str(write_study(tmp_path, n_trials=4, pruner="none")), "--storage", url, "--workers", "2", "--quiet"]
    hang = tmp_path / "hang"
    proc = start_hanging(args, hang)
    os.kill(hung_pid(hang), signal.SIGKILL)
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "Traceback" not in err, err[-2000:]
    assert time.monotonic() - t0 < 100  # well before the 120 s grace period
    assert_killed_trial_retried(load(url, name), 4)


def test_timeout_before_the_grace_period_warns_about_a_running_trial(tmp_path: Path) -> None:
    """Issue 17 D6: a worker on another host died holding a trial; this run's timeout comes before the grace
    period. It must not exit 0 silently: one warning line names the trial still RUNNING."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    study = write_study(tmp_path, n_trials=3, pruner="none")
    assert run_cli(str(study), "--storage", url, "--quiet", "--n-trials", "2").returncode == 0
    from hydra_opt.dse.fault import WORKER_ATTR

    s = optuna.load_study(study_name="dist", storage=url)
    ghost = s.ask()
    s._storage.set_trial_system_attr(ghost._trial_id, WORKER_ATTR, "another-host:4242")
    res = run_cli(str(study), "--storage", url, "--quiet", "--timeout", "4")
    assert res.returncode == 0, res.stderr[-2000:]
    warn = [ln for ln in res.stderr.splitlines() if ln.startswith("hydra_opt: warning:")]
    assert len(warn) == 1 and "still RUNNING" in warn[0] and f"{ghost.number} (another-host:4242" in warn[0], res.stderr
