"""Does a design's simulated capacity depend on where its search starts?

A study's evaluator starts each simulated capacity search at the estimator's capacity (fewer runs); ``python -m
hydra_opt simulate --capacity`` starts at the workload's own rate. Both should report the same ``capacity_req_s``
for the same design, seed and settings. For every design of a sub-space (default: the capacity study's 96 designs,
Llama-3-8B, ``studies/workloads/quickstart-chat.yaml``, ``objectives/capacity_slo.yaml``'s SLO and capacity
settings) this script runs both searches and reports how many designs agree, the largest ratio between the two,
and the runs each search took.

Usage::

    python benchmarks/capacity_start_invariance.py [--space S] [--limit N] [--out capacity_start_invariance]
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's hydra_opt

from report_out import report_name  # noqa: E402  (benchmarks/ is on the path: this script's folder)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SPACE = "benchmarks/results/capacity_study_space_96.yaml"


def _searches(design, model, wl, ev, capacity) -> tuple:
    """(from the estimate, from the workload's rate): each a CapacityResult, with the estimate's capacity."""
    from hydra_opt.evaluate.estimator.goodput import estimated_capacity
    from hydra_opt.evaluate.simulator.goodput import simulated_capacity

    kw = dict(scenario=ev.scenario, slo=ev._slo(), capacity=capacity)
    est = estimated_capacity(design, model, wl, options=ev._est_opts, **kw).capacity_req_s
    warm = simulated_capacity(design, model, wl, seed=0, options=ev._sim_opts,
                              start_req_s=est if est > 0 else None, **kw)
    cold = simulated_capacity(design, model, wl, seed=0, options=ev._sim_opts, **kw)
    return est, warm, cold


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--space", default=SPACE)
    ap.add_argument("--limit", type=int, default=0, help="only the first N designs")
    ap.add_argument("--out", type=report_name, default="capacity_start_invariance")
    ap.add_argument("--tolerance", type=float, default=None, help="override the objective's capacity tolerance")
    ap.add_argument("--max-runs", type=int, default=None, help="override the objective's capacity max_runs")
    args = ap.parse_args(argv)

    import yaml

    from hydra_opt.dse.search_space import load_search_space
    from hydra_opt.dse.spec import load_study_spec

    study = {"kind": "study", "name": "capacity-start-invariance", "model": "llama-3-8b",
             "workload": str(ROOT / "studies/workloads/quickstart-chat.yaml"), "search_space": str(ROOT / args.space),
             "objectives": str(ROOT / "objectives/capacity_slo.yaml"), "budget": {"n_trials": 1}, "seed": 0}
    tmp = RESULTS / f".{args.out}.study.yaml"
    tmp.write_text(yaml.safe_dump(study))
    try:
        spec = load_study_spec(tmp)
    finally:
        tmp.unlink()
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import load_workload

    model, wl = spec.pairs[0]  # names or paths, as the study file gives them
    model = load_model(model) if isinstance(model, str) else model
    wl = load_workload(wl) if isinstance(wl, str) else wl
    ev = spec.make_evaluator()
    import dataclasses

    over = {k: v for k, v in (("tolerance", args.tolerance), ("max_runs", args.max_runs)) if v is not None}
    cap = dataclasses.replace(ev.capacity, **over)
    from hydra_opt.system.design import DesignPoint

    designs = [DesignPoint.from_dict(dict(d)) for d in load_search_space(str(ROOT / args.space)).enumerate()]
    if args.limit:
        designs = designs[: args.limit]
    rows, t0 = [], time.perf_counter()
    for d in designs:
        est, warm, cold = _searches(d, model, wl, ev, cap)
        rows.append((d, est, warm, cold))
    wall = time.perf_counter() - t0
    same = sum(1 for _, _, w, c in rows if w.capacity_req_s == c.capacity_req_s)
    ratios = [w.capacity_req_s / c.capacity_req_s for _, _, w, c in rows if w.capacity_req_s > 0 and c.capacity_req_s > 0]
    worst = max((abs(math.log(r)) for r in ratios), default=0.0)
    within = sum(1 for r in ratios if abs(math.log(r)) <= math.log1p(cap.tolerance) * (1 + 1e-9))
    conv = [(w.converged, c.converged) for _, _, w, c in rows]
    both = [(w, c) for _, _, w, c in rows if w.converged and c.converged]
    same_both = sum(1 for w, c in both if w.capacity_req_s == c.capacity_req_s)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    runs_w = sorted(len(w.runs) for _, _, w, _ in rows)
    runs_c = sorted(len(c.runs) for _, _, _, c in rows)
    lines = [
        "# Simulated capacity: search from the estimate vs from the workload's rate", "",
        f"Generated by `python benchmarks/capacity_start_invariance.py --space {args.space}"
        + (f" --limit {args.limit}" if args.limit else "")
        + "".join(f" --{k.replace('_', '-')} {v:g}" for k, v in over.items()) + f"` at commit {commit}; "
        f"{len(rows)} designs, Llama-3-8B, `studies/workloads/quickstart-chat.yaml`, `objectives/capacity_slo.yaml`"
        f" (tolerance {cap.tolerance:g}, max_runs {cap.max_runs}), seed 0; {wall:.0f} s wall; `uptime` at the "
        f"end: {_uptime()}.", "",
        f"* same `capacity_req_s` from both starts: **{same} of {len(rows)}**",
        f"* within the tolerance of each other: {within} of {len(ratios)} (both > 0); largest ratio "
        f"{math.exp(worst):.3f}×",
        f"* converged (bracket within the tolerance): from the estimate {sum(w for w, _ in conv)}, from the "
        f"workload's rate {sum(c for _, c in conv)}; where both converged, the same capacity on "
        f"**{same_both} of {len(both)}**",
        f"* runs per search, median: from the estimate {runs_w[len(runs_w) // 2]}, from the workload's rate "
        f"{runs_c[len(runs_c) // 2]}", "",
        "| design | est. capacity (req/s) | sim. from estimate (req/s, runs) | sim. from workload rate (req/s, runs) |",
        "|---|---:|---:|---:|",
    ]
    for d, est, w, c in rows:
        mark = "" if w.capacity_req_s == c.capacity_req_s else " ≠"
        lines.append(f"| {_label(d)} | {est:.3f} | {w.capacity_req_s:.3f} ({len(w.runs)}{_open(w)}) | "
                     f"{c.capacity_req_s:.3f} ({len(c.runs)}{_open(c)}){mark} |")
    (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:8]))
    return 0


def _open(res) -> str:
    """A search that did not converge, marked in the table."""
    return "" if res.converged else f", {res.status}"


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def _label(d) -> str:
    parts = "+".join(f"{k}{v}" for k, v in d.counts)
    return f"{parts} D2D {d.d2d_bw_gbps:g} B{d.max_batch} {d.batching}+{d.scheduler}"


if __name__ == "__main__":
    raise SystemExit(main())
