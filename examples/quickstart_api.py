"""A study file from Python: the objective from a study YAML (default: the quickstart), your own sampler and storage.

The study file defines what a trial is (model, workload, search space, objectives, promotion pruner); the sampler,
the storage and the budget are yours:

    python examples/quickstart_api.py --n-trials 12 --storage sqlite:///quickstart_api.db
    python examples/quickstart_api.py --study studies/llama3_chat.yaml --n-trials 40
"""

from __future__ import annotations

import argparse
from pathlib import Path

import optuna

from hydra_opt.dse import DseObjective, format_front_table

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> optuna.Study:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default=str(ROOT / "studies" / "quickstart.yaml"), help="a study YAML")
    parser.add_argument("--n-trials", type=int, default=12)
    parser.add_argument("--storage", default=None, help="an Optuna storage URL (default: in memory)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    objective = DseObjective.from_yaml(args.study)
    study = optuna.create_study(
        study_name="quickstart-api", storage=args.storage, load_if_exists=True,
        directions=objective.directions, sampler=optuna.samplers.TPESampler(seed=args.seed, multivariate=True),
    )
    study.optimize(objective, n_trials=args.n_trials)
    print(format_front_table(study))
    return study


if __name__ == "__main__":
    main()
