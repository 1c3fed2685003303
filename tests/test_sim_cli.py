"""``python -m hydra_opt simulate``: JSON keys, trace CSV, readable summary, located errors; paper preset options."""

from __future__ import annotations

import csv
import json

import pytest

from hydra_opt.cli.main import main
from hydra_opt.config.errors import ConfigError
from hydra_opt.evaluate import Scenario, SimOptions

DESIGN = """kind: design
name: tiny
chiplets: {marca_d: 2, marca_p: 1, tscs_d: 1, tscs_p: 1}
memory: hbm3
n_mem: 4
d2d_bw_gbps: 384
max_batch: 4
placement: cp
batching: continuous
scheduler: elastic
precision: int8
package: {grid_w: 6, grid_h: 4, slot_area_mm2: 144}
"""


@pytest.fixture()
def design(tmp_path):
    p = tmp_path / "d.yaml"
    p.write_text(DESIGN)
    return str(p)


def test_json_keys_and_trace(design, tmp_path, capsys):
    trace = tmp_path / "t.csv"
    png = tmp_path / "links.png"
    rc = main(["simulate", "--design", design, "--model", "nemotron-h-4b", "--workload", "chat", "--seconds", "3",
               "--requests", "20", "--json", "--trace-out", str(trace), "--link-heatmap", str(png)])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    for k in ("throughput_tok_s", "ttft_mean_s", "ttft_p99_s", "tpot_mean_s", "completed_requests", "simulated_s",
              "wall_s", "events"):
        assert k in out
    assert out["simulated_s"] == 3.0
    assert png.stat().st_size > 1000
    rows = list(csv.DictReader(open(trace)))
    assert len(rows) == 20
    done = [r for r in rows if r["status"] == "completed"]
    assert len(done) == out["completed_requests"]
    assert all(int(r["generated_tokens"]) == int(r["output_tokens"]) for r in done)


def test_summary_has_units(design, capsys):
    assert main(["simulate", "--design", design, "--model", "nemotron-h-4b", "--workload", "chat", "--seconds", "1",
                 "--requests", "5", "--paper"]) == 0
    text = capsys.readouterr().out
    assert "tok/s" in text and "TTFT (batch_start)" in text


def test_errors_exit_2(design, capsys):
    assert main(["simulate", "--design", "missing.yaml", "--model", "nemotron-h-4b", "--workload", "chat"]) == 2
    assert main(["simulate", "--design", design, "--model", "nemotron-h-4b", "--workload", "chat",
                 "--seconds", "-1"]) == 2
    assert "--seconds" in capsys.readouterr().err


def test_paper_preset_and_option_errors():
    p = Scenario.paper()
    assert (p.horizon_s, p.n_requests, p.arrival_interval_s, p.precision) == (100.0, 5000, 0.01, "int8")
    assert (p.ttft_from, p.window, p.preempt_restart, p.preempt_requeue) == ("batch_start", "whole_run", True, "back")
    assert (p.library_preset, p.placement_preset, p.paper_preset) == ("paper", "paper", True)
    d = Scenario()
    assert (d.ttft_from, d.window, d.preempt_restart, d.paper_preset) == ("arrival", "measure", False, False)
    with pytest.raises(ConfigError, match="sharing"):
        SimOptions(sharing="fast")
    with pytest.raises(ConfigError):
        Scenario(horizon_s=0)


def test_all_zero_run_explains_itself() -> None:
    """A static batch that never fills produces no token; the summary says why instead of printing bare zeros."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    design = root / "studies" / "designs" / "fig10-nemotron-h-4b-chat-mt-cp.yaml"
    r = subprocess.run(
        [sys.executable, "-m", "hydra_opt", "simulate", "--design", str(design), "--model", "nemotron-h-4b",
         "--workload", "chat", "--seconds", "5", "--max-batch", "64"],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "emitted 0" in r.stdout
    assert "note: no token was produced" in r.stdout
