"""Simulated effect of the CP memory split (and of Eq. 1's KV context) versus round robin and random placement.

For Nemotron-H-4B Fig. 10 designs (``studies/designs/fig10-nemotron-h-4b-*.yaml``), simulates the ``hydra-chat``
workload (the artifact's CHAT trace, one request per 10 ms) for ``--seconds`` with the clean simulator options,
with CP placement under several ``split``/``context_tokens`` settings of ``hydra_opt.system.placement.place``
and with RR / random placement. Reports output-token throughput (tokens/s), mean link utilisation (fraction) and
the placement's byte-weighted mean hops.

Run: ``python benchmarks/placement_split_sim.py [--seconds 20]``; writes
``benchmarks/results/placement_split_sim.md``.
"""

from __future__ import annotations

import argparse
import functools
import time
from pathlib import Path

import hydra_opt.system.placement as placement
from hydra_opt.evaluate.simulator.driver import simulate_design
from hydra_opt.evaluate.simulator.options import SimOptions
from hydra_opt.system.design import load_design
from hydra_opt.workload.models import load_model

DESIGNS = ("lw-mt-cp", "bwb-mt-cp", "chat-bstar-cp", "arxiv-mt-cp")
# (label, policy, place() keyword overrides)
CONFIGS = (
    ("CP capacity, ctx = max_position (default)", "cp", {}),
    ("CP capacity, ctx 1024", "cp", {"context_tokens": 1024}),
    ("CP traffic, ctx = max_position", "cp", {"split": "traffic"}),
    ("CP traffic, ctx 1024", "cp", {"split": "traffic", "context_tokens": 1024}),
    ("RR", "rr", {}),
    ("random (seed 0)", "random", {}),
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--workload", default="hydra-chat")
    args = ap.parse_args()
    model = load_model("nemotron-h-4b")
    root = Path(__file__).resolve().parents[1]
    original = placement.place
    rows = []
    t0 = time.perf_counter()
    try:
        for name in DESIGNS:
            design = load_design(root / "studies" / "designs" / f"fig10-nemotron-h-4b-{name}.yaml")
            for label, policy, kw in CONFIGS:
                placement.place = functools.partial(original, **kw)
                d = design.replace(placement=policy)
                pl = original(d, model, **kw)
                res = simulate_design(d, model, args.workload, options=SimOptions(horizon_s=args.seconds))
                rows.append((name, design.n_mem, label, res.throughput_tok_s, res.link_util_mean, pl.mean_hops))
                print(rows[-1], flush=True)
    finally:
        placement.place = original
    lines = [
        f"# CP memory split vs RR/random in simulation (Nemotron-H-4B, {args.workload}, {args.seconds:g} s)",
        "",
        f"Command: `python benchmarks/placement_split_sim.py --seconds {args.seconds:g} --workload {args.workload}`"
        f" ({time.perf_counter() - t0:.0f} s wall). Clean simulator options (static batching and scheduler of the"
        " design files, equal-share NoI).",
        "",
        "| design | HBMs | placement | throughput (tokens/s) | mean link utilisation (fraction) | mean hops |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for name, n_mem, label, tp, lu, mh in rows:
        lines.append(f"| {name} | {n_mem} | {label} | {tp:.1f} | {lu:.4f} | {mh:.2f} |")
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "placement_split_sim.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
