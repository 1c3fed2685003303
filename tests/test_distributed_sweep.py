"""Exhaustive sweeps as Optuna studies on a shared storage (``exhaustive:`` in a study file, ``dse/sweep.py``).

Two ``run`` processes with the same command and storage URL share one sweep; every design is simulated exactly once
(counted from a log every simulation appends to, not from the storage); a worker SIGKILLed inside a simulation
leaves a trial that the heartbeat fails and Optuna's retry callback queues again, with the same design; re-running
the command resumes (here: finds nothing left) and the table is read back from the storage.
"""

from __future__ import annotations

import collections
import math
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import optuna
import pandas as pd
import pytest
import yaml
from dist_fakes import PG_URL, delete_study, server_reachable, unique_name
from dse_fakes import closed_form, wiggle
from optuna.trial import TrialState
from test_distributed_workers import cli_env, load, run_cli

from hydra_opt.config import ConfigError, Node
from hydra_opt.dse.fault import WORKER_ATTR
from hydra_opt.dse.search_space import design_key
from hydra_opt.dse.sweep import DUPLICATE_ATTR, SWEEP_ATTR, parse_sweep

#: 352 designs (22 compositions x 4 D2D bandwidths x 4 batch caps), 240 feasible for the fake (>= 3 memories).
SWEEP_SPACE = {
    "kind": "search_space", "name": "sweep", "slots": 10,
    "chiplets": {"tscs_p": {"min": 1, "max": 8}, "tscs_d": {"min": 1, "max": 8}},
    "memory": {"count": {"min": 2, "max": 5}},
    "d2d_bw_gbps": [256, 384, 512, 640], "max_batch": [4, 8, 16, 32],
}
FAST_HEARTBEAT = ("--heartbeat-interval", "1", "--grace-period", "3")


def write_sweep(tmp_path: Path, **exhaustive: object) -> Path:
    doc = {"kind": "study", "name": "sweep", "model": "llama-3-8b", "workload": "chat", "search_space": SWEEP_SPACE,
           "exhaustive": exhaustive or True, "artifacts": str(tmp_path / "art"), "evaluator": "dist_fakes:make"}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def feasible_keys() -> set[str]:
    from hydra_opt.dse.search_space import parse_search_space

    space = parse_search_space(Node(SWEEP_SPACE, file="sweep.yaml"))
    return {design_key(d) for d in space.enumerate() if d["n_mem"] >= 3}


def retried_number(t: optuna.trial.FrozenTrial) -> int | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return optuna.storages.RetryHeartbeatStaleTrialCallback.retried_trial_number(t)


@pytest.fixture
def pg():
    reason = server_reachable(PG_URL)
    if reason:
        pytest.skip(reason)
    name = unique_name("sweep")
    yield PG_URL, name
    delete_study(PG_URL, name)


@pytest.mark.db
def test_two_workers_sweep_every_design_once_and_retry_a_killed_one(pg: tuple[str, str], tmp_path: Path) -> None:
    url, name = pg
    study_file = write_sweep(tmp_path)
    log, hang = tmp_path / "sims.log", tmp_path / "hang"
    hang.mkdir()
    cmd = [sys.executable, "-m", "hydra_opt.run", str(study_file), "--storage", url, "--study-name", name, "--quiet",
           *FAST_HEARTBEAT]
    env = cli_env(HYDRA_OPT_TEST_SIM_LOG=str(log), HYDRA_OPT_TEST_HANG_DIR=str(hang), HYDRA_OPT_TEST_HANG_AFTER="20",
                  HYDRA_OPT_TEST_SIM_S="0.01")
    t0 = time.monotonic()
    procs = [subprocess.Popen(cmd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    try:
        deadline = time.monotonic() + 120
        while not list(hang.glob("*.hang")):  # one worker is inside its 21st simulation, which hangs
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "no worker reached the hang"
            time.sleep(0.05)
        killed = int(next(hang.glob("*.hang")).stem)
        os.kill(killed, signal.SIGKILL)
        victim = next(p for p in procs if p.pid == killed)
        victim.communicate(timeout=30)
        # The killed machine comes back with the same command and joins the survivor.
        procs = [p for p in procs if p is not victim]
        procs.append(subprocess.Popen(cmd, env=cli_env(HYDRA_OPT_TEST_SIM_LOG=str(log)), text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        for p in procs:
            _, err = p.communicate(timeout=300)
            assert p.returncode == 0 and "Traceback" not in err, err[-2000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    wall = time.monotonic() - t0

    want = feasible_keys()
    assert len(want) == 240
    trials = load(url, name)
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    # Exactly once: each design started one simulation, except the killed one (killed, then retried).
    lines = [ln.split() for ln in log.read_text().splitlines()]
    starts = collections.Counter(key for _, key in lines)
    assert set(starts) == want
    by_killed = [key for pid, key in lines if int(pid) == killed]
    assert len(by_killed) == 21  # 20 completed simulations, then the one it was killed in
    twice = {k for k, n in starts.items() if n > 1}
    assert twice == {by_killed[-1]} and starts[by_killed[-1]] == 2, starts.most_common(3)

    # The storage agrees: one simulated trial per design; the killed trial FAILed and its retry (same design) ran.
    sim_trials = [t for t in trials if "sim_wall_s" in t.user_attrs]
    assert sorted(t.user_attrs["design_key"] for t in sim_trials) == sorted(want)
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert len(failed) == 1 and failed[0].user_attrs["design_key"] == by_killed[-1]
    retry = [t for t in trials if retried_number(t) == failed[0].number]
    assert len(retry) == 1 and retry[0].state == TrialState.COMPLETE and retry[0].params == failed[0].params
    dups = [t for t in trials if DUPLICATE_ATTR in t.user_attrs]
    assert all(t.state == TrialState.PRUNED and "sim_wall_s" not in t.user_attrs for t in dups)
    assert len({t.system_attrs[WORKER_ATTR] for t in sim_trials}) >= 2  # both machines did work
    sweep_attr = optuna.load_study(study_name=name, storage=url).user_attrs[SWEEP_ATTR]
    assert sweep_attr["designs"] == 240 and sweep_attr["enqueued"]

    # The table, built from the storage: every design of the space, the 240 feasible ones with their simulation.
    table = pd.read_csv(tmp_path / "art" / "exhaustive.csv")
    assert len(table) == 352 and int(table["feasible"].sum()) == 240
    sim = table.dropna(subset=["sim_throughput_tok_s"])
    assert set(sim["design_key"]) == want
    for _, row in sim.head(20).iterrows():
        d = yaml.safe_load(row["design_json"])
        assert math.isclose(row["sim_throughput_tok_s"], closed_form(d)[0] * wiggle(d), rel_tol=1e-12)

    # Resume: the same command again finds the sweep complete and simulates nothing.
    n_lines = len(lines)
    res = run_cli(*cmd[3:], HYDRA_OPT_TEST_SIM_LOG=str(log))
    assert res.returncode == 0, res.stderr[-2000:]
    assert len(log.read_text().splitlines()) == n_lines
    print(f"sweep of 240 designs by 2 workers with one kill + restart: {wall:.1f} s wall")


def test_local_sweep_dedupes_a_design_enqueued_twice(tmp_path: Path) -> None:
    """Two workers that enqueue at the same moment may both enqueue a design; only the lowest-numbered live trial
    simulates it, the other ends PRUNED as a duplicate."""
    from dse_fakes import FakeEvaluator

    from hydra_opt.dse import sweep
    from hydra_opt.evaluate.objectives import DEFAULT_OBJECTIVES

    ev = FakeEvaluator()
    study = optuna.create_study(directions=DEFAULT_OBJECTIVES.directions)
    d = {"chiplets": {"tscs_d": 4, "tscs_p": 3}, "n_mem": 3, "max_batch": 8}
    row = ({}, sweep.row_attrs(d, {}))
    for _ in range(2):  # as two racing workers: both saw no live trial of the design
        study.enqueue_trial({}, user_attrs=dict(row[1]))
    assert sweep.enqueue_missing(study, [row]) == 0  # a third worker sees it live and skips it
    n = sweep.work(study, sweep.SweepObjective(ev, [("m", "w")], DEFAULT_OBJECTIVES, 0))
    assert n == 2 and ev.n_simulated == 1
    a, b = study.get_trials()
    assert a.state == TrialState.COMPLETE and b.state == TrialState.PRUNED and b.user_attrs[DUPLICATE_ATTR] == 0


def test_failed_designs_are_requeued_on_resume() -> None:
    """A design whose only trial FAILed (an interrupt, exhausted retries) is queued again; a live one is not."""
    from hydra_opt.dse import sweep

    study = optuna.create_study()
    d1 = {"chiplets": {"tscs_d": 4, "tscs_p": 3}, "n_mem": 3}
    d2 = {"chiplets": {"tscs_d": 3, "tscs_p": 4}, "n_mem": 3}
    for d in (d1, d2):
        study.enqueue_trial({}, user_attrs=sweep.row_attrs(d, {"throughput_tok_s": 1.0}))
    t = study.ask()
    study.tell(t, state=TrialState.FAIL)
    assert sweep.requeue_failed(study) == 1
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert sorted(w.user_attrs["design_key"] for w in waiting) == sorted([design_key(d1), design_key(d2)])
    assert sweep.requeue_failed(study) == 0


@pytest.mark.parametrize("doc, problem", [
    ({"simulate": "some"}, "must be 'all'"),
    ({"simulate": "front:0"}, "must be 'all'"),
    ({"simulate": 0}, ">= 1"),
    ({"simulate": True}, "must be 'all'"),
    ({"simulate": "all", "seed": 1}, "seed"),
])
def test_sweep_block_errors_are_located(doc: dict, problem: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_sweep(Node(doc, file="s.yaml", key="exhaustive"))
    assert problem in str(exc.value) and "s.yaml" in str(exc.value)


def test_sweep_study_rejects_search_keys(tmp_path: Path) -> None:
    from hydra_opt.dse.spec import load_study_spec

    path = write_sweep(tmp_path)
    doc = yaml.safe_load(path.read_text())
    for extra, key in (({"sampler": "tpe"}, "sampler"), ({"budget": {"n_trials": 5}}, "budget")):
        path.write_text(yaml.safe_dump({**doc, **extra}))
        with pytest.raises(ConfigError) as exc:
            load_study_spec(path)
        assert key in str(exc.value)
    path.write_text(yaml.safe_dump({**doc, "budget": {"timeout_s": 5}}))
    spec = load_study_spec(path)
    assert spec.exhaustive is not None and spec.n_trials is None and spec.space.encoding == "enumerated"
