"""The scenario and design-override flags ``simulate`` and ``estimate`` share, and the header both print."""

from __future__ import annotations

import argparse
import math
from typing import Any

from hydra_opt.config import ConfigError
from hydra_opt.system.policies import BATCHINGS, PLACEMENTS, SCHEDULERS

__all__ = ["add_run_args", "design_from_args", "run_header", "scenario_from_args"]


def add_run_args(p: argparse.ArgumentParser) -> None:
    """Add ``--design/--model/--workload``, the scenario flags and the design overrides to ``p``."""
    p.add_argument("--design", required=True, help="design YAML (kind: design)")
    p.add_argument("--model", required=True, help="model name (python -m hydra_opt list models) or YAML path")
    p.add_argument("--workload", required=True, help="workload name (python -m hydra_opt list workloads) or YAML")
    s = p.add_argument_group("scenario (the run; docs/simulator.md \"Scenario\")")
    s.add_argument("--paper", action="store_true", help="the HYDRA artifact's setup (Scenario.paper())")
    s.add_argument("--seconds", type=float, default=None, help="horizon, s (default: the workload's / all)")
    s.add_argument("--requests", type=int, default=None, help="use only the first N requests")
    s.add_argument("--arrival-interval", type=float, default=None, metavar="S",
                   help="fixed arrivals every S seconds instead of the workload's")
    s.add_argument("--precision", default=None, help="precision of every chiplet (default: the design's)")
    s.add_argument("--ttft-from", choices=("arrival", "batch_start"), default=None, help="TTFT definition")
    s.add_argument("--window", choices=("measure", "whole_run"), default=None, help="throughput window")
    s.add_argument("--token-budget", type=int, default=None, help="continuous batching: new tokens per pass")
    s.add_argument("--lend", action="store_true", help="elastic scheduler: cross-phase lending")
    o = p.add_argument_group("design overrides (a new design, as if the design file said so)")
    o.add_argument("--max-batch", type=int, default=None, help="the design's maximum batch")
    o.add_argument("--batching", choices=BATCHINGS, default=None, help="the design's batching")
    o.add_argument("--scheduler", choices=SCHEDULERS, default=None, help="the design's task scheduler")
    o.add_argument("--placement", choices=PLACEMENTS, default=None, help="the design's placement")


def scenario_from_args(args: argparse.Namespace, *, slo: Any = None) -> Any:
    """The :class:`~hydra_opt.evaluate.scenario.Scenario` the flags describe (``--paper`` as the base), carrying
    ``slo`` unless it is the default SLO (``scenario.slo`` None means the default)."""
    from hydra_opt.evaluate.scenario import Scenario
    from hydra_opt.evaluate.slo import DEFAULT_SLO

    for flag, v in (("--seconds", args.seconds), ("--arrival-interval", args.arrival_interval)):
        if v is not None and not (v > 0 and math.isfinite(v)):
            raise ConfigError("must be a positive number of seconds", file="<cli>", key=flag, value=v)
    over = {k: v for k, v in (
        ("horizon_s", args.seconds), ("n_requests", args.requests), ("arrival_interval_s", args.arrival_interval),
        ("precision", args.precision), ("ttft_from", args.ttft_from), ("window", args.window),
        ("token_budget", args.token_budget),
    ) if v is not None}
    if args.lend:
        over["lend"] = True
    if slo is not None and slo != DEFAULT_SLO:
        over["slo"] = slo
    flags = {"horizon_s": "--seconds", "n_requests": "--requests", "token_budget": "--token-budget"}
    try:
        return Scenario.paper(**over) if args.paper else Scenario(**over)
    except ConfigError as exc:
        raise ConfigError(exc.problem, file="<cli>", key=flags.get(exc.key or "", exc.key), value=exc.value) from None


def design_from_args(args: argparse.Namespace) -> Any:
    """The design file with the override flags applied (one new design, before anything is derived)."""
    from hydra_opt.system.design import load_design

    over = {"max_batch": args.max_batch, "batching": args.batching, "scheduler": args.scheduler,
            "placement": args.placement}
    from hydra_opt.system.design import placement_problem

    try:
        design = load_design(args.design).with_overrides(over, file="<cli>", key="--")
    except ConfigError as exc:
        if exc.file == "<cli>" and exc.key:
            exc.key = exc.key.replace("_", "-")
        raise
    problem = placement_problem(design)  # simulate and estimate refuse the same unplaceable designs
    if problem is not None:
        raise ConfigError(problem[1], file=args.design, key=problem[0])
    return design


def run_header(design: Any, model: Any, workload: Any, scenario: Any) -> str:
    """Two lines naming the run: the design (after overrides) with model and workload, then the scenario."""
    wname = getattr(workload, "name", str(workload))
    mname = getattr(model, "name", str(model))
    return (f"design {design.name or 'design'}: max_batch {design.max_batch}, {design.batching} batching, "
            f"{design.scheduler} scheduler, {design.placement} placement · model {mname} · workload {wname}\n"
            f"{scenario.header()}")
