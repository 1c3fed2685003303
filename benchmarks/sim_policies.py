"""Policy directions (issue 4): placement CP vs round-robin, elastic vs static scheduling, continuous vs static
batching, on Nemotron-H-4B Fig. 10 designs under the paper preset (saturation: 100 req/s offered).

Each comparison keeps the design and changes one policy. Usage::

    python benchmarks/sim_policies.py [--seconds 30] [--designs chat-mt-cp,arxiv-bstar-cp]

Writes ``benchmarks/results/sim_policies.md`` and ``sim_policies.csv``.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = {"chat": "hydra-chat", "arxiv": "hydra-arxiv", "bwb": "hydra-bwb", "lw": "hydra-longwriter"}
VARIANTS = {
    "baseline (design: cp, static, static)": {},
    "placement rr": {"placement": "rr"},
    "placement random": {"placement": "random"},
    "scheduler elastic": {"scheduler": "elastic"},
    "scheduler elastic + lending": {"scheduler": "elastic", "lend": True},
    "batching continuous": {"batching": "continuous"},
    "continuous + elastic": {"batching": "continuous", "scheduler": "elastic"},
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--designs", default="chat-mt-cp,chat-bstar-cp,arxiv-bstar-cp")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results"))
    ap.add_argument("--preset", choices=("paper", "clean"), default="paper",
                    help="simulator options: the paper preset, or the clean defaults (Poisson/trace arrivals, "
                         "TTFT from arrival, windowed throughput, workload-context placement)")
    ap.add_argument("--variants", default="", help="comma-separated prefixes of variant names to run (default: all)")
    args = ap.parse_args()

    from hydra_opt.evaluate import Scenario, simulate
    from hydra_opt.system.design import OVERRIDE_KEYS, load_design

    wanted = {v.strip() for v in args.variants.split(",") if v.strip()}
    rows = []
    suffix = "" if args.preset == "paper" else "_clean"
    for tag in args.designs.split(","):
        path = ROOT / f"studies/designs/fig10-nemotron-h-4b-{tag}.yaml"
        wl = WORKLOAD[tag.split("-")[0]]
        for name, over in VARIANTS.items():
            if wanted and not any(name.startswith(w) for w in wanted):
                continue
            t = time.perf_counter()
            scn = {k: v for k, v in over.items() if k not in OVERRIDE_KEYS}
            scn = Scenario.paper(horizon_s=args.seconds, **scn) if args.preset == "paper" else Scenario(
                horizon_s=args.seconds, **scn)
            design = load_design(path).with_overrides({k: v for k, v in over.items() if k in OVERRIDE_KEYS})
            r = simulate(design, "nemotron-h-4b", wl, scenario=scn)
            rows.append([tag, wl, name, r.throughput_tok_s, r.ttft_mean_s, r.completed_requests, r.preemptions,
                         sum(r.chiplet_busy_frac) / len(r.chiplet_busy_frac), time.perf_counter() - t])
            print(rows[-1], flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    head = ["design", "workload", "variant", "throughput_tok_s", "ttft_mean_s", "completed", "preemptions",
            "mean_busy_frac", "wall_s"]
    with open(out / f"sim_policies{suffix}.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(head)
        w.writerows(rows)
    lines = [
        "# Policy directions on Nemotron-H-4B (benchmarks/sim_policies.py)",
        "",
        f"Command: `python benchmarks/sim_policies.py --seconds {args.seconds:g} --designs {args.designs}"
        + (f" --preset {args.preset}" if args.preset != "paper" else "")
        + (f" --variants '{args.variants}'" if wanted else "") + "`; "
        + ("paper preset (fixed 10 ms arrivals, int8, TTFT from batch start, whole-run throughput, the artifact's "
           "placement) with the horizon shortened to the value given."
           if args.preset == "paper" else
           "clean simulator options (the workload's own arrivals, TTFT from arrival, windowed throughput; CP "
           "placement sized for the workload's mean prompt + output context, traffic-balanced).")
        + " One policy changed at a time from the Fig. 10 design's own (cp/static/static).",
        "",
        "| design | workload | variant | throughput (tok/s) | TTFT mean (s) | completed | preemptions | mean busy | wall (s) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:.3f} | {r[5]} | {r[6]} | {r[7]:.1%} | {r[8]:.1f} |")
    (out / f"sim_policies{suffix}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
