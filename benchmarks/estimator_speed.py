"""Estimator speed: the four figures of issue 18 item 3, medians of ``--runs`` runs, with load and commit.

Targets: warm single-design ``estimate()`` ≤ 0.2 ms per design; cold first call ≤ 0.2 s; the vectorised
``space_arrays`` over the 5,040-design Llama-3 space ≤ 1 s and over the 174,720-design Nemotron-H space ≤ 40 s.

    python benchmarks/estimator_speed.py [--runs 5] [--n-single 200] [--nemotron-stride 35] [--nemotron-full]

What each figure is (horizon 60 s, int8, the paper spaces' default policies: CP placement, static batching and
scheduling):

* **warm single**: ``estimate()`` of ``--n-single`` random designs of the Llama-3 space on arxiv, each once per run,
  after one warm-up call that prepared the workload (the per-workload preparation is cached; per-chiplet-type
  tables are cached as designs come). Per-design median of each run; the figure is the median over runs (the first
  run, which fills the type tables, is printed too).
* **cold first call**: a fresh process (model, workload and design objects already loaded) times its first
  ``estimate()``, workload preparation and chiplet library included; median over ``--runs`` processes.
* **Llama-3 space**: a fresh process times one ``space_arrays()`` over all 5,040 designs on arxiv (workload
  preparation, type tables and every solve included); wall and CPU time, median over ``--runs`` processes.
* **Nemotron-H space** (174,720 designs, arxiv): with ``--nemotron-full`` a fresh process times the whole space
  (``--nemotron-full-runs`` processes); always, a measured **stratified extrapolation**: every ``--nemotron-stride``-th
  design of the enumeration (which is ordered by memory count × composition × D2D bandwidth × batch, so the
  sample covers every stratum) in a fresh process, its time × (174,720 / sample size); median over ``--runs``.

The machine has 2 cores shared with other jobs: the load average (1 min) is recorded before and after, and CPU
time (``time.process_time``) is given next to wall time. Writes ``benchmarks/results/estimator_speed.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SETUP = """
import json, sys, time, warnings
warnings.filterwarnings("ignore")
from hydra_opt.evaluate import Scenario
from hydra_opt.evaluate.estimator import estimate, space_arrays
from hydra_opt.system.space import paper_space
from hydra_opt.workload.models import load_model
from hydra_opt.workload.workload import load_workload
"""
COLD = SETUP + """
m, w = load_model("llama-3-8b"), load_workload("arxiv")
d = next(iter(paper_space("llama3")))
o = Scenario(horizon_s=60.0)
t = time.perf_counter()
estimate(d, m, w, scenario=o)
print(json.dumps({"wall_s": time.perf_counter() - t}))
"""
SPACE = SETUP + """
space, model, stride = sys.argv[1], sys.argv[2], int(sys.argv[3])
designs = list(paper_space(space))[::stride]
m, w = load_model(model), load_workload("arxiv")
t, c = time.perf_counter(), time.process_time()
a = space_arrays(designs, m, w, scenario=Scenario(horizon_s=60.0))
print(json.dumps({"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c, "n": len(designs),
                  "serving": int((a["throughput_tok_s"] > 0).sum())}))
"""


def _load() -> float:
    return os.getloadavg()[0]


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + (" (+ uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def _fresh(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter from the repository root; its last stdout line is a JSON dict."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def warm_single(n: int, runs: int) -> tuple[list[float], list[float]]:
    """Per-run median wall and mean CPU time per design (s) of ``estimate()`` over ``n`` designs."""
    from hydra_opt.evaluate import Scenario
    from hydra_opt.evaluate.estimator import estimate
    from hydra_opt.system.space import paper_space
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import load_workload

    model, wl = load_model("llama-3-8b"), load_workload("arxiv")
    scn = Scenario(horizon_s=60.0)
    designs = list(paper_space("llama3"))
    pick = [designs[i] for i in np.random.default_rng(0).choice(len(designs), n, replace=False)]
    estimate(pick[0], model, wl, scenario=scn)
    medians, cpus = [], []
    for _ in range(runs):
        times = []
        c0 = time.process_time()
        for d in pick:
            t = time.perf_counter()
            estimate(d, model, wl, scenario=scn)
            times.append(time.perf_counter() - t)
        cpus.append((time.process_time() - c0) / n)
        medians.append(float(np.median(times)))
    return medians, cpus


def _ms(xs) -> str:
    return ", ".join(f"{x * 1e3:.3f}" for x in xs)


def _s(xs) -> str:
    return ", ".join(f"{x:.2f}" for x in xs)


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT))  # this checkout's package, not another one on the path
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--n-single", type=int, default=200)
    ap.add_argument("--nemotron-stride", type=int, default=35)
    ap.add_argument("--nemotron-full", action="store_true")
    ap.add_argument("--nemotron-full-runs", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "estimator_speed.md"))
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    try:
        from hydra_opt.evaluate._accel import compiled_modules

        compiled = compiled_modules("hydra_opt.evaluate.estimator")
    except ImportError:  # a checkout from before the compiled kernels (for before/after runs)
        compiled = {}
    load0, stamp, commit = _load(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), _commit()
    lines = ["# Estimator speed (issue 18 item 3)", "",
             f"Run {stamp} at commit {commit}; compiled estimator modules: {compiled}.", "",
             f"`python benchmarks/estimator_speed.py --runs {args.runs} --n-single {args.n_single} --nemotron-stride "
             f"{args.nemotron_stride}{' --nemotron-full' if args.nemotron_full else ''}` — horizon 60 s, int8, arxiv, "
             "the paper spaces' policies; load average (1 min) "
             f"{load0:.2f} at start (2 cores shared).", ""]

    def emit(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    med, cpu = warm_single(args.n_single, args.runs + 1)
    emit(f"* **warm single** `estimate()`, Llama-3-8B, {args.n_single} designs: median per design "
         f"**{np.median(med[1:]) * 1e3:.3f} ms** (runs: {_ms(med[1:])} ms; the first run, which also fills the type "
         f"tables: {med[0] * 1e3:.3f} ms); mean CPU time per design {np.median(cpu[1:]) * 1e3:.3f} ms — target ≤ 0.2 ms")
    cold = [_fresh(COLD)["wall_s"] for _ in range(args.runs)]
    emit(f"* **cold first call** (fresh process): median **{np.median(cold):.3f} s** (runs: {_s(cold)} s) "
         "— target ≤ 0.2 s")
    sp = [_fresh(SPACE, "llama3", "llama-3-8b", "1") for _ in range(args.runs)]
    emit(f"* **Llama-3 space**, `space_arrays()` of {sp[0]['n']:,} designs (fresh process, everything included): "
         f"median **{np.median([r['wall_s'] for r in sp]):.2f} s** wall (runs: {_s(r['wall_s'] for r in sp)} s), "
         f"CPU {np.median([r['cpu_s'] for r in sp]):.2f} s = {np.median([r['cpu_s'] for r in sp]) / sp[0]['n'] * 1e3:.3f}"
         f" ms per design; {sp[0]['serving']:,} designs serve tokens — target ≤ 1 s")
    total = 174_720
    st = [_fresh(SPACE, "nemotron_h", "nemotron-h-4b", str(args.nemotron_stride)) for _ in range(args.runs)]
    n_s = st[0]["n"]
    ext = [r["wall_s"] * total / n_s for r in st]
    ext_cpu = [r["cpu_s"] * total / n_s for r in st]
    emit(f"* **Nemotron-H space**, stratified extrapolation: every {args.nemotron_stride}th design ({n_s:,} of "
         f"{total:,}; fresh process) takes median {np.median([r['wall_s'] for r in st]):.2f} s wall; × {total / n_s:.1f}"
         f" = **{np.median(ext):.0f} s** wall (runs: {_s(ext)} s), CPU {np.median(ext_cpu):.0f} s = "
         f"{np.median(ext_cpu) / total * 1e3:.3f} ms per design — target ≤ 40 s (a measured extrapolation, not a "
         "full run)")
    if args.nemotron_full:
        full = [_fresh(SPACE, "nemotron_h", "nemotron-h-4b", "1") for _ in range(args.nemotron_full_runs)]
        emit(f"* **Nemotron-H space**, full: `space_arrays()` of {full[0]['n']:,} designs (fresh process): median "
             f"**{np.median([r['wall_s'] for r in full]):.0f} s** wall (runs: {_s(r['wall_s'] for r in full)} s), "
             f"CPU {np.median([r['cpu_s'] for r in full]):.0f} s; {full[0]['serving']:,} designs serve tokens "
             "— target ≤ 40 s")
    emit(f"* load average (1 min) at end: {_load():.2f}")
    Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
