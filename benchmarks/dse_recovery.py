"""How much of the exhaustive front does a DSE with a small simulation budget recover? (issue: Optuna plugin)

Two phases, both with hydra_opt's own estimator and simulator:

1. ``--phase exhaustive``: simulate every design of a documented sub-space (default: ``search_spaces/quickstart.yaml``,
   450 designs of the Llama-3 Table III space: HBM 4-12 even, D2D 256/512 GB/s, batch 4/8/16) on one (model,
   workload) pair; the table goes to ``benchmarks/results/dse_exhaustive_<model>_<workload>.csv``. The simulations
   are an Optuna sweep study in ``dse_exhaustive_<model>_<workload>.partial.db``; re-running the same command on the same code
   resumes from it (the file is removed when the table is written).
2. ``--phase search``: with a budget of ``--sim-frac`` (default 2 %) of the space simulated, run
   * ``screen``: the HYDRA method — estimate every design (vectorised), simulate the designs nearest the
     estimated front (non-dominated rank, then throughput); and the same with the calibrated plan
     (``run_exhaustive(simulate="plan:K")``);
   * Optuna studies with the promotion pruner for each sampler in ``--samplers`` (TPE, NSGA-II, random), each
     simulation plan in ``--plans`` (``budget.plan``: greedy, calibrated; ``calibrated-space`` = calibrated with
     ``budget.plan_pool: space``, which plans over every design of the space) and ``--seeds`` seeds, capped at the same
     number of simulations (``budget.max_simulations``);
   and compare each with the exhaustive front: best-throughput ratio and hypervolume ratio (reference point = the
   worst exhaustive throughput and TTFT). Wall time, simulations and promotion rates are reported in
   ``benchmarks/results/dse_recovery_<model>_<workload>.md`` / ``.csv``, with medians per (plan, sampler).

Workloads and sub-spaces defined for this benchmark live next to its results:
``benchmarks/results/dse_workload_<name>.yaml`` (tag ``<name>``) and ``benchmarks/results/dse_space_<name>.yaml``.

Usage::

    python benchmarks/dse_recovery.py --phase exhaustive --processes 1
    python benchmarks/dse_recovery.py --phase search --seeds 3
    python benchmarks/dse_recovery.py --phase exhaustive --workload benchmarks/results/dse_workload_quickstart-arxiv.yaml
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
#: ``--plans`` names → the study's ``budget`` entries.
PLAN_BUDGETS = {"greedy": {"plan": "greedy"}, "calibrated": {"plan": "calibrated"},
                "calibrated-space": {"plan": "calibrated", "plan_pool": "space"}}


def _version() -> str:
    import subprocess

    if (ROOT / "COMMIT").exists():  # a `git archive` snapshot (how the published numbers were produced)
        return (ROOT / "COMMIT").read_text().strip() + " (archive)"
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "hydra_opt"], cwd=ROOT, capture_output=True, text=True).stdout
        return (head or "unknown") + ("+dirty" if dirty.strip() else "")
    except OSError:
        return "unknown"


def _pairs(args) -> list[tuple[str, str]]:
    return [(args.model, str((ROOT / args.workload).resolve()) if args.workload.endswith(".yaml") else args.workload)]


def _tag(args) -> str:
    # benchmarks/results/dse_workload_<name>.yaml: a workload defined for this benchmark (tag: <name>)
    tag = f"{args.model}_{Path(args.workload).stem.removeprefix('dse_workload_')}"
    return f"{tag}_{args.tag_suffix}" if args.tag_suffix else tag


def exhaustive(args) -> None:
    """Estimate and simulate every design with ``run_exhaustive``: the simulations are an Optuna sweep study in
    ``dse_exhaustive_<tag>.partial.db`` (SQLite), so an interrupted sweep resumes where it stopped (same code, same
    sub-space: both are in the study name, so another code version starts a sweep of its own)."""
    import hashlib

    from hydra_opt.evaluate.evaluators import HydraEvaluator
    from hydra_opt.dse.exhaustive import run_exhaustive
    from hydra_opt.evaluate.objectives import DEFAULT_OBJECTIVES
    from hydra_opt.dse.search_space import load_search_space

    space = load_search_space(ROOT / args.space)
    designs = list(space.enumerate())
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"dse_exhaustive_{_tag(args)}.csv"
    db = out.with_suffix(".partial.db")
    header = {"space": args.space, "code": _version(), "workload": args.workload, "model": args.model}
    name = "exhaustive-" + hashlib.sha256(json.dumps(header, sort_keys=True).encode()).hexdigest()[:16]

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "simulate" and (done % 10 == 0 or done == total):
            print(f"simulate: {done}/{total}", flush=True)

    res = run_exhaustive(designs, _pairs(args), DEFAULT_OBJECTIVES, HydraEvaluator(), simulate="all",
                         workers=args.processes, progress=progress, storage=f"sqlite:///{db}", study_name=name)
    df = res.frame()
    df["design_json"] = [json.dumps(d, sort_keys=True) for d in designs]
    df.to_csv(out, index=False)
    meta = {"space": args.space, "designs": len(designs), "feasible": int(res.feasible.sum()), "code": header["code"],
            "est_wall_s": res.est_wall_s, "sim_wall_s": res.sim_wall_s, "processes": args.processes}
    out.with_suffix(".json").write_text(json.dumps(meta, indent=1))
    db.unlink()
    print(f"wrote {out}: {meta}")


def _load_exhaustive(args):
    import pandas as pd

    tag = args.table_tag or _tag(args)
    df = pd.read_csv(RESULTS / f"dse_exhaustive_{tag}.csv")
    meta = json.loads((RESULTS / f"dse_exhaustive_{tag}.json").read_text())
    return df, meta


def search(args) -> None:
    import optuna
    import pandas as pd
    import yaml

    from hydra_opt.evaluate.evaluators import HydraEvaluator
    from hydra_opt.dse.exhaustive import recovery, run_exhaustive
    from hydra_opt.evaluate.objectives import DEFAULT_OBJECTIVES
    from hydra_opt.dse.search_space import load_search_space
    from hydra_opt.dse.objective import trial_design
    from hydra_opt.dse.runner import RunOptions, run_study
    from hydra_opt.dse.spec import load_study_spec

    df, meta = _load_exhaustive(args)
    ok = df["feasible"] & df["sim_throughput_tok_s"].notna()
    ref = df.loc[ok, ["sim_throughput_tok_s", "sim_ttft_s"]].to_numpy()
    by_key = {k: (tp, tt) for k, tp, tt in zip(df["design_json"], df["sim_throughput_tok_s"], df["sim_ttft_s"])}
    n_sims = max(1, int(math.floor(args.sim_frac * meta["designs"])))
    hv_ref = (float(ref[:, 0].min()), float(ref[:, 1].max()))
    rows = []

    # 1. HYDRA-style screening: estimate all, simulate the n_sims designs nearest the estimated front;
    # 1b. the same, but the simulations chosen one at a time by the calibrated plan (hydra_opt.dse.plan).
    space = load_search_space(ROOT / args.space)
    designs = list(space.enumerate())
    for how, label in ((f"front:{n_sims}", "screen (estimate all, simulate nearest estimated front)"),
                       (f"plan:{n_sims}", "screen + calibrated plan (estimate all, simulate as plan_next picks)")):
        t0 = time.perf_counter()
        res = run_exhaustive(designs, _pairs(args), DEFAULT_OBJECTIVES, HydraEvaluator(), simulate=how)
        wall = time.perf_counter() - t0
        sim_idx = np.flatnonzero(np.isfinite(res.sim["throughput_tok_s"]))
        picked = [json.dumps(designs[i], sort_keys=True) for i in sim_idx]
        found = np.array([by_key[k] for k in picked], dtype=float).reshape(-1, 2)
        rec = recovery(ref, found, [True, False], hv_reference=hv_ref)
        n_est = int(res.feasible.sum())
        rows.append({"method": label, "simulations": len(found), "estimates": n_est,
                     "promotion_rate": len(found) / max(1, n_est), "wall_s": wall, **rec})
        print(rows[-1], flush=True)

    # 2. Optuna studies with the promotion pruner, one per sampler, same simulation cap.
    for plan, sampler in [(p, s) for p in args.plans for s in args.samplers]:
        for seed in range(args.seeds):
            with tempfile.TemporaryDirectory() as tmp:
                doc = {
                    "kind": "study", "name": f"rec-{plan}-{sampler}-{seed}", "model": args.model,
                    "workload": _pairs(args)[0][1], "search_space": str(ROOT / args.space),
                    "sampler": {"name": sampler, "args": ({"n_startup_trials": 10, "multivariate": True} if sampler == "tpe"
                                                          else {"population_size": 20} if sampler == "nsga2" else {})},
                    "pruner": {"rule": "rank", "k_ranks": 1, "n_warmup_trials": 0, "min_estimates": args.min_estimates},
                    "budget": {"n_trials": args.n_trials, "max_simulations": n_sims, **PLAN_BUDGETS[plan]},
                    "storage": f"journal:///{tmp}/j.log", "artifacts": False, "seed": seed,
                }
                p = Path(tmp) / "s.yaml"
                p.write_text(yaml.safe_dump(doc))
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    study, summary = run_study(load_study_spec(p), RunOptions(quiet=True))
                wall = time.perf_counter() - t0
                done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                # Judge the designs a method found by the exhaustive table's simulation of them, so every method
                # is scored on the same reference numbers (the simulator may change between the two phases).
                keys = {json.dumps(trial_design(t), sort_keys=True) for t in done}
                found = np.array([by_key[k] for k in keys], dtype=float).reshape(-1, 2)
                own = np.array([t.values for t in done if t.values], dtype=float).reshape(-1, 2)
                sims = len({t.user_attrs.get("design_key") for t in done})
                rec = recovery(ref, found, [True, False], hv_reference=hv_ref)
                rows.append({"method": f"optuna {sampler}, plan {plan} (seed {seed})", "plan": plan, "sampler": sampler,
                             "seed": seed, "simulations": sims,
                             "estimates": summary.finished - summary.infeasible,
                             "promotion_rate": summary.promotion_rate, "wall_s": wall,
                             "own_best_tp": float(own[:, 0].max()) if len(own) else math.nan, **rec})
                assert summary.simulated == sims
                print(rows[-1], flush=True)

    out = pd.DataFrame(rows)
    out.to_csv(RESULTS / f"dse_recovery_{_tag(args)}.csv", index=False)
    lines = [
        f"# DSE recovery: {args.model} on {Path(args.workload).stem.removeprefix('dse_workload_')}",
        "",
        f"Sub-space `{args.space}`: {meta['designs']} designs ({meta['feasible']} feasible), exhaustively simulated "
        f"with hydra_opt's simulator in {meta['sim_wall_s']:.0f} s of simulation wall time summed over {meta['processes']} process(es); "
        f"exhaustive front: {rec.get('front_size')} designs, best throughput {ref[:, 0].max():.1f} tok/s.",
        f"Each method's designs are scored with the exhaustive table's simulated values (exhaustive code "
        f"{meta.get('code', 'unknown')}, search code {_version()}).",
        f"Simulation budget: {n_sims} designs = {n_sims / meta['designs']:.1%} of the space. Hypervolume reference "
        f"point: ({hv_ref[0]:.1f} tok/s, {hv_ref[1]:.3f} s). Targets: best-throughput ratio ≥ 0.97, HV ratio ≥ 0.95.",
        "",
        "| method | simulations | estimated | promotion rate | best TP ratio | HV ratio | wall s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['method']} | {r['simulations']} | {r['estimates']} | {r['promotion_rate']:.1%} | "
                     f"{r['best_ratio']:.3f} | {r.get('hv_ratio', float('nan')):.3f} | {r['wall_s']:.0f} |")
    study_rows = out[out["plan"].notna()] if "plan" in out else out.iloc[:0]
    if len(study_rows):
        lines += ["", "Per (plan, sampler): medians over seeds, and runs meeting both targets (TP ≥ 0.97 and HV ≥ 0.95).",
                  "", "| plan | sampler | runs | median best TP ratio | median HV ratio | min best TP ratio | "
                  "meet both | median promotion rate | median wall s |", "|---|---|---|---|---|---|---|---|---|"]
        for (plan, sampler), g in study_rows.groupby(["plan", "sampler"], sort=False):
            both = int(((g["best_ratio"] >= 0.97) & (g["hv_ratio"] >= 0.95)).sum())
            lines.append(f"| {plan} | {sampler} | {len(g)} | {g['best_ratio'].median():.3f} | "
                         f"{g['hv_ratio'].median():.3f} | {g['best_ratio'].min():.3f} | {both}/{len(g)} | "
                         f"{g['promotion_rate'].median():.1%} | {g['wall_s'].median():.0f} |")
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"]
    lines += ["", f"Command: `python benchmarks/dse_recovery.py {' '.join(sys.argv[1:])}` (machine: 2 cores shared "
                  f"with other jobs, load average at the end {' '.join(load)}; wall times are indicative)."]
    (RESULTS / f"dse_recovery_{_tag(args)}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phase", choices=("exhaustive", "search"), required=True)
    ap.add_argument("--model", default="llama-3-8b")
    ap.add_argument("--workload", default="studies/workloads/quickstart-chat.yaml")
    ap.add_argument("--space", default="search_spaces/quickstart.yaml")
    ap.add_argument("--tag-suffix", default="",
                    help="appended to the result files' tag (e.g. the sub-space name when a model has several)")
    ap.add_argument("--table-tag", default="",
                    help="search phase: score against dse_exhaustive_<TABLE_TAG>.csv (default: this run's tag)")
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--sim-frac", type=float, default=0.02)
    ap.add_argument("--n-trials", type=int, default=150)
    ap.add_argument("--min-estimates", type=int, default=60)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--samplers", nargs="+", default=["tpe", "nsga2", "random"])
    ap.add_argument("--plans", nargs="+", default=["greedy", "calibrated"], choices=list(PLAN_BUDGETS),
                    help="simulation plans to compare (greedy = the pruner promotes until the cap; calibrated-space "
                         "= calibrated with budget.plan_pool: space)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    exhaustive(args) if args.phase == "exhaustive" else search(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
