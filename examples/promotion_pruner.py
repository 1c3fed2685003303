"""The promotion pruner with your own study: every trial is estimated, only designs near the estimated Pareto
front are simulated. Prints what the pruner decided and how many simulations it saved.

    python examples/promotion_pruner.py --n-trials 16
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
from pathlib import Path

import optuna

from hydra_opt.dse import DseObjective, PromotionPruner
from hydra_opt.evaluate import Scenario
from hydra_opt.workload.workload import load_workload

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> optuna.Study:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-trials", type=int, default=16)
    parser.add_argument("--requests", type=int, default=12, help="requests per simulation")
    args = parser.parse_args(argv)

    workload = dataclasses.replace(load_workload(ROOT / "studies/workloads/quickstart-chat.yaml"),
                                   n_requests=args.requests)
    objective = DseObjective.from_objects(
        "llama-3-8b", workload, ROOT / "search_spaces" / "quickstart.yaml",
        objectives=["throughput_tok_s", "ttft_s"], scenario=Scenario(n_requests=args.requests),
    )
    # Given to the study, the pruner decides in place of the objective's own (default) one.
    pruner = PromotionPruner(objective.metrics, rule="either", k_ranks=1, epsilon=0.02, n_warmup_trials=4)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=objective.directions, pruner=pruner,
                                sampler=optuna.samplers.TPESampler(seed=0))
    study.optimize(objective, n_trials=args.n_trials)

    reasons = collections.Counter(t.user_attrs.get("promotion", "infeasible") for t in study.trials)
    simulated = sum("sim_wall_s" in t.user_attrs for t in study.trials)
    print("promotion decisions:", dict(sorted(reasons.items())))
    print(f"simulated {simulated} of {len(study.trials)} trials (all were estimated)")
    return study


if __name__ == "__main__":
    main()
