"""Simulator speed benchmark (issue 4 "Speed"): Nemotron-H-4B, CHAT, paper preset, a 24-chiplet Fig. 10 design.

Measures, in one process (imports and the first placement are warmed up first and not timed):

* wall time of ``simulate()`` for 100 simulated seconds (median of ``--repeats`` runs), events and events/s;
* the cost ratio when the number of requests doubles (2,500 → 5,000 requests, same 100 s horizon);
* peak memory (``ru_maxrss`` of the process, and the tracemalloc peak of one run);
* the speed-up over the HYDRA artifact's 171–747 s per 100 simulated seconds (METHODS §2h);
* a CPU calibration (a fixed pure-Python loop) so numbers from loaded or slow machines can be compared.

Usage::

    python benchmarks/sim_speed.py [--repeats 5] [--seconds 100] [--design PATH] [--sharing equal]

Writes ``benchmarks/results/sim_speed.md`` and ``sim_speed.csv``.
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DESIGN = ROOT / "studies/designs/fig10-nemotron-h-4b-chat-mt-cp.yaml"
ARTIFACT_S = (171.0, 747.0)


def calibrate() -> float:
    """Seconds for 10 million ``s += i`` iterations (≈ 0.3–0.5 s on an unloaded 2023 laptop, CPython 3.11)."""
    t = time.perf_counter()
    s = 0
    for i in range(10_000_000):
        s += i
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=100.0)
    ap.add_argument("--design", default=str(DEFAULT_DESIGN))
    ap.add_argument("--model", default="nemotron-h-4b")
    ap.add_argument("--workload", default="hydra-chat")
    ap.add_argument("--sharing", default=None, help="override SimOptions.sharing")
    ap.add_argument("--fuse", action="store_true", help="SimOptions.fuse_blocks=True (docs/simulator.md)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results"))
    args = ap.parse_args()

    from hydra_opt.evaluate import Scenario, SimOptions, simulate
    from hydra_opt.evaluate.simulator import compiled_modules

    extra = {"sharing": args.sharing} if args.sharing else {}
    if args.fuse:
        extra["fuse_blocks"] = True
    calib_before = calibrate()
    simulate(args.design, args.model, args.workload, scenario=Scenario.paper(horizon_s=0.2), options=SimOptions(**extra))  # warm-up

    def run(n_requests: int):
        scn = Scenario.paper(horizon_s=args.seconds, n_requests=n_requests)
        t, c = time.perf_counter(), time.process_time()
        res = simulate(args.design, args.model, args.workload, scenario=scn, options=SimOptions(**extra))
        cpus.append(time.process_time() - c)
        return time.perf_counter() - t, res

    cpus: list[float] = []  # CPU seconds of each run (less sensitive than wall time to other jobs on the machine)

    rows = []
    walls = []
    for i in range(args.repeats):
        wall, res = run(5000)
        walls.append(wall)
        rows.append(("5000", i, wall, res.wall_s, res.events, res.tokens_emitted, res.throughput_tok_s,
                     res.ttft_mean_s))
        print(f"run {i}: {wall:.2f} s wall ({res.wall_s:.2f} s in the event loop), {res.events} events, "
              f"{res.throughput_tok_s:.1f} tok/s, TTFT {res.ttft_mean_s:.3f} s", flush=True)
    half = []
    for i in range(max(1, args.repeats // 2)):
        wall, res = run(2500)
        half.append(wall)
        rows.append(("2500", i, wall, res.wall_s, res.events, res.tokens_emitted, res.throughput_tok_s,
                     res.ttft_mean_s))
        print(f"half run {i}: {wall:.2f} s wall, {res.events} events", flush=True)
    tracemalloc.start()
    _, res = run(5000)
    _, peak_traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    maxrss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    calib_after = calibrate()

    med = statistics.median(walls)
    med_cpu = statistics.median(cpus[: args.repeats])
    med_half = statistics.median(half)
    events = rows[0][4]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / f"sim_speed{'_fuse' if args.fuse else ''}.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["requests", "repeat", "wall_s", "loop_wall_s", "events", "tokens", "throughput_tok_s", "ttft_mean_s"])
        w.writerows(rows)
    calib = statistics.mean([calib_before, calib_after])
    md = f"""# Simulator speed (benchmarks/sim_speed.py)

Command: `python benchmarks/sim_speed.py --repeats {args.repeats} --seconds {args.seconds:g}{" --fuse" if args.fuse else ""}`
{f"(sharing = {args.sharing})" if args.sharing else ""}

Design `{Path(args.design).name}` (24 chiplets, from the artifact's fig10_configurations.csv), model
`{args.model}`, workload `{args.workload}`, `Scenario.paper(horizon_s={args.seconds:g})`
(5,000 requests at fixed 10 ms arrivals, int8, TTFT from batch start, whole-run throughput).

| metric | value |
|---|---|
| wall per {args.seconds:g} simulated s, median of {args.repeats} | {med:.2f} s (runs: {", ".join(f"{w:.2f}" for w in walls)}) |
| CPU time per {args.seconds:g} simulated s, median of {args.repeats} | {med_cpu:.2f} s (runs: {", ".join(f"{c:.2f}" for c in cpus[: args.repeats])}) |
| events | {events} ({events / med:,.0f} events/s) |
| simulated throughput / TTFT | {rows[0][6]:.1f} tok/s / {rows[0][7]:.3f} s |
| cost ratio 5,000 vs 2,500 requests | {med / med_half:.2f}× ({med:.2f} s / {med_half:.2f} s) |
| peak memory | {maxrss_mib:.0f} MiB process max RSS; {peak_traced / 2**20:.1f} MiB traced peak of one run |
| speed-up vs the artifact's 171–747 s | {ARTIFACT_S[0] / med:.0f}×–{ARTIFACT_S[1] / med:.0f}× |
| CPU calibration (10M-iteration Python loop) | {calib:.2f} s (before {calib_before:.2f} s, after {calib_after:.2f} s) |
| python | {sys.version.split()[0]} on {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} |
| compiled simulator modules (setup.py) | {", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in compiled_modules().items())} |

The calibration loop takes ≈ 0.3–0.5 s on an unloaded laptop; wall times scale roughly with it.
"""
    (out / f"sim_speed{'_fuse' if args.fuse else ''}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
