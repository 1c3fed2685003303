"""The scripts in ``examples/`` run (small budgets) and do what they print; none writes into the repository."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from optuna.trial import TrialState

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _repo_files() -> set[str]:
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--ignored"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    paths = {line[3:] for line in out.splitlines()}
    return {p for p in paths if not p.startswith(("tests/", ".pytest_cache")) and "__pycache__" not in p}


@pytest.fixture(autouse=True)
def _repo_untouched():
    before = _repo_files()
    yield
    assert _repo_files() - before == set(), "an example wrote into the repository"


def test_every_example_is_tested() -> None:
    tested = {"quickstart_api", "python_space", "promotion_pruner", "read_results"}
    assert {p.stem for p in EXAMPLES.glob("*.py")} == tested


def test_quickstart_api(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The quickstart's own objectives run capacity searches (minutes per design without the compiled simulator):
    # the same script on a study file of the same space and workload with 8 simulated requests.
    study_file = tmp_path / "small.yaml"
    study_file.write_text(yaml.safe_dump({
        "kind": "study", "name": "small", "model": "llama-3-8b",
        "workload": str(ROOT / "studies/workloads/quickstart-chat.yaml"),
        "search_space": str(ROOT / "search_spaces/quickstart.yaml"),
        "objectives": str(ROOT / "objectives/throughput_ttft.yaml"),
        "pruner": {"n_warmup_trials": 2}, "simulate": {"n_requests": 8}, "artifacts": False,
    }))
    study = _load("quickstart_api").main(["--study", str(study_file), "--n-trials", "3",
                                          "--storage", f"sqlite:///{tmp_path / 'q.db'}"])
    assert len(study.trials) == 3 and (tmp_path / "q.db").exists()
    out = capsys.readouterr().out
    simulated = [t for t in study.trials if "sim_wall_s" in t.user_attrs]
    assert simulated, "the quickstart's warm-up promotes the first trials"
    assert study.metric_names and all(n in out for n in study.metric_names)  # the file's objectives, labelled
    assert str(simulated[0].number) in out


def test_python_space_then_read_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    storage = f"journal:///{tmp_path / 'j.log'}"
    study = _load("python_space").main(["--n-trials", "6", "--storage", storage, "--requests", "8"])
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("trial ")]
    assert len(lines) == 6 == len(study.trials)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert complete
    for t in complete:  # the Python-defined SLO is an Optuna constraint on the simulated TTFT
        assert t.user_attrs["constraints"][1] == pytest.approx((t.user_attrs["sim_ttft_s"] - 0.55) / 0.55)
    assert all(t.params.keys() <= {"u_mem", "u_tscs_p", "d2d_bw_gbps", "max_batch"} for t in study.trials)

    out_dir = tmp_path / "report"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, str(EXAMPLES / "read_results.py"), "--storage", storage, "--out",
                          str(out_dir)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("python-space: 6 trials")
    feasible = {t.number for t in complete if all(c <= 0 for c in t.user_attrs["constraints"])}
    front = {int(ln.split()[2].rstrip(":")) for ln in res.stdout.splitlines() if "front trial" in ln}
    assert front <= feasible and bool(front) == bool(feasible)
    assert {p.name for p in out_dir.iterdir()} >= {"front.csv", "trials.csv", "pareto.html", "summary.md"}


def test_promotion_pruner(capsys: pytest.CaptureFixture[str]) -> None:
    study = _load("promotion_pruner").main(["--n-trials", "10", "--requests", "8"])
    out = capsys.readouterr().out
    reasons = [t.user_attrs.get("promotion") for t in study.trials]
    assert reasons[:4] == ["warmup"] * 4  # n_warmup_trials=4 (every design of this space is feasible)
    assert "dominated" in reasons, "after the warm-up the pruner keeps some trials from simulation"
    simulated = sum("sim_wall_s" in t.user_attrs for t in study.trials)
    assert f"simulated {simulated} of 10 trials" in out and simulated < 10


@pytest.mark.parametrize("doc", ["README.md", "docs/dse.md"])
def test_python_api_snippet_in_docs_runs(doc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    section = text[text.index("## Python API"):]
    code = section[section.index("```python") + len("```python"):]
    code = code[:code.index("```")]
    assert "sqlite:///mine.db" in code and "n_trials=" in code
    code = code.replace("sqlite:///mine.db", f"sqlite:///{tmp_path / 'mine.db'}")
    code = re.sub(r"n_trials=\d+", "n_trials=2", code)
    monkeypatch.chdir(ROOT)  # the snippets name files relative to the repository root
    scope: dict = {}
    exec(compile(code, doc, "exec"), scope)
    study = scope["study"]
    assert len(study.trials) == 2 and (tmp_path / "mine.db").exists()
    assert study.trials[0].user_attrs["promotion"] == "warmup" and study.trials[0].state == TrialState.COMPLETE
