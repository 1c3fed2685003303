"""All of issue 18's speed figures in one run: simulator cost per event by policy, the loop over a bare heapq
loop, callgrind instructions per event, and the estimator (issue 18 item 5).

Simulator (Fig. 10 CHAT M_T CP design, Nemotron-H-4B, ``hydra-chat``, ``Scenario.paper(horizon_s=--seconds)``),
for static+static, static+elastic, continuous+static, continuous+elastic and chunked+elastic (batching +
scheduling), interleaved in one process so every repeat sees the same load:

* **CPU s / 100 simulated s**: ``time.process_time`` of the whole ``simulate()`` call (set-up included), scaled to
  100 simulated seconds;
* **µs/event**: the event loop's wall time (``SimResult.wall_s``, set-up excluded) over ``SimResult.events``;
* **/ static+static**: per repeat, a policy's µs/event over static+static's of the same repeat, median of the
  repeats (runs seconds apart: the ratio cancels most of the load);
* **heapq floor**: ``sim_policy_speed.heapq_floor`` — a bare ``heapq`` loop popping and pushing as many event
  tuples as the static+static run has events on a heap of 2 × chiplets entries; **loop / floor** is static+static's
  µs/event over it (median of per-repeat ratios).

``--instructions`` (slow, needs valgrind and the compiled engine) adds callgrind instructions per event inside
``Engine._loop`` (load-independent) for each policy, the inclusive share of the loop's parts, and the heapq floor's
instructions per event (the difference of two callgrind runs of the floor: ``n`` events and 0 events).

Estimator (Llama-3-8B space, ``arxiv``, horizon 60 s, as ``benchmarks/estimator_solver.py``; its public entry
points ``estimate`` and ``space_arrays`` only): warm single ``estimate()`` ms per design (median over designs,
median over runs), cold first call s (fresh process, ``estimator_solver.COLD``), and the 5,040-design
``space_arrays()`` wall s (median of runs).

Usage::

    python benchmarks/speed.py [--repeats 5] [--seconds 100] [--instructions] [--ins-seconds SECONDS]
    python benchmarks/speed.py --quick          # smoke test: 1 repeat, 1 simulated s, small estimator sample

Prints the table with the load (``os.getloadavg``) and the commit; writes ``benchmarks/results/speed.md`` (not in
``--quick`` mode unless ``--out`` is given).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
# The checkout whose hydra_opt is measured: this one, or ``--tree DIR`` (e.g. a build of the code before a change).
_TREE = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--tree=")), str(ROOT))
sys.path.insert(0, _TREE)

import sim_policy_speed as sps  # noqa: E402  (benchmarks/ is not a package)

sps.ROOT = Path(_TREE)  # its callgrind children import hydra_opt from there too

POLICIES = (("static", "static"), ("static", "elastic"), ("continuous", "static"), ("continuous", "elastic"),
            ("chunked", "elastic"))
MODEL, WORKLOAD = "nemotron-h-4b", "hydra-chat"


def _name(p: tuple[str, str]) -> str:
    return f"{p[0]}+{p[1]}"


def _load() -> str:
    a = os.getloadavg()
    return f"{a[0]:.2f}/{a[1]:.2f}/{a[2]:.2f}"


def sim_figures(seconds: float, repeats: int) -> dict:
    """Per policy: CPU s per 100 simulated s, loop µs/event and per-event ratio to static+static; the heapq floor."""
    from hydra_opt.evaluate import simulate

    simulate(model=MODEL, workload=WORKLOAD, **sps._run(0.2, "static", "static"))  # warm-up (imports, caches)
    cpu = {p: [] for p in POLICIES}
    us = {p: [] for p in POLICIES}
    events: dict = {}
    floor_us: list[float] = []
    for i in range(repeats):
        for p in POLICIES:
            c = time.process_time()
            r = simulate(model=MODEL, workload=WORKLOAD, **sps._run(seconds, *p))
            cpu[p].append((time.process_time() - c) * 100.0 / seconds)
            us[p].append(1e6 * r.wall_s / r.events)
            events[p] = r.events
        n = events[POLICIES[0]]
        floor_us.append(1e6 * sps.heapq_floor(n, 2 * 24) / n)
        print(f"repeat {i}: " + ", ".join(f"{_name(p)} {us[p][-1]:.2f}" for p in POLICIES)
              + f", heapq {floor_us[-1]:.3f} µs/event", flush=True)
    base = us[POLICIES[0]]
    return {
        "events": events, "cpu": cpu, "us": us, "floor_us": floor_us,
        "ratio": {p: statistics.median(a / b for a, b in zip(us[p], base)) for p in POLICIES},
        "floor_ratio": statistics.median(a / b for a, b in zip(base, floor_us)),
    }


def _floor_child(n: int) -> None:
    sps.heapq_floor(n, 2 * 24)


def floor_instructions(n: int) -> float | None:
    """Instructions per event of the bare heapq loop: callgrind totals of ``n`` events minus 0 events, over ``n``."""
    vg = shutil.which("valgrind")
    if vg is None:
        return None
    totals = []
    for k in (n, 0):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "cg.out"
            p = subprocess.run([vg, "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
                                "--floor-child", str(k)], capture_output=True, text=True, cwd=ROOT,
                               env=dict(os.environ, PYTHONHASHSEED="0"))
            m = re.search(r"Collected : (\d+)", p.stderr)
            if p.returncode or m is None:
                return None
            totals.append(int(m.group(1)))
    return (totals[0] - totals[1]) / n


def callgrind_figures(args) -> tuple[dict, float | None]:
    """Instructions per event of every policy and of the heapq floor; ``--jobs`` callgrind processes at once (each
    is single-threaded and its counts do not depend on the load)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        got = dict(zip(POLICIES, pool.map(lambda p: sps.instructions(args.ins_seconds, *p), POLICIES)))
    base = got.get(POLICIES[0])
    return got, floor_instructions(base[0]) if base else None


def estimator_figures(runs: int, n_single: int, n_space: int | None) -> dict:
    """Warm single ms/design, cold first call s, and the Llama-3 space wall s (``estimator_solver``'s protocol)."""
    import numpy as np

    import estimator_solver as es
    from hydra_opt.evaluate import Scenario
    from hydra_opt.evaluate.estimator import estimate, space_arrays
    from hydra_opt.system.space import paper_space
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import load_workload

    warnings.filterwarnings("ignore")
    model, wl = load_model("llama-3-8b"), load_workload("arxiv")
    scn = Scenario(horizon_s=60.0)
    designs = list(paper_space("llama3"))
    pick = [designs[i] for i in np.random.default_rng(0).choice(len(designs), n_single, replace=False)]
    estimate(pick[0], model, wl, scenario=scn)
    single = []
    for _ in range(runs):
        ts = []
        for d in pick:
            t = time.perf_counter()
            estimate(d, model, wl, scenario=scn)
            ts.append(time.perf_counter() - t)
        single.append(1e3 * statistics.median(ts))
    space = designs if n_space is None else designs[:n_space]
    space_s = []
    for _ in range(runs):
        t = time.perf_counter()
        space_arrays(space, model, wl, scenario=scn)
        space_s.append(time.perf_counter() - t)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([_TREE, os.environ.get("PYTHONPATH", "")]))
    cold = [float(subprocess.run([sys.executable, "-c", es.COLD], env=env, capture_output=True, text=True, cwd=_TREE,
                                 check=True).stdout.strip().splitlines()[-1]) for _ in range(runs)]
    return {"single_ms": single, "space_s": space_s, "n_space": len(space), "cold_s": cold, "n_single": n_single}


def _runs(xs, fmt: str) -> str:
    return ", ".join(fmt % x for x in xs)


def report(args, sim: dict, ins: dict, floor_ins: float | None, est: dict | None, commit: str, loads: tuple) -> str:
    """The markdown table of every figure."""
    from hydra_opt.evaluate.simulator import compiled_modules

    med = statistics.median
    cmd = (f"python benchmarks/speed.py --repeats {args.repeats} --seconds {args.seconds:g}"
           + (f" --instructions --ins-seconds {args.ins_seconds:g}" if args.instructions else "")
           + (" --quick" if args.quick else ""))
    lines = [
        "# Speed figures of issue 18 (benchmarks/speed.py)",
        "",
        f"Command: `{cmd}`",
        "",
        f"Commit `{commit}`{'' if _TREE == str(ROOT) else f' (hydra_opt from {_TREE})'}; compiled simulator "
        f"modules {compiled_modules()}; python {sys.version.split()[0]} on "
        f"{os.cpu_count()} CPUs; load average (1/5/15 min) {loads[0]} at start, {loads[1]} at end; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        f"## Simulator: `{sps.DESIGN.name}`, {MODEL}, {WORKLOAD}, paper preset, {args.seconds:g} simulated s",
        "",
        f"Medians of {args.repeats} interleaved repeats. CPU s / 100 simulated s: `process_time` of `simulate()` "
        "(set-up included) × 100 / simulated s. µs/event: event-loop wall time over events. Ratio: per repeat over "
        "static+static, median.",
        "",
        "| batching + scheduling | events | CPU s / 100 simulated s | µs/event | per event / static+static |"
        + (" instructions/event (callgrind) | instructions / static+static |" if ins else ""),
        "|---|---:|---:|---:|---:|" + ("---:|---:|" if ins else ""),
    ]
    b_ins = ins.get(POLICIES[0]) if ins else None
    for p in POLICIES:
        row = (f"| {_name(p)} | {sim['events'][p]:,} | {med(sim['cpu'][p]):.2f} | {med(sim['us'][p]):.2f} | "
               f"{sim['ratio'][p]:.2f}× |")
        if ins:
            got = ins.get(p)
            if got is None or b_ins is None:
                row += " n/a | n/a |"
            else:
                row += f" {got[1] / got[0]:,.0f} | {(got[1] / got[0]) / (b_ins[1] / b_ins[0]):.2f}× |"
        lines.append(row)
    lines += [
        "",
        f"* bare heapq floor ({sim['events'][POLICIES[0]]:,} pop+push on 48 entries): "
        f"{med(sim['floor_us']):.3f} µs/event (runs {_runs(sim['floor_us'], '%.3f')})"
        + (f"; {floor_ins:,.0f} instructions/event (callgrind, pure Python heapq)" if floor_ins else ""),
        f"* **loop / heapq floor** (static+static µs/event over the floor's, median of per-repeat ratios): "
        f"**{sim['floor_ratio']:.2f}×**"
        + (f"; in instructions: **{(b_ins[1] / b_ins[0]) / floor_ins:.2f}×**" if b_ins and floor_ins else ""),
        "* runs (µs/event): " + "; ".join(f"{_name(p)} {_runs(sim['us'][p], '%.2f')}" for p in POLICIES),
    ]
    if ins and b_ins:
        lines += [
            "",
            f"### Where the loop's instructions go (callgrind, `Engine._loop`, {args.ins_seconds:g} simulated s)",
            "",
            "Inclusive instructions per event of the loop's parts (they nest: the flow model runs inside task starts "
            "and ends, pass boundaries include the next pass's first tasks).",
            "",
            "| batching + scheduling | events | " + " | ".join(sps.PARTS) + " |",
            "|---|---:|" + "---:|" * len(sps.PARTS),
        ]
        for p in POLICIES:
            got = ins.get(p)
            if got is None:
                continue
            ev, tot, parts = got
            lines.append(f"| {_name(p)} | {ev:,} | "
                         + " | ".join(f"{parts[k] / ev:,.0f} ({100 * parts[k] / tot:.0f} %)" for k in sps.PARTS) + " |")
    if est:
        lines += [
            "",
            "## Estimator (Llama-3-8B space, arxiv, horizon 60 s; `estimator_solver.py`'s protocol)",
            "",
            f"* warm single `estimate()`: **{med(est['single_ms']):.3f} ms/design** (median over {est['n_single']} "
            f"designs, median of runs {_runs(est['single_ms'], '%.3f')}; target ≤ 0.2 ms)",
            f"* cold first call (fresh process): **{med(est['cold_s']):.3f} s** (runs {_runs(est['cold_s'], '%.3f')}; "
            "target ≤ 0.2 s)",
            f"* `space_arrays()` of {est['n_space']:,} designs: **{med(est['space_s']):.2f} s wall** "
            f"(runs {_runs(est['space_s'], '%.2f')}; target ≤ 1 s for 5,040)",
        ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=100.0, help="simulated seconds per timed run")
    ap.add_argument("--instructions", action="store_true", help="also count instructions with callgrind (slow)")
    ap.add_argument("--ins-seconds", type=float, default=None,
                    help="simulated seconds of the callgrind runs (default: --seconds, the timed runs' simulation: "
                         "the event mix changes over a run, 12 s and 30 s differ by up to 0.3x in the ratios)")
    ap.add_argument("--jobs", type=int, default=1, help="callgrind processes run at once")
    ap.add_argument("--skip-estimator", action="store_true")
    ap.add_argument("--quick", action="store_true", help="smoke test: 1 repeat, 1 simulated s, small estimator set")
    ap.add_argument("--out", help="markdown output file, a path (relative to the current directory; default benchmarks/results/speed.md; none with --quick)")
    ap.add_argument("--tree", help="measure the hydra_opt of another checkout (give it as --tree=DIR)")
    ap.add_argument("--floor-child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.floor_child is not None:
        _floor_child(args.floor_child)
        return 0
    if args.quick:
        args.repeats, args.seconds, args.ins_seconds = 1, 1.0, 0.5
    if args.ins_seconds is None:
        args.ins_seconds = args.seconds
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=_TREE).stdout.strip() or f"tree {_TREE}"
    load0 = _load()
    sim = sim_figures(args.seconds, args.repeats)
    ins, floor_ins = callgrind_figures(args) if args.instructions else ({}, None)
    est = None
    if not args.skip_estimator:
        est = (estimator_figures(1, 10, 50) if args.quick else estimator_figures(max(5, args.repeats), 200, None))
    md = report(args, sim, ins, floor_ins, est, commit, (load0, _load()))
    print(md)
    out = args.out or (None if args.quick else str(ROOT / "benchmarks/results/speed.md"))
    if out:
        Path(out).write_text(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
