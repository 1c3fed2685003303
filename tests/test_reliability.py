"""Issue 17 ("nothing lost, nothing mixed, nothing hangs"): regression tests of D1, D3, D5, D9, D10.

* D1 — a journal file whose last record was torn by a crash is repaired on open (at *every* byte offset of the
  last record): the torn bytes are cut, a backup is kept, and the study resumes and stays readable;
* D3/D9 — the study fingerprint covers the content of the workload (not its path), the pruner and the run
  settings: a resume after editing any of them is refused with one line instead of mixing trials;
* D5 — a YAML alias bomb is refused quickly, in bounded memory, by ``run`` and ``validate``;
* D10 — ``(N this run)`` counts this launcher's trials; the artifact folder follows ``--study-name``; a Redis
  open prints no ExperimentalWarning; ``simulate.seed: 'abc'`` is a bad value of a known key.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import optuna
import pytest
import yaml
from dist_fakes import REDIS_URL, delete_study, server_reachable, unique_name
from optuna.trial import TrialState
from test_distributed_workers import cli_env, load, run_cli, write_study

from hydra_opt.cli.main import main


def _journal_with_trials(tmp_path: Path, n: int = 3) -> Path:
    log = tmp_path / "j.log"
    study = write_study(tmp_path, n_trials=n, pruner="none")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["run", str(study), "--storage", f"journal:///{log}", "--quiet"]) == 0
    return log


def test_torn_last_journal_record_is_cut_at_every_byte_offset(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """D1: for every cut inside the last record, opening cuts the torn tail (backup kept) and the study stays
    readable and writable; before the fix the next append landed after the torn bytes and broke every open."""
    from hydra_opt.dse.storages import make_storage

    log = _journal_with_trials(tmp_path)
    capsys.readouterr()
    data = log.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1  # the last record is data[start:]
    work = tmp_path / "cut"
    work.mkdir()
    for k in range(1, len(data) - start):  # keep data[:start + k]: k bytes of the last record, no end of line
        for old in work.iterdir():
            old.unlink()
        path = work / "j.log"
        path.write_bytes(data[: start + k])
        storage = make_storage(f"journal:///{path}")
        assert path.read_bytes() == data[:start], k  # cut back to the last complete record
        backups = list(work.glob("j.log.torn-*.bak"))
        assert len(backups) == 1 and backups[0].read_bytes() == data[: start + k]
        study = optuna.load_study(study_name="dist", storage=storage)
        n = len(study.trials)
        study.tell(study.ask(), [1.0, 1.0])  # an append after the repair ...
        again = optuna.load_study(study_name="dist", storage=make_storage(f"journal:///{path}"))
        assert len(again.trials) == n + 1  # ... is readable by the next open
    err = capsys.readouterr().err
    assert err.count("hydra_opt: warning: journal") == len(data) - start - 1
    assert make_storage(f"journal:///{log}") is not None and not list(tmp_path.glob("j.log.torn-*"))  # intact


def test_resume_and_recover_after_a_torn_journal(tmp_path: Path) -> None:
    """D1, the issue's reproduction: run 10 trials on a journal, cut its last 40 bytes, resume to 14; the resume
    exits 0 with exactly 14 finished trials and ``recover`` still opens the file."""
    log = tmp_path / "j.log"
    study = write_study(tmp_path, n_trials=10, pruner="none")
    url = f"journal:///{log}"
    assert run_cli(str(study), "--storage", url, "--quiet").returncode == 0
    log.write_bytes(log.read_bytes()[:-40])
    res = run_cli(str(study), "--storage", url, "--quiet", "--n-trials", "14", "--heartbeat-interval", "1",
                  "--grace-period", "3")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "last record was torn" in res.stderr
    trials = load(url, "dist")
    assert sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials) == 14
    rec = subprocess.run([sys.executable, "-m", "hydra_opt", "recover", "--storage", url], env=cli_env(),
                         text=True, capture_output=True, timeout=120)
    assert rec.returncode == 0 and "Traceback" not in rec.stderr, rec.stderr


def _edited_rerun(tmp_path: Path, edit: dict, *, workload_edit: str | None = None) -> subprocess.CompletedProcess:
    wl = tmp_path / "wl.yaml"
    wl.write_text("name: w\nlengths: {profile: chat}\narrival: {process: poisson, rate_per_s: 2}\nn_requests: 8\n")
    url = f"sqlite:///{tmp_path / 'f.db'}"
    base = {"workload": str(wl), "evaluator": "dse_fakes:make_loading"}
    first = write_study(tmp_path, n_trials=2, pruner="none", **base)
    assert run_cli(str(first), "--storage", url, "--quiet").returncode == 0
    if workload_edit is not None:
        wl.write_text(workload_edit)
    second = write_study(tmp_path, name="dist2", n_trials=4, **{"pruner": "none", **base, **edit})
    return run_cli(str(second), "--storage", url, "--study-name", "dist", "--quiet")


@pytest.mark.parametrize(("case", "edit", "workload"), [
    ("workload content", {}, "name: w\nlengths: {profile: chat}\narrival: {process: poisson, rate_per_s: 20}\n"
                             "n_requests: 80\n"),
    ("pruner", {"pruner": {"rule": "rank", "k_ranks": 3}}, None),
    ("simulate settings", {"simulate": {"seed": 7}}, None),
])
def test_resume_after_an_edit_is_refused(case: str, edit: dict, workload: str | None, tmp_path: Path) -> None:
    """D3 (same path, new content), D9 (pruner) and the run settings are part of the fingerprint."""
    res = _edited_rerun(tmp_path, edit, workload_edit=workload)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "different search space" in lines[0], (case, res.stderr)


def test_resume_with_the_same_inputs_is_accepted(tmp_path: Path) -> None:
    """The control of the test above: nothing edited, the resume runs (the fingerprint is stable)."""
    res = _edited_rerun(tmp_path, {})
    assert res.returncode == 0, res.stderr[-2000:]


def test_content_digest_ignores_paths_but_not_bytes(tmp_path: Path) -> None:
    from hydra_opt.dse.spec import content_digest
    from hydra_opt.workload.workload import load_workload

    trace = "num_prefill_tokens,num_decode_tokens\n12,4\n13,5\n"
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "t.csv").write_text(trace)
        (tmp_path / sub / "w.yaml").write_text("name: w\nlengths: {trace: t.csv}\narrival: {process: poisson, "
                                               "rate_per_s: 1}\nn_requests: 2\n")
    a, b = (content_digest(load_workload(str(tmp_path / s / "w.yaml"))) for s in ("a", "b"))
    assert a == b  # moved file, same content
    (tmp_path / "b" / "t.csv").write_text(trace.replace("13,5", "13,6"))
    assert content_digest(load_workload(str(tmp_path / "b" / "w.yaml"))) != a  # one token changed


BOMB = Path(__file__).resolve().parent / "fixtures" / "hostile" / "alias_bomb_description.yaml"


@pytest.mark.parametrize("command", ["run", "validate"])
def test_alias_bomb_is_refused_fast_in_bounded_memory(command: str, tmp_path: Path) -> None:
    """D5: 9 levels x 10 aliases (10^9 values) under ``description:``; before the fix 700 MB in 12 s, then hung."""
    shutil.copy(BOMB, tmp_path / BOMB.name)
    args = [str(tmp_path / BOMB.name)] + (["--storage", f"sqlite:///{tmp_path / 'x.db'}"] if command == "run" else [])
    cmd = f"ulimit -v 1500000; exec {sys.executable} -m hydra_opt {command} " + " ".join(args)
    t0 = time.monotonic()
    res = subprocess.run(["bash", "-c", cmd], env=cli_env(), text=True, capture_output=True, timeout=60)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "expands to more than" in lines[0], res.stderr[-2000:]
    assert time.monotonic() - t0 < 30 and not (tmp_path / "x.db").exists()


def test_this_run_counts_only_this_launchers_trials(tmp_path: Path) -> None:
    """D10: three launchers on one study; each reports the trials its own process finished (they add up to the
    budget) instead of the whole study's progress."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    study = write_study(tmp_path, n_trials=12, pruner="none")
    cmd = [sys.executable, "-m", "hydra_opt.run", str(study), "--storage", url, "--quiet"]
    env = cli_env(HYDRA_OPT_TEST_SIM_S="0.3")
    procs = [subprocess.Popen([*cmd, "--worker-index", str(i)], env=env, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for i in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    counts = []
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        counts.append(int(re.search(r"\((\d+) this run\)", out).group(1)))
    assert sum(counts) == 12, counts


def test_artifact_folder_follows_the_study_name(tmp_path: Path) -> None:
    """D10: two studies from one file (``--study-name``) write into two folders, not into the YAML name's."""
    spec = write_study(tmp_path, n_trials=1, pruner="none")
    doc = yaml.safe_load(spec.read_text())
    doc.pop("artifacts")
    spec.write_text(yaml.safe_dump(doc))
    for name in ("alpha", "beta"):
        res = run_cli(str(spec), "--storage", f"sqlite:///{tmp_path / 'a.db'}", "--study-name", name, "--quiet")
        assert res.returncode == 0, res.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "artifacts").iterdir()) == ["alpha", "beta"]


@pytest.mark.db
def test_redis_open_prints_no_experimental_warning(tmp_path: Path) -> None:
    """D10: the storage filters Optuna's ExperimentalWarning where it builds the Redis backend."""
    reason = server_reachable(REDIS_URL)
    if reason:
        pytest.skip(reason)
    name = unique_name("t17warn")
    try:
        res = run_cli(str(write_study(tmp_path, n_trials=1, pruner="none")), "--storage", REDIS_URL,
                      "--study-name", name, "--quiet")
        assert res.returncode == 0 and "Warning" not in res.stderr, res.stderr
    finally:
        delete_study(REDIS_URL, name)


def test_simulate_seed_string_is_a_bad_value_of_a_known_key(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """D10: ``simulate.seed: 'abc'`` used to be reported as an unknown option."""
    spec = write_study(tmp_path, n_trials=1, pruner="none", simulate={"seed": "abc"})
    assert main(["run", str(spec), "--storage", f"sqlite:///{tmp_path / 's.db'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "simulate.seed: 'abc' is not an integer" in err and "not a known" not in err
    assert not (tmp_path / "s.db").exists()
