"""What a user sees from the CLI (issue 19): reasons of non-simulated trials, the progress bar's count, the run header
after validation, read-only commands that create nothing, a self-contained report, one line per finished trial.

Studies use the closed-form test evaluator (``tests/dse_fakes.py``): seconds, not minutes.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import warnings
from pathlib import Path

import pytest
import yaml

from test_dse_study import SPACE  # the dse tests' small space (n_mem = 2 is infeasible for the fake evaluator)

from hydra_opt.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def study_file(tmp_path: Path, name: str = "s", n_trials: int = 20, **extra) -> Path:
    doc = {
        "kind": "study", "name": name, "model": "llama-3-8b", "workload": "chat", "search_space": SPACE,
        "sampler": "tpe", "pruner": {"n_warmup_trials": 4, "epsilon": 0.02}, "budget": {"n_trials": n_trials},
        "evaluator": "dse_fakes:make", "seed": 3, "storage": f"journal:///{tmp_path / (name + '.log')}",
        "artifacts": False,
    }
    doc.update(extra)
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_summary_counts_reasons_and_prints_every_trial(tmp_path: Path, capsys) -> None:
    code, out, err = cli(capsys, "run", str(study_file(tmp_path, n_trials=24)))
    assert code == 0, err
    numbers = [int(m) for m in re.findall(r"^trial +(\d+) ", out, flags=re.M)]
    assert numbers == list(range(24)), "one line per finished trial: numbers must not jump"
    assert re.search(r"^trial +\d+ infeasible +memory: model weights need >= 3 memory chiplets", out, re.M)
    assert re.search(r"^trial +\d+ pruned: dominated", out, re.M)
    # Summary: counts by outcome, top reasons spelled out.
    m = re.search(r"infeasible (\d+) \| failed", out)
    assert m and int(m.group(1)) > 0
    assert re.search(rf"^  infeasible {m.group(1)}:\n +{m.group(1)} x memory: model weights need", out, re.M)
    assert re.search(r"^  not promoted \d+:\n +\d+ x estimate dominated", out, re.M)


def test_header_names_model_workload_and_comes_after_validation(tmp_path: Path, capsys) -> None:
    code, out, _ = cli(capsys, "run", str(study_file(tmp_path, n_trials=3)))
    assert code == 0
    head = out.splitlines()[0]
    assert head.startswith("study 's' on journal:///") and "llama-3-8b on chat" in head
    for name, change in (("badmodel", {"model": "no-such-model", "evaluator": ""}),
                         ("badevaluator", {"evaluator": "no_such_module:make"})):
        code, out, err = cli(capsys, "run", str(study_file(tmp_path, name=name, **change)))
        assert code == 2 and out == "", "no study header before an error found before the study is created"
        assert err.count("\n") == 1 and err.startswith("hydra_opt: error: ")
        assert not (tmp_path / f"{name}.log").exists()


def _tty_stderr(argv: list[str], cwd: Path) -> str:
    """Run ``argv`` with stderr on a 160-column pseudo-terminal (so tqdm draws); what the terminal received."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])}
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=slave, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    os.close(slave)
    buf = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        buf += chunk
    os.close(master)
    assert p.wait(timeout=300) == 0, buf.decode(errors="replace")[-2000:]
    return buf.decode(errors="replace")


def test_progress_bar_never_overcounts(tmp_path: Path) -> None:
    f = study_file(tmp_path, n_trials=28)
    run = [sys.executable, "-m", "hydra_opt.run", str(f)]
    first = _tty_stderr([*run, "--n-trials", "4"], tmp_path)
    counts = [(int(a), int(b)) for a, b in re.findall(r"\| *(\d+)/(\d+) \[", first)]
    assert counts and all(b == 4 for _, b in counts) and max(a for a, _ in counts) == 4
    past = re.findall(r".{0,60}\d+trial \[.{0,40}", first)
    assert not past, f"the bar never runs past its total: {past}"
    rates = [float(r) for r in re.findall(r"([\d.]+)trial/s", first)]
    assert all(r < 1000 for r in rates), f"rates from the run's start, not the first trial's end: {rates}"
    # Resume to the full budget: the bar starts at the 4 finished trials and ends at 28/28, never 29.
    second = _tty_stderr(run, tmp_path)
    counts = [(int(a), int(b)) for a, b in re.findall(r"\| *(\d+)/(\d+) \[", second)]
    assert counts[0] == (5, 28) and max(a for a, _ in counts) == 28 and counts[-1] == (28, 28)


def test_report_on_missing_storage_creates_nothing(tmp_path: Path, capsys) -> None:
    for url in (f"sqlite:///{tmp_path / 'typo.db'}", f"journal:///{tmp_path / 'typo.log'}"):
        code, out, err = cli(capsys, "report", "--storage", url)
        assert code == 2 and "does not exist" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_report_is_self_contained_and_names_reasons(tmp_path: Path, capsys) -> None:
    f = study_file(tmp_path, n_trials=16)
    assert cli(capsys, "run", str(f))[0] == 0
    code, out, err = cli(capsys, "report", str(f), "--out", str(tmp_path / "rep"))
    assert code == 0, err
    assert re.search(r"^trials by outcome: simulated \d+, infeasible \d+", out, re.M)
    assert "x memory: model weights need >= 3 memory chiplets" in out
    html = (tmp_path / "rep" / "pareto.html").read_text()
    assert not re.search(r"<script[^>]*\bsrc=", html), "no script loaded from the network (or anywhere else)"
    assert len(html) > 1_000_000, "plotly.js is embedded"
    assert "llama-3-8b on chat" in html and "vs TTFT [s]" in html, "the title names what it shows"
    summary = (tmp_path / "rep" / "summary.md").read_text()
    assert "## Trials by outcome" in summary and "memory: model weights need" in summary


def test_export_design_writes_one_file_no_report_folder(tmp_path: Path, capsys, monkeypatch) -> None:
    f = study_file(tmp_path, n_trials=6, artifacts="art")
    assert cli(capsys, "run", str(f))[0] == 0
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    code, out, err = cli(capsys, "report", str(f), "--export-design", "0")
    assert code == 0, err
    assert list(work.iterdir()) == [], "nothing written into the current folder (the repository)"
    assert (tmp_path / "art" / "s_trial0_design.yaml").is_file()


def test_log_axis_only_when_values_span_decades() -> None:
    from hydra_opt.dse.report import log_axis

    assert log_axis([0.01, 0.5], [3.0]) and not log_axis([0.4, 2.0]) and not log_axis([-1.0, 100.0])


def test_validate_checks_what_run_checks_and_reports_every_bad_file(tmp_path: Path, capsys) -> None:
    quick = yaml.safe_load((ROOT / "studies" / "quickstart.yaml").read_text())
    quick["search_space"] = str(ROOT / "search_spaces" / "quickstart.yaml")
    quick["objectives"] = str(ROOT / "objectives" / "throughput_ttft.yaml")
    quick["workload"] = str(ROOT / "studies" / "workloads" / "quickstart-chat.yaml")
    (tmp_path / "trace-wl.yaml").write_text(yaml.safe_dump(
        {"name": "t", "lengths": {"trace": str(tmp_path / "absent.csv")}, "n_requests": 4}))
    files = {}
    for name, change in (("good", {}), ("model", {"model": "no-such-model"}),
                         ("workload", {"workload": str(tmp_path / "absent.yaml")}),
                         ("trace", {"workload": str(tmp_path / "trace-wl.yaml")}),
                         ("mamba", {"model": "mamba2-2.7b"})):
        files[name] = tmp_path / f"{name}.yaml"
        files[name].write_text(yaml.safe_dump({**quick, "name": name, **change}))
    code, out, err = cli(capsys, "validate", *map(str, files.values()))
    assert code == 2
    assert out.splitlines() == [f"ok: {files['good']} (study)"]
    lines = err.splitlines()
    assert len(lines) == 4 and all(line.startswith("hydra_opt: error: ") for line in lines)
    assert "no-such-model" in lines[0] and "absent.yaml: does not exist" in lines[1]
    assert "trace-wl.yaml: lengths.trace: " in lines[2] and lines[2].endswith("does not exist")
    assert "every design checked is infeasible" in lines[3] and "no chiplet can run mamba blocks" in lines[3]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*(f"{n}.yaml" for n in files), "trace-wl.yaml"]), \
        "validate writes nothing (no storage, no artifacts)"


def test_tpot_and_energy_have_one_unit_in_simulate_and_estimate(capsys) -> None:
    """docs/metrics.md "Units": TPOT in s and energy in J/token, in both tools (simulate printed ms and mJ)."""
    design = str(ROOT / "studies" / "designs" / "fig10-nemotron-h-4b-chat-mt-cp.yaml")
    common = ["--design", design, "--model", "nemotron-h-4b", "--workload", "chat"]
    code, sim, err = cli(capsys, "simulate", *common, "--requests", "8")
    assert code == 0, err
    code, est, err = cli(capsys, "estimate", *common)
    assert code == 0, err
    for text in (sim, est):
        assert re.search(r"^TPOT +mean +\d+\.\d+ s\b", text, re.M), text
    assert " ms" not in sim and "mJ" not in sim and re.search(r"\(\d[\d.e-]* J/token\)", sim)


def test_list_chiplets_sorted_with_units_and_models_with_aliases(capsys) -> None:
    code, out, _ = cli(capsys, "list", "chiplets")
    assert code == 0
    rows = [line for line in out.splitlines()[2:] if line.strip()]
    names = [r.split()[0] for r in rows]
    assert names == sorted(names) and {"tscs_p", "tscs_d", "marca_p", "dynacore"} <= set(names)
    tscs = next(r for r in rows if r.startswith("tscs_p "))
    assert re.search(r"GHz .* TMAC/s .* MiB .* mm2  TSTC-style", tscs), "units and the description"
    code, out, _ = cli(capsys, "list", "models")
    assert re.search(r"^aliases: .*mamba2-2\.8b = mamba2-2\.7b", out, re.M)
    from hydra_opt.workload.models import ALIASES, load_model

    assert all(load_model(a).name == load_model(n).name for a, n in ALIASES.items()), "listed aliases load"
