"""Everything in Python: model and workload objects, a search space and objectives defined in code, NSGA-II,
a journal storage and a progress callback.

    python examples/python_space.py --n-trials 10 --storage journal:///tmp/python_space.log
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from pathlib import Path

import optuna

from hydra_opt.dse import (
    METRICS,
    Constraint,
    DseObjective,
    ObjectiveSpec,
    SearchSpace,
    constraints_from_user_attrs,
    make_storage,
)
from hydra_opt.evaluate import Scenario
from hydra_opt.workload.models import load_model
from hydra_opt.workload.workload import load_workload

ROOT = Path(__file__).resolve().parents[1]

#: 24 slots: 2-8 HBM3 stacks, the rest prefill (tscs_p) and decode (tscs_d) chiplets; two batch caps.
SPACE = SearchSpace.from_dict({
    "name": "llama3-small",
    "slots": 24,
    "chiplets": {"tscs_p": {"min": 1, "max": 19}, "tscs_d": {"min": 1, "max": 19}},
    "memory": {"type": "hbm3", "count": {"min": 4, "max": 8, "step": 2}},
    "d2d_bw_gbps": [256, 512],
    "max_batch": [4, 8],
    "package": {"grid_w": 6, "grid_h": 4},
})

#: Maximise throughput, minimise TTFT, subject to a mean TTFT of at most 0.55 s (an Optuna constraint).
OBJECTIVES = ObjectiveSpec(
    name="throughput-ttft-slo",
    metrics=(METRICS["throughput_tok_s"], METRICS["ttft_s"]),
    constraints=(Constraint(METRICS["ttft_s"], 0.55, upper=True),),
)


def progress(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    """A callback: one line per finished trial."""
    why = trial.user_attrs.get("promotion") or (trial.user_attrs.get("infeasible") or ["?"])[0]
    print(f"trial {trial.number:3d} {trial.state.name:8s} {why:20.20s} {trial.values or ''}")


def main(argv: list[str] | None = None) -> optuna.Study:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-trials", type=int, default=10)
    parser.add_argument("--storage", default=None, help="a hydra_opt storage URL (default: in memory)")
    parser.add_argument("--requests", type=int, default=12, help="requests per simulation")
    args = parser.parse_args(argv)

    model = load_model("llama-3-8b")
    workload = dataclasses.replace(load_workload(ROOT / "studies/workloads/quickstart-chat.yaml"),
                                   n_requests=args.requests)
    objective = DseObjective.from_objects(
        model, workload, SPACE.with_encoding("stick_breaking"),  # NSGA-II models a fixed space
        objectives=OBJECTIVES, scenario=Scenario(n_requests=args.requests), pruner=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # Optuna 5 deprecates constraints_func
        sampler = optuna.samplers.NSGAIISampler(seed=0, population_size=6, constraints_func=constraints_from_user_attrs)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(args.storage) if args.storage else None  # also journal://, redis://
    study = optuna.create_study(study_name="python-space", storage=storage, load_if_exists=True,
                                directions=objective.directions, sampler=sampler)
    study.optimize(objective, n_trials=args.n_trials, callbacks=[progress])
    return study


if __name__ == "__main__":
    main()
