"""``python -m hydra_opt validate FILE...`` -- check configuration files without running anything.

Each file is loaded by the loader of its kind (``hydra_opt.config.kinds``); a study file is then checked as ``run``
checks it before touching a storage (evaluator, models, workloads and traces, objectives, a design of the space —
``hydra_opt.dse.runner.check_study``) and for a search space in which no design is feasible. Every file is checked:
one ``ok`` line (stdout) or one ``hydra_opt: error: FILE: key: value problem`` line (stderr) per file; exit code 2 if
any file is bad, else 0.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["register", "run"]


def register(sub) -> argparse.ArgumentParser:
    """Add the ``validate`` subcommand."""
    p = sub.add_parser(
        "validate",
        help="validate configuration files without running anything",
        description="Validate configuration files (designs, chiplet libraries, memories, models, workloads, "
        "search spaces, objectives, studies). The kind comes from a top-level 'kind:' key or the parent folder.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="YAML files to check")
    return p


def check_file(path: str) -> str:
    """Validate one file (a study as deeply as ``run`` does before a storage); returns its kind."""
    from hydra_opt.config.kinds import validate_file

    kind = validate_file(path)
    if kind == "study":
        from hydra_opt.dse.runner import check_feasible_designs, check_study
        from hydra_opt.dse.spec import load_study_spec

        spec = load_study_spec(path)
        check_feasible_designs(spec, check_study(spec))
    return kind


def run(args: argparse.Namespace) -> int:
    """Validate every file; each bad one gets its one-line error; exit 2 if any is bad."""
    from hydra_opt.config import ConfigError
    from hydra_opt.config.errors import EXIT_USAGE
    from hydra_opt.config.kinds import register_kind

    # Paper-experiment inputs are not a product kind: their loader sits with the reproduction (report --reproduce).
    register_kind("paper_experiment", "hydra_opt.cli.report_cmd:load_paper_experiment_file")
    bad = 0
    for f in args.files:
        try:
            kind = check_file(f)
        except ConfigError as exc:
            bad += 1
            print(f"hydra_opt: error: {exc.located(file=str(f)).format()}", file=sys.stderr, flush=True)
            continue
        print(f"ok: {f} ({kind})", flush=True)
    return EXIT_USAGE if bad else 0
