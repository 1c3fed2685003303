"""``python -m hydra_opt estimate``: JSON keys, roofline switch, located errors (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DESIGN = """kind: design
chiplets: {tscs_p: 6, tscs_d: 14}
memory: hbm3
n_mem: 4
d2d_bw_gbps: 640
max_batch: 4
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hydra_opt", "estimate", *args], capture_output=True, text=True,
                          timeout=300)


def test_estimate_json_keys(tmp_path: Path) -> None:
    d = tmp_path / "d.yaml"
    d.write_text(DESIGN)
    r = _run("--design", str(d), "--model", "llama-3-8b", "--workload", "chat", "--seconds", "60", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("throughput_tok_s", "ttft_mean_s", "wall_s", "bottleneck", "tpot_mean_s", "diagnostics"):
        assert key in out
    assert out["throughput_tok_s"] > 0 and out["wall_s"] > 0
    rf = json.loads(_run("--design", str(d), "--model", "llama-3-8b", "--workload", "chat", "--roofline",
                         "--json").stdout)
    assert rf["estimator"] == "roofline" and rf["bottleneck"] in ("compute", "hbm", "noi")


def test_estimate_bad_input_exit_2(tmp_path: Path) -> None:
    d = tmp_path / "d.yaml"
    d.write_text(DESIGN)
    r = _run("--design", str(d), "--model", "llama-3-8b", "--workload", "chat", "--seconds", "-3")
    assert r.returncode == 2 and "--seconds" in r.stderr
    r = _run("--design", str(tmp_path / "missing.yaml"), "--model", "llama-3-8b", "--workload", "chat")
    assert r.returncode == 2 and "missing.yaml" in r.stderr
