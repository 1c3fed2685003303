"""Wall time of ``python -m hydra_opt report --reproduce --quick`` (issue 8: ≤ 20 minutes on this machine).

Runs every reproduction experiment in quick mode into a scratch folder (so the committed full-mode results in
``docs/`` are not overwritten) and writes ``benchmarks/results/reproduce_quick.md`` with the total and per-section
wall times, the load average and the number of rows and of > 25 % differences without a stated cause.

Usage::

    python benchmarks/reproduce_quick.py [--out /tmp/repro_quick]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/hydra_opt_reproduce_quick")
    args = ap.parse_args()
    out = Path(args.out)
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hydra_opt", "report", "--reproduce", "--quick", "--out", str(out)],
                          cwd=ROOT, check=False)
    wall = time.perf_counter() - t
    load1 = os.getloadavg()[0]
    rows = []
    for f in sorted((out / "reproduction").glob("*.json")):
        data = json.loads(f.read_text())
        n = len(data.get("rows", []))
        flagged = sum(1 for r in data.get("rows", [])
                      if r.get("paper") and r.get("ours") is not None and r["paper"] != 0
                      and abs(r["ours"] / r["paper"] - 1) > 0.25 and not r.get("comment"))
        rows.append((f.stem, n, flagged, float(data.get("wall_s", float("nan")))))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    lines = [
        "# `report --reproduce --quick` wall time (benchmarks/reproduce_quick.py)",
        "",
        f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC at commit `{commit.strip()}`; exit code "
        f"{proc.returncode}; load average {load0:.1f} at start, {load1:.1f} at end (2 cores, shared).",
        "",
        f"**Total wall: {wall / 60:.1f} min** (target ≤ 20 min).",
        "",
        "| section | rows | > 25 % without a cause | wall s |",
        "|---|---:|---:|---:|",
        *[f"| {k} | {n} | {fl} | {w:.0f} |" for k, n, fl, w in rows],
        "",
    ]
    res = ROOT / "benchmarks" / "results" / "reproduce_quick.md"
    res.write_text("\n".join(lines))
    print("\n".join(lines))
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
