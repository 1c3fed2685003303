"""``python -m hydra_opt.run STUDY.yaml [options]`` — launch or resume a DSE study; progress, front, dashboard command."""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from typing import Any

from hydra_opt.config import ConfigError

__all__ = ["register", "run", "dashboard_command"]

MAX_WORKERS = 256


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "run",
        help="launch or resume an Optuna DSE study from a study YAML",
        description=(
            "Launch or resume the study described by STUDY.yaml: every trial is estimated, promising ones are "
            "simulated (promotion pruner), and the simulated Pareto front is printed with B* and M_T marked. "
            "Re-running the same command resumes the study and stops at its total trial budget."
        ),
    )
    p.add_argument("study", metavar="STUDY.yaml", help="study file (see studies/quickstart.yaml)")
    p.add_argument("--storage", metavar="URL", help="storage URL (default: the study's, else sqlite next to it)")
    p.add_argument("--study-name", metavar="N", help="Optuna study name (default: the study's name)")
    p.add_argument("--n-trials", metavar="N", help="total budget of finished trials over the whole study")
    p.add_argument("--timeout", metavar="S", help="wall-time limit of this invocation, s")
    p.add_argument("--workers", metavar="K", default="1", help="local worker processes on the same storage")
    p.add_argument("--seed", metavar="S", help="study seed (per-worker seeds derive from it)")
    p.add_argument("--worker-index", metavar="I", default="0",
                   help="index of this invocation's first worker (give distinct values on other machines)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or per-trial lines")
    p.add_argument("--heartbeat-interval", metavar="S", default=None,
                   help="seconds between heartbeats of running trials (RDB and journal storages; 1-3600, "
                        "default 30); a trial silent for --grace-period is failed and retried (docs/distributed.md)")
    p.add_argument("--grace-period", metavar="S", default=None,
                   help="seconds without a heartbeat after which a running trial counts as dead (default 120)")
    p.add_argument("--storage-retry", metavar="S", default=None,
                   help="seconds storage operations are retried through an outage before the worker stops with "
                        "one line (default 60; 0 disables)")
    return p


def _int_arg(value: str | None, name: str, lo: int, hi: int) -> int | None:
    if value is None:
        return None
    try:
        v = int(value)
    except ValueError:
        raise ConfigError(f"is not an integer in [{lo}, {hi}]", file="<cli>", key=name, value=value) from None
    if not lo <= v <= hi:
        raise ConfigError(f"must be in [{lo}, {hi}]", file="<cli>", key=name, value=v)
    return v


def _float_arg(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        v = float(value)
    except ValueError:
        raise ConfigError("is not a number of seconds", file="<cli>", key=name, value=value) from None
    if not math.isfinite(v) or v <= 0 or v > 1e8:
        raise ConfigError("must be a positive finite number of seconds (<= 1e8)", file="<cli>", key=name, value=value)
    return v


def dashboard_command(storage_url: str, artifact_dir: str | None) -> str:
    """The ``optuna-dashboard`` command for a storage (password redacted) and artifact folder."""
    from hydra_opt.dse.storages import redact_url, with_driver

    url = redact_url(with_driver(storage_url))  # the dashboard needs the same (installed) driver
    if url.startswith("journal://"):
        cmd = f"optuna-dashboard {shlex.quote(url.split('://', 1)[1])} --storage-class JournalFileStorage"
    else:
        cmd = f"optuna-dashboard {shlex.quote(url)}"
    if artifact_dir:
        cmd += f" --artifact-dir {shlex.quote(artifact_dir)}"
    return cmd


def _trial_line(number: int, user_attrs: dict, values: list[float] | None, metric_units: list[tuple[str, str]]) -> str:
    from hydra_opt.dse.report import design_label

    def fmt(prefix: str) -> str:
        out = []
        for m, unit in metric_units:
            v = user_attrs.get(f"{prefix}{m}")
            out.append("-" if v is None else f"{v:.4g} {unit}".strip())
        return ", ".join(out)

    reason = user_attrs.get("promotion", "")
    dup = user_attrs.get("duplicate_of")
    how = f"duplicate of {dup}" if dup is not None else f"promoted: {reason}"
    return f"trial {number:5d} {how:<18s} est [{fmt('est_')}] -> sim [{fmt('sim_')}]  {design_label(user_attrs.get('design'))}"


def run(args: argparse.Namespace) -> int:
    from hydra_opt.dse.objectives import METRICS
    from hydra_opt.dse.report import format_front_table
    from hydra_opt.dse.storages import redact_url
    from hydra_opt.dse.study import FINISHED_STATES, RunOptions, load_study_spec, run_study

    n_trials = _int_arg(args.n_trials, "--n-trials", 1, 10**7)
    timeout = _float_arg(args.timeout, "--timeout")
    workers = _int_arg(args.workers, "--workers", 1, MAX_WORKERS) or 1
    seed = _int_arg(args.seed, "--seed", 0, 2**32 - 1)
    worker_index = _int_arg(args.worker_index, "--worker-index", 0, 10**6) or 0
    if args.study_name is not None and (not args.study_name.strip() or len(args.study_name) > 128
                                        or any(ord(c) < 32 for c in args.study_name)):
        raise ConfigError("must be a printable name of 1-128 characters", file="<cli>", key="--study-name",
                          value=args.study_name)
    from hydra_opt.cli.storage_args import storage_options_from_args
    from hydra_opt.dse.fault import sigterm_as_interrupt

    sigterm_as_interrupt()  # SIGTERM (schedulers, kill) stops like Ctrl-C: the running trial FAILs cleanly
    storage_options = storage_options_from_args(args)
    spec = load_study_spec(args.study)
    opts = RunOptions(storage=args.storage, study_name=args.study_name, n_trials=n_trials, timeout_s=timeout,
                      workers=workers, seed=seed, worker_index=worker_index, quiet=args.quiet,
                      storage_options=storage_options)
    metrics = [m.name for m in spec.objectives.metrics]
    units = [(m, METRICS[m].unit) for m in metrics]
    storage_shown = redact_url(args.storage or spec.storage)
    budget = n_trials if n_trials is not None else spec.n_trials
    if not args.quiet:
        print(f"study {args.study_name or spec.name!r} on {storage_shown}: budget {budget} finished trials, "
              f"{workers} worker(s), sampler {spec.sampler.cls.__name__}, space {spec.space.name} "
              f"({spec.space.size():,} designs)", flush=True)

    bar = None
    seen: set[int] = set()
    t_start = time.perf_counter()

    def ensure_bar(study: Any) -> Any:
        nonlocal bar
        if bar is None and not args.quiet:
            from tqdm import tqdm

            done = len(study.get_trials(deepcopy=False, states=FINISHED_STATES))
            bar = tqdm(total=budget, initial=done, unit="trial", dynamic_ncols=True, file=sys.stderr,
                       disable=not sys.stderr.isatty())
        return bar

    def emit(t: Any) -> None:
        if t.number in seen:
            return
        seen.add(t.number)
        if args.quiet:
            return
        if t.state.name == "COMPLETE":
            line = _trial_line(t.number, t.user_attrs, t.values, units)
            (bar.write(line) if bar is not None else print(line, flush=True))

    def on_trial(study: Any, t: Any, _report: Any) -> None:
        b = ensure_bar(study)
        if b is not None and t.state in FINISHED_STATES:
            b.update(1)
        emit(t)

    def poll(study: Any) -> None:
        b = ensure_bar(study)
        trials = study.get_trials(deepcopy=False, states=FINISHED_STATES)
        for t in sorted(trials, key=lambda t: t.number):
            emit(t)
        if b is not None:
            b.n = len(trials)
            b.refresh()

    try:
        study, summary = run_study(spec, opts, on_trial=on_trial, poll=poll)
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - t_start
    print()
    print(f"finished trials: {summary.finished} of budget {budget} ({summary.finished - summary.finished_before} "
          f"this run) | COMPLETE {summary.complete} ({summary.simulated} simulated) | pruned {summary.pruned - summary.infeasible} | "
          f"infeasible {summary.infeasible} | failed {summary.failed}")
    print(f"promotion rate: {summary.promotion_rate:.1%} of feasible trials simulated | wall time {wall:.1f} s")
    print()
    print(format_front_table(study))
    print()
    command = dashboard_command(args.storage or spec.storage, summary.artifact_dir)
    print("open the dashboard with:")
    print(f"  {command}")
    if "***" in command:
        print("  (the password is shown as *** — substitute it, or use a ~/.pgpass / option file)")
    return 0
