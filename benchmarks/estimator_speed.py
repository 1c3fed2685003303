"""Estimator speed: single-design calls and the whole Llama-3-8B space (5,040 designs) for one dataset.

Targets (issue #5): median ≤ 2 ms per single-design call; all 5,040 designs in ≤ 10 s on one core.

    python benchmarks/estimator_speed.py [--dataset arxiv] [--n-single 200] [--horizon 60] [--n-ref 50] [--others 100]

Writes ``benchmarks/results/estimator_speed.md``. The machine's load is recorded next to the numbers (the
project's machine has 2 cores shared by several jobs, which inflates every timing), and CPU time
(``time.process_time``) is reported next to wall time. The single-design calls are first-time calls (each design
once, after one warm-up call that prepares the workload). (The reference array path this script compared with is
gone: the estimator has one solver since issue 16 step 3; ``benchmarks/estimator_solver.py`` measures it and
compares outputs across code versions.) ``--others N`` adds the same single-design figures (first call and repeated
call per design) for Mamba2,
Nemotron-H and continuous batching, N designs each, spread over the paper spaces' compositions.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="arxiv")
    ap.add_argument("--n-single", type=int, default=200)
    ap.add_argument("--horizon", type=float, default=60.0)
    ap.add_argument("--n-ref", type=int, default=50)
    ap.add_argument("--others", type=int, default=0)
    ap.add_argument("--skip-space", action="store_true")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    from hydra_opt.evaluate import Scenario
    from hydra_opt.evaluate.estimator import estimate, space_arrays
    from hydra_opt.system.space import paper_space
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import load_workload

    model = load_model("llama-3-8b")
    wl = load_workload(args.dataset)
    opts = Scenario(horizon_s=args.horizon)
    designs = list(paper_space("llama3"))
    rng = np.random.default_rng(0)
    pick = [designs[i] for i in rng.choice(len(designs), args.n_single, replace=False)]
    load0 = os.getloadavg()[0]
    estimate(pick[0], model, wl, scenario=opts)  # per-workload preparation (cached) is not per-design cost
    times, cpus = [], []
    for d in pick:
        t = time.perf_counter()
        c = time.process_time()
        estimate(d, model, wl, scenario=opts)
        times.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    times_ms = np.array(times) * 1e3
    cpu_ms = np.array(cpus) * 1e3
    lines = [
        "# Estimator speed",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        f"`python benchmarks/estimator_speed.py --dataset {args.dataset} --n-single {args.n_single} "
        f"--horizon {args.horizon:g} --n-ref {args.n_ref} --others {args.others}` (Llama-3-8B, int8, horizon "
        f"{args.horizon:g} s).",
        f"Machine load average at start: {load0:.2f} (2 cores shared).",
        "",
        f"* single-design `estimate()`: median {np.median(times_ms):.2f} ms, p90 {np.percentile(times_ms, 90):.2f} ms, "
        f"min {times_ms.min():.2f} ms over {len(times_ms)} designs; CPU time median {np.median(cpu_ms):.2f} ms, "
        f"p90 {np.percentile(cpu_ms, 90):.2f} ms (target: median ≤ 2 ms)",
    ]
    print("\n".join(lines[-2:]), flush=True)
    if not args.skip_space:
        t = time.perf_counter()
        cpu0 = time.process_time()
        a = space_arrays(designs, model, wl, scenario=opts)
        wall = time.perf_counter() - t
        cpu = time.process_time() - cpu0
        lines.append(
            f"* whole space `space_arrays()` ({len(designs)} designs, one dataset): {wall:.2f} s wall, "
            f"{cpu:.2f} s CPU (target ≤ 10 s); {int(np.sum(a['throughput_tok_s'] > 0))} designs serve tokens "
            "within the horizon"
        )
        print(lines[-1], flush=True)
    if args.others:
        lines += ["", f"Other models and batching ({args.others} designs each, horizon {args.horizon:g} s; "
                  "CPU time per design):", ""]
        lines += _others(args.others, args.horizon)
    lines.append(f"* load average at end: {os.getloadavg()[0]:.2f}")
    out = ROOT / "benchmarks" / "results" / "estimator_speed.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    return 0


def _others(n: int, horizon: float) -> list[str]:
    """Single-design medians for the other paper models and for continuous batching."""
    from hydra_opt.evaluate import Scenario
    from hydra_opt.evaluate.estimator import estimate
    from hydra_opt.system.space import paper_space
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import load_workload

    cases = [("mamba2-2.7b", "mamba2", "bwb", {}), ("nemotron-h-4b", "nemotron_h", "chat", {}),
             ("llama-3-8b", "llama3", "chat", {"batching": "continuous", "scheduler": "fcfs"}),
             ("nemotron-h-4b", "nemotron_h", "arxiv", {"batching": "continuous", "scheduler": "elastic"})]
    out = []
    for model_name, space_name, wl_name, policies in cases:
        model, wl = load_model(model_name), load_workload(wl_name)
        opts = Scenario(horizon_s=horizon)
        designs = paper_space(space_name).sample(n, 0, **policies)
        estimate(designs[0], model, wl, scenario=opts)
        first, again = [], []
        for runs in (first, again):
            for d in designs:
                c = time.process_time()
                estimate(d, model, wl, scenario=opts)
                runs.append(time.process_time() - c)
        out.append(
            f"* {model_name} on {wl_name}, {policies.get('batching', 'static')} batching: first call median "
            f"{np.median(first) * 1e3:.2f} ms (p90 {np.percentile(first, 90) * 1e3:.2f} ms), repeated call median "
            f"{np.median(again) * 1e3:.2f} ms"
        )
        print(out[-1], flush=True)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
