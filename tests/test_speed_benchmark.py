"""benchmarks/speed.py (issue 18 item 5) runs end to end in its ``--quick`` mode and reports every figure.

Not a timing test: it checks that the one script still produces every row (all five policies with their ratio to
static+static, the heapq floor ratio, the estimator lines) with the load and the commit, on a 1-simulated-second
case (a few seconds of CPU).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_speed_quick_reports_every_figure(tmp_path):
    out = tmp_path / "speed.md"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks/speed.py"), "--quick", "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    md = out.read_text()
    assert re.search(r"load average \(1/5/15 min\) [\d.]+/[\d.]+/[\d.]+ at start", md)
    assert re.search(r"Commit `\w+`", md)
    rows = {m.group(1): m for m in re.finditer(
        r"^\| (\w+\+\w+) \| ([\d,]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+)× \|", md, re.M)}
    assert set(rows) == {"static+static", "static+elastic", "continuous+static", "continuous+elastic",
                         "chunked+elastic"}
    assert rows["static+static"].group(5) == "1.00"  # the reference of the ratios
    assert all(int(m.group(2).replace(",", "")) > 0 and float(m.group(4)) > 0 for m in rows.values())
    assert re.search(r"\*\*loop / heapq floor\*\* .*\*\*[\d.]+×\*\*", md)
    for what in ("warm single `estimate()`", "cold first call", "`space_arrays()` of 50 designs"):
        assert what in md
