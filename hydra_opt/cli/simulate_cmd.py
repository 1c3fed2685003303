"""``python -m hydra_opt simulate`` — run the event-driven simulator on one design, model and workload."""

from __future__ import annotations

import argparse
import json

from hydra_opt.cli.scenario_args import add_run_args, design_from_args, run_header, scenario_from_args

__all__ = ["register", "run"]


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


def run(args: argparse.Namespace) -> int:
    """Run the simulation and print a summary (or JSON)."""
    from hydra_opt.evaluate import simulate
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import load_workload

    scenario = scenario_from_args(args)
    design = design_from_args(args)
    model, workload = load_model(args.model), load_workload(args.workload)
    res = simulate(design, model, workload, seed=args.seed, scenario=scenario, options=_options(args))
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
        print(json.dumps(res.to_dict(), indent=1, sort_keys=True, allow_nan=False))
    else:
        print(run_header(design, model, workload, scenario))
        print(res.summary())
        if res.tokens_emitted == 0 and res.queued_requests > 0:
            # A silent all-zero run is the commonest surprise: static batches start only when full.
            print(f"note: no token was produced; {res.queued_requests} request(s) are still queued. A static batch "
                  "starts only when max_batch requests are waiting: raise --seconds, use a faster-arriving "
                  "workload, lower --max-batch, or try --batching continuous.")
        if args.trace_out:
            print(f"per-request metrics written to {args.trace_out}")
    return 0
