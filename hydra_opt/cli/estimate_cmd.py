"""``python -m hydra_opt estimate`` — the fast Markov/fluid estimate of one design (docs/estimator.md)."""

from __future__ import annotations

import argparse
import json
import math
import time

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``estimate`` subcommand."""
    p = sub.add_parser(
        "estimate",
        help="estimate one design on one workload (Markov/fluid model)",
        description="Estimate throughput, TTFT and TPOT of one design serving one workload in about a "
        "millisecond (docs/estimator.md). Same inputs as `simulate`.",
    )
    p.add_argument("--design", required=True, help="design YAML (kind: design)")
    p.add_argument("--model", required=True, help="model name (python -m hydra_opt list models) or YAML path")
    p.add_argument("--workload", required=True, help="workload name (python -m hydra_opt list workloads) or YAML")
    p.add_argument("--seconds", type=float, default=None, help="horizon the estimate refers to, s (default: workload's)")
    p.add_argument("--requests", type=int, default=None, help="use only the first N requests (as simulate)")
    p.add_argument("--ttft-from", choices=("arrival", "batch_start"), default="arrival", help="TTFT definition")
    p.add_argument("--roofline", action="store_true", help="the three-bound roofline baseline instead")
    p.add_argument("--json", action="store_true", help="print JSON")
    from hydra_opt.cli.simulate_cmd import add_slo_args

    add_slo_args(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Estimate and print a summary (or JSON with throughput_tok_s, ttft_mean_s, wall_s, bottleneck, ...)."""
    from hydra_opt.config.errors import ConfigError
    from hydra_opt.evaluate.estimator import EstimatorOptions, estimate, roofline_estimate
    from hydra_opt.evaluate.estimator.core import resolve

    if args.seconds is not None and not (args.seconds > 0 and math.isfinite(args.seconds)):
        raise ConfigError("must be a positive number of seconds", file="<cli>", key="--seconds", value=args.seconds)
    if args.requests is not None and args.requests < 1:
        raise ConfigError("must be >= 1", file="<cli>", key="--requests", value=args.requests)
    from hydra_opt.cli.simulate_cmd import load_placeable_design

    design, model, workload = resolve(load_placeable_design(args.design), args.model, args.workload)
    opts = EstimatorOptions(horizon_s=args.seconds, n_requests=args.requests, ttft_from=args.ttft_from)
    fn = roofline_estimate if args.roofline else estimate
    fn(design, model, workload, options=opts)  # warm the per-workload cache; wall_s is the per-design cost
    t = time.perf_counter()
    est = fn(design, model, workload, options=opts)
    wall = time.perf_counter() - t
    d = est.to_dict()
    d["wall_s"] = wall
    d["estimator"] = "roofline" if args.roofline else "markov_fluid"
    from hydra_opt.cli.simulate_cmd import _slo_lines, capacity_window, slo_of
    from hydra_opt.evaluate.estimator.goodput import estimated_capacity, estimated_slo

    slo = slo_of(args)
    extra = {"slo": slo.to_dict(), **estimated_slo(est, slo)}
    if args.capacity:
        extra.update(estimated_capacity(design, model, workload, options=opts, slo=slo,
                                        window_s=capacity_window(args)).to_dict())
    d.update(extra)
    if args.json:
        print(json.dumps(d, indent=1, sort_keys=True))
    else:
        print(f"throughput   {est.throughput_tok_s:10.2f} tok/s   (capacity {est.capacity_tok_s:.2f} tok/s)")
        print(f"TTFT mean    {est.ttft_mean_s:10.4f} s")
        print(f"TPOT mean    {est.tpot_mean_s:10.5f} s")
        print(f"bottleneck   {est.bottleneck}")
        print(f"wall         {wall * 1e3:10.3f} ms")
        print(_slo_lines(extra))
    return 0
