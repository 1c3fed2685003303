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

import numpy as np

import hydra_opt.system.placement as placement
from hydra_opt.evaluate.simulator.driver import simulate_design
from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.system.design import load_design
from hydra_opt.workload.models import load_model
from hydra_opt.workload.workload import load_workload

DESIGNS = ("lw-mt-cp", "bwb-mt-cp", "chat-bstar-cp", "arxiv-mt-cp")
# (label, policy, place() keyword overrides; "ctx" = the workload's mean prompt + output tokens, which the
# simulator now passes to place(); "max" = the model's max_position)
CONFIGS = (
    ("CP before: capacity split, contiguous weights, ctx max", "cp",
     {"split": "capacity", "weights": "balanced", "context_tokens": "max"}),
    ("CP capacity split, traffic weights, ctx mean", "cp", {"split": "capacity"}),
    ("CP traffic split, contiguous weights, ctx mean", "cp", {"weights": "balanced"}),
    ("CP default now: traffic split + traffic weights, ctx mean", "cp", {}),
    ("RR", "rr", {}),
    ("random (seed 0)", "random", {}),
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--workload", default="hydra-chat")
    args = ap.parse_args()
    model = load_model("nemotron-h-4b")
    wl = load_workload(args.workload)
    req = wl.requests(0)
    ctx = int(round(float(np.mean(np.maximum(req.prompt_tokens, 1) + np.maximum(req.output_tokens, 1)))))
    root = Path(__file__).resolve().parents[1]
    original = placement.place
    rows = []
    t0 = time.perf_counter()
    try:
        for name in DESIGNS:
            design = load_design(root / "studies" / "designs" / f"fig10-nemotron-h-4b-{name}.yaml")
            for label, policy, kw in CONFIGS:
                kw = dict(kw)
                if kw.get("context_tokens") == "max":
                    kw["context_tokens"] = model.max_position
                # The simulator passes context_tokens itself; these overrides win over it.
                placement.place = lambda *a, _kw=kw, **k: original(*a, **{**k, **_kw})
                d = design.replace(placement=policy)
                pl = original(d, model, **{"context_tokens": ctx, **kw})
                # Bytes per memory per pass, all priced at the workload's mean context (comparable across rows).
                prob = placement.placement_problem(d, model, context_tokens=ctx)
                peak = max(placement.mem_pass_bytes(prob, pl.weight_map))
                res = simulate_design(d, model, args.workload, scenario=Scenario(horizon_s=args.seconds))
                rows.append((name, design.n_mem, label, pl.mem_groups.count("mamba"), peak / 1e9,
                             res.throughput_tok_s, res.ttft_mean_s, res.link_util_mean, pl.mean_hops))
                print(rows[-1], flush=True)
    finally:
        placement.place = original
    lines = [
        f"# CP memory split vs RR/random in simulation (Nemotron-H-4B, {args.workload}, {args.seconds:g} s)",
        "",
        f"Command: `python benchmarks/placement_split_sim.py --seconds {args.seconds:g} --workload {args.workload}`"
        f" ({time.perf_counter() - t0:.0f} s wall). Clean simulator options (static batching and scheduler of the"
        f" design files, equal-share NoI). ctx mean = the workload's mean prompt + output = {ctx} tokens; ctx max ="
        f" max_position = {model.max_position} tokens. Peak per-pass bytes = the busiest memory's weights + a"
        " max_batch batch's state/KV at ctx mean, read per pass (GB = 1e9 bytes).",
        "",
        "| design | HBMs | placement | Mamba HBMs | peak per-pass bytes (GB) | throughput (tokens/s) |"
        " TTFT mean (s) | mean link utilisation (fraction) | mean hops |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, n_mem, label, nm, peak, tp, ttft, lu, mh in rows:
        lines.append(f"| {name} | {n_mem} | {label} | {nm} | {peak:.3f} | {tp:.1f} | {ttft:.3f} | {lu:.4f} | {mh:.2f} |")
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "placement_split_sim.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
