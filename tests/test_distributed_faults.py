"""Fault tolerance on real storages: a worker SIGKILLed inside a (deliberately hanging) simulation leaves a trial
that is failed and retried with the same design, and the study still ends with exactly its budget; Ctrl-C stops
cleanly and a re-run resumes; journal storages (file, Redis) recover dead trials by heartbeat or by
``python -m hydra_opt recover``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import optuna
import pytest
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


def test_journal_file_recover_command(tmp_path: Path) -> None:
    """Journal file without heartbeat: the dead trial stays RUNNING until ``recover`` fails and requeues it."""
    url, name = f"journal:///{tmp_path / 'study.log'}", "jf"
    args = [str(write_study(tmp_path, n_trials=4, pruner="none")), "--storage", url, "--study-name", name,
            "--quiet", "--heartbeat-interval", "0"]
    proc = start_hanging(args, tmp_path / "hang")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr[-2000:]
    trials = load(url, name)
    assert sum(t.state in FINISHED for t in trials) == 3  # the 4th slot is held by the dead RUNNING trial
    dead = [t for t in trials if t.state == TrialState.RUNNING]
    assert len(dead) == 1

    rec = subprocess.run([sys.executable, "-m", "hydra_opt", "recover", "--storage", url, "--study-name", name,
                          "--older-than", "0"], env=cli_env(), text=True, capture_output=True, timeout=120)
    assert rec.returncode == 0, rec.stderr
    assert f"trial {dead[0].number}: RUNNING -> FAIL" in rec.stdout and "retry queued" in rec.stdout
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr[-2000:]
    assert_killed_trial_retried(load(url, name), 4)


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
