"""``python -m hydra_opt report`` — a study's Pareto front as CSV, HTML/PNG plots and a markdown summary;
``--export-design TRIAL`` writes one trial's design YAML (accepted by ``python -m hydra_opt simulate``);
``--reproduce`` runs the paper-reproduction experiments and writes ``reproduction.md`` (issue 8)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hydra_opt.config import ConfigError

__all__ = ["register", "run", "load_paper_experiment_file"]


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "report",
        help="write a study's Pareto front, plots and summary",
        description="Write front.csv, trials.csv, pareto.html (estimated vs simulated, B*/M_T), pareto.png and "
        "summary.md for a study; or export one trial's design YAML.",
    )
    p.add_argument("study_file", nargs="?", metavar="STUDY.yaml", help="take storage and study name from a study file")
    p.add_argument("--storage", metavar="URL", help="storage URL")
    p.add_argument("--study-name", metavar="N", help="study name")
    p.add_argument("--out", metavar="DIR", help="output folder (default: report_<study name>)")
    p.add_argument("--export-design", metavar="TRIAL", help="write this trial's design YAML instead of a report")
    g = p.add_argument_group("paper reproduction (docs/reproduction.md; no storage needed)")
    g.add_argument("--reproduce", action="store_true",
                   help="run the HYDRA/DynaCore reproduction experiments, write DIR/reproduction.md + DIR/reproduction/")
    g.add_argument("--quick", action="store_true", help="quick mode (short horizons; each experiment <= ~2 min)")
    g.add_argument("--only", metavar="KEY[,KEY]", help="run only these experiments (others are re-rendered from JSON)")
    g.add_argument("--from-results", action="store_true", help="run nothing; re-render from the stored JSON")
    g.add_argument("--seed", type=int, default=0, help="seed of every experiment (default 0)")
    g.add_argument("--checkout", metavar="DIR",
                   help="repository clone whose studies/paper/ and search_spaces/ are read (default: current folder)")
    g.add_argument("--shared", metavar="DIR",
                   help="shared data folder (traces, the HYDRA artifact's fronts; default: $HYDRA_OPT_SHARED, else "
                        "CHECKOUT/../shared); parts needing it are skipped when absent")
    return p


def load_paper_experiment_file(path: str) -> dict:
    """``validate`` loader of ``kind: paper_experiment`` files (the reproduction's inputs)."""
    from hydra_opt.experiments import load_experiment_file

    return load_experiment_file(path)


def _run_reproduce(args: argparse.Namespace) -> int:
    from hydra_opt.experiments import ExperimentPaths, parse_only, run_reproduction

    if args.study_file or args.storage or args.study_name or args.export_design is not None:
        raise ConfigError("cannot be combined with a study file, --storage, --study-name or --export-design",
                          file="<cli>", key="--reproduce")
    parse_only(args.only)  # bad key -> ConfigError before anything runs
    out = Path(args.out) if args.out else Path("docs")
    if "\x00" in str(out):
        raise ConfigError("is not a path", file="<cli>", key="--out")
    paths = ExperimentPaths.default(args.checkout, args.shared)
    if not args.from_results and not paths.paper_dir.is_dir():
        raise ConfigError(f"has no studies/paper/ folder ({paths.paper_dir}); run from a clone's root or give "
                          "--checkout DIR", file="<cli>", key="--checkout", value=str(paths.checkout))
    failures: list[str] = []
    md = run_reproduction(out, quick=args.quick, only=args.only, from_results=args.from_results, seed=args.seed,
                          failures=failures, paths=paths)
    print(f"wrote {md}")
    return 1 if failures else 0


def _check_out(out: Path, *, yaml_file: bool) -> None:
    """``--out`` must be (or be creatable as) a folder — or, for ``--export-design``, a YAML file in an existing
    folder; refused before anything is written (``/dev/null`` is neither)."""
    folder = out.parent if yaml_file else out
    if yaml_file and out.exists() and not out.is_file():
        raise ConfigError("is not a regular file", file="<cli>", key="--out", value=str(out))
    existing = next((a for a in (folder, *folder.parents) if a.exists()), None)
    if existing is not None and not existing.is_dir():
        raise ConfigError(f"is not a folder ({existing} exists and is not one)", file="<cli>", key="--out",
                          value=str(out))


def run(args: argparse.Namespace) -> int:
    from hydra_opt.dse.report import export_design, format_front_table, reasons_lines, write_report
    from hydra_opt.dse.storages import check_url, redact_url
    from hydra_opt.dse.runner import load_study_by_name
    from hydra_opt.dse.spec import load_study_spec

    if getattr(args, "reproduce", False):
        return _run_reproduce(args)
    for flag, on in (("--quick", args.quick), ("--only", args.only is not None), ("--from-results", args.from_results),
                     ("--checkout", args.checkout is not None), ("--shared", args.shared is not None)):
        if on:
            raise ConfigError("needs --reproduce", file="<cli>", key=flag)
    storage, name = args.storage, args.study_name
    spec = None
    if args.study_file:
        spec = load_study_spec(args.study_file)
        storage, name = storage or spec.storage, name or spec.name
    if not storage:
        raise ConfigError("is required (or give a study file)", file="<cli>", key="--storage")
    check_url(storage, file="<cli>", key="--storage")
    if name is not None and (not name.strip() or len(name) > 128 or any(ord(c) < 32 for c in name)):
        raise ConfigError("must be a printable name of 1-128 characters", file="<cli>", key="--study-name", value=name)
    if args.out is not None and "\x00" in args.out:
        raise ConfigError("is not a path", file="<cli>", key="--out")
    study = load_study_by_name(storage, name)
    out = Path(args.out) if args.out else Path(f"report_{study.study_name}")
    _check_out(out, yaml_file=args.export_design is not None and out.suffix in (".yaml", ".yml"))
    if args.export_design is not None:
        try:
            number = int(args.export_design)
        except ValueError:
            raise ConfigError("is not a trial number", file="<cli>", key="--export-design",
                              value=args.export_design) from None
        if args.out is None:
            # One file, no report folder: into the study's artifact folder, else the current folder.
            home = spec.artifact_dir if spec is not None and spec.artifact_dir is not None else Path()
            target = home / f"{study.study_name}_trial{number}_design.yaml"
        else:
            target = out if out.suffix in (".yaml", ".yml") else out / f"trial{number}_design.yaml"
        path = export_design(study, number, target)
        print(f"wrote {path}")
        return 0
    paths = write_report(study, out)
    print(f"study {study.study_name!r} on {redact_url(storage)}")
    print("\n".join(reasons_lines(study)))
    print()
    print(format_front_table(study))
    print()
    for key, p in paths.items():
        print(f"{key:8s} {p}")
    return 0
