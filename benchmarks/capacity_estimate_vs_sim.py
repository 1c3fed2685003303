"""Estimated vs simulated SLO capacity (capacity_req_s) and goodput (goodput_tok_s) on designs of a search space.

Designs: every ``--stride``-th design of the space's enumeration (deterministic), optionally with the batching
policy overridden. Per design: the simulated capacity search (started at the estimated capacity, as a study does)
and one simulation at the workload's own rate for goodput, each against the estimator's values. Rows are appended
to a CSV as they finish, so a run can be stopped and resumed; the summary is recomputed from the CSV.

Usage::

    python benchmarks/capacity_estimate_vs_sim.py --space search_spaces/quickstart.yaml \
        --objective objectives/capacity_slo.yaml --stride 30 --limit 15
    python benchmarks/capacity_estimate_vs_sim.py --summary-only
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CSV = RESULTS / "capacity_estimate_vs_sim.csv"
MD = RESULTS / "capacity_estimate_vs_sim.md"
FIELDS = ["design", "batching", "est_capacity_req_s", "sim_capacity_req_s", "sim_runs", "sim_converged",
          "est_goodput_tok_s", "sim_goodput_tok_s", "est_slo_attainment", "sim_slo_attainment", "sim_wall_s"]


def _designs(space_path: str, stride: int, limit: int, batching: str | None):
    from hydra_opt.dse.search_space import load_search_space
    from hydra_opt.system.design import DesignPoint

    space = load_search_space(space_path)
    out = []
    for i, d in enumerate(space.enumerate()):
        if i % stride:
            continue
        if batching:
            d = {**d, "batching": batching}
        out.append(DesignPoint.from_dict(d))
        if len(out) >= limit:
            break
    return out


def _label(d) -> str:
    counts = " ".join(f"{n}={c}" for n, c in d.counts)
    return f"{counts} HBM={d.n_mem} D2D={d.d2d_bw_gbps:g} B={d.max_batch}"


def run(args) -> None:
    from hydra_opt.evaluate.objectives import load_objectives
    from hydra_opt.evaluate import estimate, simulate
    from hydra_opt.evaluate.estimator.goodput import estimated_capacity, estimated_slo
    from hydra_opt.evaluate.simulator.goodput import simulated_capacity, slo_metrics
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import load_workload

    obj = load_objectives(args.objective)
    slo, cap = obj.slo, obj.capacity
    model = load_model(args.model)
    workload = load_workload(args.workload)
    done = set()
    if CSV.exists():
        with CSV.open() as fh:
            done = {(r["design"], r["batching"]) for r in csv.DictReader(fh)}
    new = not CSV.exists()
    with CSV.open("a", newline="") as fh:
        w = csv.DictWriter(fh, FIELDS)
        if new:
            w.writeheader()
        for d in _designs(args.space, args.stride, args.limit, args.batching):
            key = (_label(d), d.batching)
            if key in done:
                continue
            t = time.perf_counter()
            e_cap = estimated_capacity(d, model, workload, slo=slo, capacity=cap)
            s_cap = simulated_capacity(d, model, workload, slo=slo, capacity=cap, start_req_s=e_cap.capacity_req_s or None)
            e_g = estimated_slo(estimate(d, model, workload), slo)
            s_g = slo_metrics(simulate(d, model, workload), slo)
            row = dict(design=key[0], batching=key[1], est_capacity_req_s=e_cap.capacity_req_s,
                       sim_capacity_req_s=s_cap.capacity_req_s, sim_runs=len(s_cap.runs),
                       sim_converged=s_cap.converged, est_goodput_tok_s=e_g["goodput_tok_s"],
                       sim_goodput_tok_s=s_g["goodput_tok_s"], est_slo_attainment=e_g["slo_attainment"],
                       sim_slo_attainment=s_g["slo_attainment"], sim_wall_s=round(time.perf_counter() - t, 1))
            w.writerow(row)
            fh.flush()
            print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)


def summary(command: str) -> str:
    from scipy.stats import spearmanr

    with CSV.open() as fh:
        rows = list(csv.DictReader(fh))
    lines = ["# Estimated vs simulated SLO capacity and goodput\n", f"Last command: `{command}`\n",
             f"{len(rows)} designs (rows in `{CSV.relative_to(ROOT)}`), by batching policy.\n",
             "| batching | metric | designs | Spearman ρ | median est/sim | est = sim = 0 | one side 0 |",
             "|---|---|---|---|---|---|---|"]
    for pol in sorted({r["batching"] for r in rows}):
        sub = [r for r in rows if r["batching"] == pol]
        for m in ("capacity_req_s", "goodput_tok_s"):
            e = np.array([float(r[f"est_{m}"]) for r in sub])
            s = np.array([float(r[f"sim_{m}"]) for r in sub])
            both = (e > 0) & (s > 0)
            rho = spearmanr(e, s).statistic if len(sub) > 2 and np.ptp(e) > 0 and np.ptp(s) > 0 else math.nan
            ratio = float(np.median(e[both] / s[both])) if both.any() else math.nan
            lines.append(f"| {pol} | `{m}` | {len(sub)} | {rho:.3f} | {ratio:.3f} (over {int(both.sum())} with both "
                         f"> 0) | {int(((e == 0) & (s == 0)).sum())} | {int(((e == 0) ^ (s == 0)).sum())} |")
    conv = sum(r["sim_converged"] == "True" for r in rows)
    lines.append(f"\nSimulated searches converged to the tolerance: {conv} of {len(rows)}; "
                 f"runs per search median {np.median([int(r['sim_runs']) for r in rows]):.0f}; wall per design "
                 f"(capacity search + goodput run, estimates included) median "
                 f"{np.median([float(r['sim_wall_s']) for r in rows]):.1f} s.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--space", default="search_spaces/quickstart.yaml")
    ap.add_argument("--objective", default="objectives/capacity_slo.yaml")
    ap.add_argument("--model", default="llama-3-8b")
    ap.add_argument("--workload", default="studies/workloads/quickstart-chat.yaml")
    ap.add_argument("--stride", type=int, default=30)
    ap.add_argument("--limit", type=int, default=15)
    ap.add_argument("--batching", default=None, help="override the designs' batching policy")
    ap.add_argument("--summary-only", action="store_true")
    ap.add_argument("--command", default=None, help="command line recorded in the summary")
    args = ap.parse_args()
    if not args.summary_only:
        run(args)
    flags = {k: v for k, v in vars(args).items() if v not in (None, False) and k not in ("summary_only", "command")}
    cmd = args.command or "python benchmarks/capacity_estimate_vs_sim.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in flags.items())
    text = summary(cmd)
    MD.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
