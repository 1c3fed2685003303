"""Read a finished study back: the simulated Pareto front, estimates next to simulated values, a report.

Works on any study hydra_opt wrote, from the CLI or from Python:

    python examples/python_space.py --storage journal:///tmp/python_space.log
    python examples/read_results.py --storage journal:///tmp/python_space.log --out /tmp/python_space_report
"""

from __future__ import annotations

import argparse

import optuna

from hydra_opt.dse import front_rows, make_storage, write_report


def main(argv: list[str] | None = None) -> list:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", required=True)
    parser.add_argument("--study-name", default=None, help="default: the only study in the storage")
    parser.add_argument("--out", default=None, help="folder for front.csv, trials.csv, pareto.html/png, summary.md")
    args = parser.parse_args(argv)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(args.storage)
    study = optuna.load_study(study_name=args.study_name, storage=storage)
    rows, facts = front_rows(study)
    names = study.metric_names or [f"objective {i}" for i in range(len(study.directions))]
    print(f"{study.study_name}: {len(study.trials)} trials, {facts['n_simulated']} distinct designs simulated")
    for r in rows:  # simulated value (estimate) per objective
        cells = ", ".join(f"{n} {v:.4g} ({e:.4g})" for n, v, e in zip(names, r.values, r.est))
        print(f"  front trial {r.number:3d}: {cells}  {r.design['chiplets']} n_mem={r.design['n_mem']}")
    frame = study.trials_dataframe(attrs=("number", "state", "user_attrs"))
    print(f"trials_dataframe: {len(frame)} rows; estimate columns:",
          sorted(c for c in frame.columns if c.startswith("user_attrs_est_")))
    if args.out:
        for kind, path in write_report(study, args.out).items():
            print(f"  wrote {kind}: {path}")
    return rows


if __name__ == "__main__":
    main()
