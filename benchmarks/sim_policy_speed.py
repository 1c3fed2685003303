"""Simulator cost per event by policy, and the event loop against a bare heapq loop (issue 18 items 1, 2, 5).

Fig. 10 CHAT M_T CP design, Nemotron-H-4B, paper preset. In one process, interleaved so that every repeat sees the
same machine load, for static+static, static+elastic, continuous+static and continuous+elastic:

* **µs per event**: the event loop's wall time (``SimResult.wall_s``, set-up excluded) over its events;
* **ratio to static+static**: per repeat, a policy's µs/event over static+static's of the same repeat; the median
  of those ratios is quoted (a ratio of runs seconds apart cancels most of the load);
* **heapq floor**: a bare ``heapq`` loop popping and pushing as many ``(time, seq, kind, obj, ver)`` entries as the
  static run has events, on a heap of ``2 × chiplets`` entries (the events the loop must at least order); the
  static path's µs/event over it is the "loop / floor" ratio.

With ``--instructions`` each policy also runs once under ``valgrind --tool=callgrind`` (instructions counted only
inside ``Engine._loop``; needs the compiled engine): instructions per event do not depend on the load, and the
inclusive share of the loop's parts (flow model, event heap, pass boundaries, scheduling) says where the time goes.

Usage::

    python benchmarks/sim_policy_speed.py [--repeats 5] [--seconds 30] [--instructions] [--ins-seconds 12]

Writes ``benchmarks/results/sim_policy_speed.md`` and ``sim_policy_speed.csv``.
"""

from __future__ import annotations

import argparse
import csv
import heapq
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "studies/designs/fig10-nemotron-h-4b-chat-mt-cp.yaml"
POLICIES = (("static", "static"), ("static", "elastic"), ("continuous", "static"), ("continuous", "elastic"))
LOOP_SYMBOL = "__pyx_f_9hydra_opt_8evaluate_9simulator_6engine_6Engine__loop"
# Parts of the loop reported from callgrind (inclusive instructions; they nest, so shares do not add up to 100 %).
PARTS = {
    "flow model (flows.start + flows.finish)": ("EqualShareFlows_start", "EqualShareFlows_finish"),
    "event heap (_hpush + _hpop + _hmove)": ("Engine__hpush", "Engine__hpop", "Engine__hmove"),
    "pass boundaries (_end_part: tokens, batching, next pass)": ("Engine__end_part",),
    "scheduling (_el_choose + _el_steal)": ("Engine__el_choose", "Engine__el_steal"),
}


def heapq_floor(n_events: int, size: int) -> float:
    """Seconds for ``n_events`` pop+push pairs of event tuples on a heap of ``size`` entries."""
    rng = random.Random(0)
    h = [(rng.random(), i, 0, None, 0) for i in range(size)]
    heapq.heapify(h)
    pop, push = heapq.heappop, heapq.heappush
    seq = size
    t0 = time.perf_counter()
    for _ in range(n_events):
        t, _, kind, obj, ver = pop(h)
        seq += 1
        push(h, (t + rng.random(), seq, kind, obj, ver))
    return time.perf_counter() - t0


def _run(seconds: float, batching: str, scheduler: str) -> dict:
    """``simulate`` keywords: the design with the policies, the paper scenario at ``seconds``."""
    from hydra_opt.evaluate import Scenario
    from hydra_opt.system.design import load_design

    return dict(design=load_design(DESIGN).with_overrides({"batching": batching, "scheduler": scheduler}),
                scenario=Scenario.paper(horizon_s=seconds))


def _one_run(seconds: float, batching: str, scheduler: str) -> None:
    """Child process of ``--instructions``: one simulation, prints its event count."""
    from hydra_opt.evaluate import simulate

    r = simulate(model="nemotron-h-4b", workload="hydra-chat", **_run(seconds, batching, scheduler))
    print(f"EVENTS {r.events}")


def instructions(seconds: float, batching: str, scheduler: str) -> tuple[int, int, dict[str, int]] | None:
    """(events, instructions in the loop, inclusive instructions per part) from callgrind, or None."""
    vg, ann = shutil.which("valgrind"), shutil.which("callgrind_annotate")
    if vg is None or ann is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        cmd = [vg, "--tool=callgrind", "--collect-atstart=no", f"--toggle-collect={LOOP_SYMBOL}",
               f"--callgrind-out-file={out}", sys.executable, __file__, "--child", str(seconds), batching, scheduler]
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
        m = re.search(r"EVENTS (\d+)", p.stdout)
        if p.returncode or m is None or not out.exists():
            return None
        txt = subprocess.run([ann, "--auto=no", "--inclusive=yes", str(out)], capture_output=True, text=True).stdout
    total = 0
    incl: dict[str, int] = {}
    for line in txt.splitlines():
        mm = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S.*)$", line)
        if not mm:
            continue
        n = int(mm.group(1).replace(",", ""))
        name = mm.group(2)
        if "PROGRAM TOTALS" in name:
            total = n
        for part, syms in PARTS.items():
            for s in syms:
                if name.split("[")[0].rstrip().endswith(s) and "'" not in name.split("[")[0]:
                    incl[f"{part}|{s}"] = max(incl.get(f"{part}|{s}", 0), n)
    parts = {part: sum(v for k, v in incl.items() if k.startswith(part + "|")) for part in PARTS}
    return int(m.group(1)), total, parts


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=30.0, help="simulated seconds per timed run")
    ap.add_argument("--instructions", action="store_true", help="also count instructions with callgrind")
    ap.add_argument("--ins-seconds", type=float, default=12.0, help="simulated seconds of the callgrind runs")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results"))
    ap.add_argument("--child", nargs=3, metavar=("SECONDS", "BATCHING", "SCHEDULER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _one_run(float(args.child[0]), args.child[1], args.child[2])
        return 0

    from hydra_opt.evaluate import simulate
    from hydra_opt.evaluate.simulator import compiled_modules

    load0 = os.getloadavg()
    simulate(model="nemotron-h-4b", workload="hydra-chat", **_run(0.2, "static", "static"))  # warm-up
    us: dict[tuple[str, str], list[float]] = {p: [] for p in POLICIES}
    events: dict[tuple[str, str], int] = {}
    floor_us: list[float] = []
    rows = []
    for i in range(args.repeats):
        for pol in POLICIES:
            r = simulate(model="nemotron-h-4b", workload="hydra-chat", **_run(args.seconds, *pol))
            us[pol].append(1e6 * r.wall_s / r.events)
            events[pol] = r.events
            rows.append([i, f"{pol[0]}+{pol[1]}", r.events, r.wall_s, us[pol][-1]])
        n = events[POLICIES[0]]
        floor_us.append(1e6 * heapq_floor(n, 2 * 24) / n)
        rows.append([i, "heapq floor", n, floor_us[-1] * n / 1e6, floor_us[-1]])
        print(f"repeat {i}: " + ", ".join(f"{p[0]}+{p[1]} {us[p][-1]:.2f}" for p in POLICIES)
              + f", heapq {floor_us[-1]:.3f} µs/event", flush=True)
    load1 = os.getloadavg()
    base = us[POLICIES[0]]
    ratio = {p: statistics.median([a / b for a, b in zip(us[p], base)]) for p in POLICIES}
    floor_ratio = statistics.median([a / b for a, b in zip(base, floor_us)])
    ins = {p: instructions(args.ins_seconds, *p) for p in POLICIES} if args.instructions else {}

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "sim_policy_speed.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["repeat", "policy", "events", "loop_wall_s", "us_per_event"])
        w.writerows(rows)
    lines = [
        "# Simulator cost per event by policy (benchmarks/sim_policy_speed.py)",
        "",
        f"Command: `python benchmarks/sim_policy_speed.py --repeats {args.repeats} --seconds {args.seconds:g}"
        + (f" --instructions --ins-seconds {args.ins_seconds:g}" if args.instructions else "") + "`",
        "",
        f"Commit `{_commit()}`; compiled modules {compiled_modules()}; python {sys.version.split()[0]} on "
        f"{os.cpu_count()} CPUs; load average (1/5/15 min) {load0[0]:.1f}/{load0[1]:.1f}/{load0[2]:.1f} before, "
        f"{load1[0]:.1f}/{load1[1]:.1f}/{load1[2]:.1f} after.",
        "",
        f"Design `{DESIGN.name}`, `nemotron-h-4b`, `hydra-chat`, `Scenario.paper(horizon_s={args.seconds:g})` with "
        "the batching and scheduling policies below. µs/event: event-loop wall time (`SimResult.wall_s`) over "
        "`SimResult.events`; ratio: per repeat over static+static of the same repeat, median of the repeats.",
        "",
        "| policy (batching + scheduling) | events | µs/event, median | runs (µs/event) | per event / static+static |",
        "|---|---:|---:|---|---:|",
    ]
    for p in POLICIES:
        lines.append(f"| {p[0]} + {p[1]} | {events[p]:,} | {statistics.median(us[p]):.2f} | "
                     f"{', '.join(f'{x:.2f}' for x in us[p])} | {ratio[p]:.2f}× |")
    lines += [
        f"| bare heapq loop, {events[POLICIES[0]]:,} pop+push on 48 entries | — | {statistics.median(floor_us):.3f} | "
        f"{', '.join(f'{x:.3f}' for x in floor_us)} | — |",
        "",
        f"**Loop / heapq floor** (static + static µs/event over the bare heapq loop's, median of the per-repeat "
        f"ratios): **{floor_ratio:.2f}×**.",
    ]
    if ins:
        lines += [
            "",
            f"## Instructions per event (callgrind, `Engine._loop` only, {args.ins_seconds:g} simulated s)",
            "",
            "Load-independent. Inclusive shares of the loop's parts (they nest: the flow model runs inside task "
            "starts and ends, pass boundaries include the next pass's first tasks).",
            "",
            "| policy | events | instructions/event | / static+static | "
            + " | ".join(PARTS) + " |",
            "|---|---:|---:|---:|" + "---:|" * len(PARTS),
        ]
        b = ins[POLICIES[0]]
        for p in POLICIES:
            got = ins[p]
            if got is None or b is None:
                lines.append(f"| {p[0]} + {p[1]} | (callgrind not available or the engine not compiled) |")
                continue
            ev, tot, parts = got
            lines.append(f"| {p[0]} + {p[1]} | {ev:,} | {tot / ev:,.0f} | {(tot / ev) / (b[1] / b[0]):.2f}× | "
                         + " | ".join(f"{parts[k] / ev:,.0f} ({100 * parts[k] / tot:.0f} %)" for k in PARTS) + " |")
    md = "\n".join(lines) + "\n"
    (out / "sim_policy_speed.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
