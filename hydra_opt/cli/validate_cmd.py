"""``python -m hydra_opt validate FILE...`` -- check configuration files without running anything.

Each file is loaded by the loader of its kind (``hydra_opt.config.kinds``). The first mistake stops the command
with ``hydra_opt: error: FILE: key: value problem`` and exit code 2; otherwise one ``ok`` line per file, exit 0.
"""

from __future__ import annotations

import argparse

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


def run(args: argparse.Namespace) -> int:
    """Validate every file; a :class:`~hydra_opt.config.ConfigError` propagates to the dispatcher (exit 2)."""
    from hydra_opt.config.kinds import register_kind, validate_file

    # Paper-experiment inputs are not a product kind: their loader sits with the reproduction (report --reproduce).
    register_kind("paper_experiment", "hydra_opt.cli.report_cmd:load_paper_experiment_file")
    for f in args.files:
        kind = validate_file(f)
        print(f"ok: {f} ({kind})")
    return 0
