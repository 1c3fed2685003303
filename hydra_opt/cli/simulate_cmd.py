"""``python -m hydra_opt simulate`` — run the event-driven simulator on one design, model and workload."""

from __future__ import annotations

import argparse
import json
import math

from hydra_opt.cli.scenario_args import add_run_args, design_from_args, run_header, scenario_from_args

__all__ = ["register", "run", "add_slo_args", "slo_of", "capacity_settings", "check_output_file",
           "load_placeable_design"]


def add_slo_args(p: argparse.ArgumentParser) -> None:
    """``--slo-ttft``, ``--slo-tpot``, ``--slo-attainment`` and ``--capacity`` (shared with ``estimate``)."""
    p.add_argument("--slo-ttft", type=float, default=None, metavar="S", help="SLO: TTFT bound, s (default 2.0)")
    p.add_argument("--slo-tpot", type=float, default=None, metavar="S", help="SLO: TPOT bound, s/token (default 0.1)")
    p.add_argument("--slo-attainment", type=float, default=None, metavar="F",
                   help="SLO: fraction of requests that must meet both bounds (default 0.9)")
    p.add_argument("--capacity", action="store_true",
                   help="also search capacity_req_s: the largest request rate at which the SLO is attained "
                   "(docs/metrics.md; several runs)")
    from hydra_opt.evaluate.slo import DEFAULT_CAPACITY as d

    p.add_argument("--capacity-requests", type=int, default=d.requests, metavar="N",
                   help=f"capacity: requests of the base stream drawn from the workload's generator, extended when "
                   f"a rate's window needs more (default {d.requests}, as objective YAMLs' capacity.requests)")
    p.add_argument("--capacity-window", type=float, default=d.window_s, metavar="S",
                   help=f"capacity: each run replays the requests arriving within S seconds at its rate (a "
                   f"fixed-duration run; default {d.window_s:g})")
    p.add_argument("--capacity-min-requests", type=int, default=d.min_requests, metavar="N",
                   help=f"capacity: each run replays at least N requests, stretching the window at low rates "
                   f"(default {d.min_requests}, as objective YAMLs' capacity.min_requests)")
    p.add_argument("--capacity-tolerance", type=float, default=d.tolerance, metavar="F",
                   help=f"capacity: relative width of the final rate bracket (default {d.tolerance:g})")
    p.add_argument("--capacity-max-runs", type=int, default=d.max_runs, metavar="N",
                   help=f"capacity: most simulated runs per search (default {d.max_runs})")


def capacity_settings(args: argparse.Namespace):  # noqa: ANN201 - CapacitySettings (lazy import)
    """The ``--capacity-*`` flags as a :class:`~hydra_opt.evaluate.slo.CapacitySettings` (the objective YAML's
    ``capacity:`` block; ConfigError naming the flag for a bad value)."""
    from hydra_opt.config.errors import ConfigError
    from hydra_opt.evaluate.slo import CapacitySettings

    try:
        return CapacitySettings(tolerance=args.capacity_tolerance, max_runs=args.capacity_max_runs,
                                requests=args.capacity_requests, window_s=args.capacity_window,
                                min_requests=args.capacity_min_requests)
    except ConfigError as exc:
        flag = {"capacity.tolerance": "--capacity-tolerance", "capacity.max_runs": "--capacity-max-runs",
                "capacity.requests": "--capacity-requests",
                "capacity.min_requests": "--capacity-min-requests"}.get(exc.key or "", "--capacity-window")
        raise ConfigError(exc.problem, file="<cli>", key=flag, value=exc.value) from None


def slo_of(args: argparse.Namespace):
    """The :class:`~hydra_opt.evaluate.slo.Slo` of the command line (ConfigError for a bad bound)."""
    from hydra_opt.config.errors import ConfigError
    from hydra_opt.evaluate.slo import Slo

    vals = {k: v for k, v in (("ttft_s", args.slo_ttft), ("tpot_s", args.slo_tpot),
                              ("attainment", args.slo_attainment)) if v is not None}
    try:
        return Slo(**vals)
    except ConfigError as exc:
        flag = {"slo.ttft_s": "--slo-ttft", "slo.tpot_s": "--slo-tpot"}.get(exc.key or "", "--slo-attainment")
        raise ConfigError(exc.problem, file="<cli>", key=flag, value=exc.value) from None


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``simulate`` subcommand."""
    p = sub.add_parser(
        "simulate",
        help="simulate one design on one workload (event-driven)",
        description="Simulate one design serving one workload. Metrics are defined in docs/metrics.md.",
    )
    add_run_args(p)
    p.add_argument("--seed", type=int, default=0, help="request-stream seed (default 0)")
    p.add_argument("--sharing", choices=("fair", "maxmin", "equal", "none"), default=None, help="NoI bandwidth sharing")
    p.add_argument("--debug", action="store_true", help="check invariants after every event (slow)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")
    add_slo_args(p)
    p.add_argument("--trace-out", metavar="F", default=None, help="write per-request metrics CSV to F")
    p.add_argument("--link-heatmap", metavar="PNG", default=None,
                   help="write the mean per-link utilisation as a mesh heatmap (HYDRA Fig. 11) to PNG")
    return p


def _options(args: argparse.Namespace):
    from hydra_opt.evaluate.simulator import SimOptions

    over = {"debug": True} if args.debug else {}
    if args.sharing is not None:
        over["sharing"] = args.sharing
    return SimOptions(**over)


def check_output_file(path: str | None, key: str) -> None:
    """Refuse an output file whose folder does not exist (or that names a folder) before any work is done."""
    from pathlib import Path

    from hydra_opt.config.errors import ConfigError

    if path is None:
        return
    p = Path(path)
    if "\x00" in path or p.is_dir():
        raise ConfigError("is not a file path", file="<cli>", key=key, value=path)
    if not p.parent.is_dir():
        raise ConfigError(f"is in a folder that does not exist ({p.parent})", file="<cli>", key=key, value=path)


def load_placeable_design(path: str):  # noqa: ANN201 - DesignPoint (lazy import)
    """The design YAML ``path``, refused with one line when its chiplets cannot be placed (``simulate`` and
    ``estimate`` refuse the same designs)."""
    from hydra_opt.config.errors import ConfigError
    from hydra_opt.system.design import load_design, placement_problem

    design = load_design(path)
    problem = placement_problem(design)
    if problem is not None:
        raise ConfigError(problem[1], file=path, key=problem[0])
    return design


def run(args: argparse.Namespace) -> int:
    """Run the simulation and print a summary (or JSON)."""
    from hydra_opt.config.errors import ConfigError
    from hydra_opt.evaluate import simulate
    from hydra_opt.evaluate.simulator.goodput import simulated_capacity, slo_metrics
    from hydra_opt.system.placement import PlacementError
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import load_workload

    opt = _options(args)
    slo = slo_of(args)
    cap = capacity_settings(args)  # checked before any work
    if not 0 <= args.seed <= 2**32 - 1:
        raise ConfigError(f"must be in [0, {2**32 - 1}]", file="<cli>", key="--seed", value=args.seed)
    for key, out in (("--trace-out", args.trace_out), ("--link-heatmap", args.link_heatmap)):
        check_output_file(out, key)
    scenario = scenario_from_args(args, slo=slo)
    design = design_from_args(args)
    model, workload = load_model(args.model), load_workload(args.workload)
    try:
        res = simulate(design, model, workload, seed=args.seed, scenario=scenario, options=opt)
    except PlacementError as exc:  # e.g. weights that fit no memory split: a property of the design file
        raise ConfigError(f"cannot be placed: {exc}", file=args.design) from None
    extra = {"slo": slo.to_dict(), **slo_metrics(res, slo)}
    if args.capacity:
        extra.update(simulated_capacity(design, model, workload, seed=args.seed, scenario=scenario, options=opt,
                                        slo=slo, capacity=cap).to_dict())
    if args.trace_out:
        res.write_trace(args.trace_out)
    if args.link_heatmap:
        import numpy as np

        from hydra_opt.hardware.noi import plot_link_heatmap
        from hydra_opt.system.materialise import design_mesh

        plot_link_heatmap(design_mesh(design), np.asarray(res.link_util), args.link_heatmap,
                          node_labels=res.options["build"]["node_labels"] or None,
                          title=f"{res.design}: mean link utilisation over {res.simulated_s:g} s")
    if args.json:
        print(json.dumps({**res.to_dict(), **_finite(extra)}, indent=1, sort_keys=True, allow_nan=False))
    else:
        print(run_header(design, model, workload, scenario))
        print(res.summary())
        print(_slo_lines(extra))
        if res.tokens_emitted == 0 and res.queued_requests > 0:
            # A silent all-zero run is the commonest surprise: static batches start only when full.
            print(f"note: no token was produced; {res.queued_requests} request(s) are still queued. A static batch "
                  "starts only when max_batch requests are waiting: raise --seconds, use a faster-arriving "
                  "workload, lower --max-batch, or try --batching continuous.")
        if args.trace_out:
            print(f"per-request metrics written to {args.trace_out}")
    return 0


def _finite(d: dict) -> dict:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def _slo_lines(extra: dict) -> str:
    """Human lines for the SLO metrics (shared with ``estimate``)."""
    s = extra["slo"]
    lines = [f"SLO               TTFT <= {s['ttft_s']:g} s and TPOT <= {s['tpot_s']:g} s for {s['attainment']:.0%}: "
             f"attainment {extra['slo_attainment']:.1%}, goodput {extra['goodput_tok_s']:.2f} tok/s"]
    if "capacity_req_s" in extra:
        b = extra["capacity_bracket_req_s"]
        bound = ">= " if extra["capacity_lower_bound"] else ""
        # Enough digits that the bracket's two ends differ at any tolerance (4 down to 1e-2; 8 at 1e-6).
        g = f".{max(4, 2 + math.ceil(-math.log10(extra['capacity_tolerance'])))}g"
        hi = b[1] if b[1] is not None else float("inf")
        lines.append(f"SLO capacity      {bound}{extra['capacity_req_s']:{g}} req/s  ({len(extra['capacity_runs'])} runs, "
                     f"bracket {b[0]:{g}}-{hi:{g}} req/s)")
        if extra["capacity_note"]:
            lines.append(f"                  {extra['capacity_status'].upper().replace('_', ' ')}: {extra['capacity_note']}")
    return "\n".join(lines)
