"""Estimator solver: speed of the single-design and vectorised paths, and a before/after output fingerprint.

Issue 18 item 3 targets: ≤ 0.2 ms per design warm (single ``estimate()`` and the vectorised ``space_arrays``: the
5,040-design Llama-3 space ≤ 1 s), cold first call ≤ 0.2 s. Measured here:

* **single warm**: ``estimate()`` of ``--n-single`` designs of the Llama-3-8B space (arxiv, horizon 60 s), each once
  after one warm-up call that prepared the workload; the per-design median of each run, median over ``--runs`` runs;
* **vectorised**: ``space_arrays()`` of all 5,040 designs, wall time per run, median over ``--runs`` runs;
* **cold first call**: in a fresh process (model and workload objects already loaded), the wall time of the first
  ``estimate()`` (per-workload preparation included), median over ``--runs`` processes;
* **fingerprint**: every output field of ``--n-check`` designs over three models and both batchings, through the
  single path and the vectorised path, written to ``--out-json``; ``--compare OLD.json`` counts the fields that
  differ bit for bit (and the largest relative difference) between two code versions.

The load average (``uptime``'s 1-minute figure) is recorded before and after: the machine has 2 shared cores.

    python benchmarks/estimator_solver.py --label before --out-json /tmp/before.json
    python benchmarks/estimator_solver.py --label after --compare /tmp/before.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CASES = [("llama-3-8b", "llama3", "arxiv", {}), ("llama-3-8b", "llama3", "chat",
                                                 {"batching": "continuous", "scheduler": "fcfs"}),
         ("mamba2-2.7b", "mamba2", "bwb", {}), ("nemotron-h-4b", "nemotron_h", "chat", {}),
         ("nemotron-h-4b", "nemotron_h", "arxiv", {"batching": "continuous", "scheduler": "elastic"})]
COLD = """
import sys, time, warnings
warnings.filterwarnings("ignore")
from hydra_opt.evaluate import Scenario
from hydra_opt.evaluate.estimator import estimate
from hydra_opt.system.space import paper_space
from hydra_opt.workload.models import load_model
from hydra_opt.workload.workload import load_workload
m, w = load_model("llama-3-8b"), load_workload("arxiv")
d = next(iter(paper_space("llama3")))
o = Scenario(horizon_s=60.0)
t = time.perf_counter()
estimate(d, m, w, scenario=o)
print(time.perf_counter() - t)
"""


def _load() -> float:
    return os.getloadavg()[0]


def fingerprint(n: int) -> dict:
    """``{case: {"single": [to_dict…], "vectorised": [[tp, ttft, tpot, cap, rho]…]}}`` of ``n`` designs per case."""
    from hydra_opt.evaluate import Scenario
    from hydra_opt.evaluate.estimator import estimate, space_arrays
    from hydra_opt.system.space import paper_space
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import load_workload

    out = {}
    for model_name, space_name, wl_name, policies in CASES:
        model, wl = load_model(model_name), load_workload(wl_name)
        opts = Scenario(horizon_s=60.0)
        designs = paper_space(space_name).sample(n, 0, **policies)
        single = [estimate(d, model, wl, scenario=opts).to_dict() for d in designs]
        a = space_arrays(designs, model, wl, scenario=opts)
        vec = [[float(a[k][i]) for k in ("throughput_tok_s", "ttft_mean_s", "tpot_mean_s", "capacity_tok_s", "rho")]
               for i in range(len(designs))]
        out[f"{model_name}/{wl_name}/{policies.get('batching', 'static')}"] = {
            "single": json.loads(json.dumps(single, default=lambda x: x.tolist() if hasattr(x, "tolist") else str(x))),
            "vectorised": vec}
    return out


def _flat(x, path=""):
    if isinstance(x, dict):
        for k in sorted(x):
            yield from _flat(x[k], f"{path}/{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _flat(v, f"{path}[{i}]")
    else:
        yield path, x


def compare(old: dict, new: dict) -> tuple[int, int, float, list[str]]:
    """(fields compared, fields differing, largest relative difference, first differing paths)."""
    a, b = dict(_flat(old)), dict(_flat(new))
    n = diff = 0
    worst = 0.0
    where = []
    for k in sorted(set(a) | set(b)):
        n += 1
        x, y = a.get(k), b.get(k)
        if x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)):
            continue
        diff += 1
        if len(where) < 10:
            where.append(f"{k}: {x!r} -> {y!r}")
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and math.isfinite(x) and math.isfinite(y):
            worst = max(worst, abs(x - y) / max(abs(x), abs(y), 1e-300))
    return n, diff, worst, where


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", default="run")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--n-single", type=int, default=200)
    ap.add_argument("--n-check", type=int, default=60)
    ap.add_argument("--out-json")
    ap.add_argument("--compare")
    ap.add_argument("--skip-space", action="store_true")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    from hydra_opt.evaluate import Scenario
    from hydra_opt.evaluate.estimator import estimate, space_arrays
    from hydra_opt.system.space import paper_space
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import load_workload

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    load0 = _load()
    model, wl = load_model("llama-3-8b"), load_workload("arxiv")
    opts = Scenario(horizon_s=60.0)
    designs = list(paper_space("llama3"))
    pick = [designs[i] for i in np.random.default_rng(0).choice(len(designs), args.n_single, replace=False)]
    estimate(pick[0], model, wl, scenario=opts)
    single_runs, single_cpu = [], []
    for _ in range(args.runs):
        ts, cs = [], []
        for d in pick:
            t, c = time.perf_counter(), time.process_time()
            estimate(d, model, wl, scenario=opts)
            ts.append(time.perf_counter() - t)
            cs.append(time.process_time() - c)
        single_runs.append(float(np.median(ts)) * 1e3)
        single_cpu.append(float(np.mean(cs)) * 1e3)
    print(f"single warm: medians per run {['%.3f' % x for x in single_runs]} ms", flush=True)
    vec_runs, vec_cpu = [], []
    if not args.skip_space:
        for _ in range(args.runs):
            t, c = time.perf_counter(), time.process_time()
            space_arrays(designs, model, wl, scenario=opts)
            vec_runs.append(time.perf_counter() - t)
            vec_cpu.append(time.process_time() - c)
        print(f"vectorised 5,040: {['%.2f' % x for x in vec_runs]} s", flush=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    cold = [float(subprocess.run([sys.executable, "-c", COLD], env=env, capture_output=True, text=True,
                                 check=True).stdout.strip().splitlines()[-1]) for _ in range(args.runs)]
    print(f"cold first call: {['%.3f' % x for x in cold]} s", flush=True)
    fp = fingerprint(args.n_check)
    if args.out_json:
        Path(args.out_json).write_text(json.dumps(fp))
    load1 = _load()
    lines = [
        f"## {args.label} (commit {commit}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"`python benchmarks/estimator_solver.py --label {args.label} --runs {args.runs} --n-single {args.n_single}"
        f" --n-check {args.n_check}` — load average (1 min) {load0:.2f} at start, {load1:.2f} at end (2 cores "
        "shared).",
        "",
        f"* single `estimate()` warm, Llama-3-8B/arxiv, {args.n_single} designs: median per design "
        f"**{np.median(single_runs):.3f} ms** wall (runs: {', '.join('%.3f' % x for x in single_runs)} ms; target ≤ 0.2 ms); "
        f"mean CPU time per design {np.median(single_cpu):.3f} ms (median over runs; the wall median hides the tail, "
        "the CPU mean does not)",
    ]
    if vec_runs:
        lines.append(f"* vectorised `space_arrays()`, {len(designs):,} designs: median **{np.median(vec_runs):.2f} s**"
                     f" = {np.median(vec_runs) / len(designs) * 1e3:.3f} ms per design (runs: "
                     f"{', '.join('%.2f' % x for x in vec_runs)} s; target ≤ 1 s); CPU time median "
                     f"{np.median(vec_cpu):.2f} s = {np.median(vec_cpu) / len(designs) * 1e3:.3f} ms per design")
    lines.append(f"* cold first call (fresh process, workload preparation included): median **{np.median(cold):.3f} s**"
                 f" (runs: {', '.join('%.3f' % x for x in cold)} s; target ≤ 0.2 s)")
    if args.compare:
        n, diff, worst, where = compare(json.loads(Path(args.compare).read_text()), fp)
        lines.append(f"* outputs vs `{Path(args.compare).name}` ({args.n_check} designs × {len(CASES)} cases, every "
                     f"field of the single path's Estimate and the vectorised arrays): {diff} of {n} fields differ"
                     f" bit for bit; largest relative difference {worst:.3g}")
        lines += [f"  * {w}" for w in where]
    text = "\n".join(lines) + "\n"
    print(text)
    out = ROOT / "benchmarks" / "results" / "estimator_solver.md"
    head = "# Estimator solver: one implementation, speed (issue 18 item 3, issue 16 step 3)\n\n"
    old = out.read_text() if out.exists() else head
    out.write_text(old + ("\n" if not old.endswith("\n\n") else "") + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
