"""``python -m hydra_opt estimate`` — the fast Markov/fluid estimate of one design (docs/estimator.md)."""

from __future__ import annotations

import argparse
import json
import time

from hydra_opt.cli.scenario_args import add_run_args, design_from_args, run_header, scenario_from_args

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``estimate`` subcommand."""
    p = sub.add_parser(
        "estimate",
        help="estimate one design on one workload (Markov/fluid model)",
        description="Estimate throughput, TTFT and TPOT of one design serving one workload in about a "
        "millisecond (docs/estimator.md). Same inputs and scenario flags as `simulate`.",
    )
    add_run_args(p)
    p.add_argument("--roofline", action="store_true", help="the three-bound roofline baseline instead")
    p.add_argument("--json", action="store_true", help="print JSON")
    from hydra_opt.cli.simulate_cmd import add_slo_args

    add_slo_args(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Estimate and print a summary (or JSON with throughput_tok_s, ttft_mean_s, wall_s, bottleneck, ...)."""
    from hydra_opt.cli.simulate_cmd import slo_of
    from hydra_opt.evaluate.estimator import estimate, roofline_estimate
    from hydra_opt.evaluate.estimator.core import resolve
    from hydra_opt.evaluate.estimator.goodput import estimated_capacity, estimated_slo

    from hydra_opt.cli.simulate_cmd import capacity_settings

    scenario = scenario_from_args(args, slo=slo_of(args))
    cap = capacity_settings(args)  # checked before any work
    design, model, workload = resolve(design_from_args(args), args.model, args.workload)
    fn = roofline_estimate if args.roofline else estimate
    fn(design, model, workload, scenario=scenario)  # warm the per-workload cache; wall_s is the per-design cost
    t = time.perf_counter()
    est = fn(design, model, workload, scenario=scenario)
    wall = time.perf_counter() - t
    d = est.to_dict()
    d["wall_s"] = wall
    d["estimator"] = "roofline" if args.roofline else "markov_fluid"
    d["scenario"] = scenario.to_dict()
    from hydra_opt.cli.simulate_cmd import _slo_lines

    slo = slo_of(args)
    extra = {"slo": slo.to_dict(), **estimated_slo(est, slo)}
    if args.capacity:
        extra.update(estimated_capacity(design, model, workload, scenario=scenario, slo=slo,
                                        capacity=cap).to_dict())
    d.update(extra)
    if args.json:
        print(json.dumps(d, indent=1, sort_keys=True))
    else:
        print(run_header(design, model, workload, scenario))
        print(f"throughput   {est.throughput_tok_s:10.2f} tok/s   (capacity {est.capacity_tok_s:.2f} tok/s)")
        print(f"TTFT mean    {est.ttft_mean_s:10.4f} s")
        print(f"TPOT mean    {est.tpot_mean_s:10.5f} s")
        print(f"bottleneck   {est.bottleneck}")
        print(f"wall         {wall * 1e3:10.3f} ms")
        print(_slo_lines(extra))
    return 0
