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
    p.add_argument("--adopt", action="store_true",
                   help="claim an existing study that has no hydra_opt fingerprint (created outside hydra_opt, or "
                        "its creation was interrupted) for this study file")
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


def _trial_line(number: int, user_attrs: dict, values: list[float] | None, metric_units: list[tuple[str, str]],
                outcome: str = "simulated", reason: str = "") -> str:
    """One line per finished trial: simulated values, or why the trial was not simulated."""
    from hydra_opt.dse.report import design_label

    def fmt(prefix: str) -> str:
        out = []
        for m, unit in metric_units:
            v = user_attrs.get(f"{prefix}{m}")
            out.append("-" if v is None else f"{v:.4g} {unit}".strip())
        return ", ".join(out)

    label = design_label(user_attrs.get("design"))  # the label (older studies: the dict)
    if outcome == "infeasible":
        return f"trial {number:5d} {'infeasible':<18s} {reason}  {label}"
    dup = user_attrs.get("duplicate_of")
    if dup is not None:
        how = f"duplicate of {dup}"
    elif outcome == "simulated":
        how = f"promoted: {user_attrs.get('promotion', '')}"
    else:
        how = f"pruned: {user_attrs.get('promotion') or outcome}"
    sim = f" -> sim [{fmt('sim_')}]" if outcome in ("simulated", "duplicate") else ""
    return f"trial {number:5d} {how:<18s} est [{fmt('est_')}]{sim}  {label}"


def _pairs_text(pairs: Any) -> str:
    """``llama-3-8b on quickstart-chat`` (file references shortened to their stem)."""
    from hydra_opt.dse.report import _short_ref

    shown = [f"{_short_ref(m)} on {_short_ref(w)}" for m, w in pairs]
    return ", ".join(shown[:3]) + (f" (+{len(shown) - 3} pairs)" if len(shown) > 3 else "")


class _Progress:
    """The tqdm bar of a run: finished trials of the study out of the budget, never more than the budget.

    The count is read from the storage once (finished trials before this run's first one), then advanced by the
    trials this process sees finish; the rate is the run's average since its start (``t_start``, a ``time.time()``),
    not measured from the first trial's end (which gave thousands of trials/s).
    """

    def __init__(self, total: int | None, t_start: float, quiet: bool) -> None:
        self.total, self.t_start, self.quiet = total, t_start, quiet
        self.bar: Any = None
        self.counted: set[int] = set()

    def _make(self, initial: int) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=self.total, initial=self._clamp(initial), unit="trial", dynamic_ncols=True,
                        file=sys.stderr, disable=not sys.stderr.isatty(), smoothing=0)
        self.bar.start_t = self.bar.last_print_t = self.t_start

    def _clamp(self, n: int) -> int:
        return n if self.total is None else min(n, self.total)

    def trial_finished(self, study: Any, number: int) -> None:
        """A trial of this process finished (COMPLETE or PRUNED)."""
        if self.quiet or number in self.counted:
            return
        from hydra_opt.dse.objective import FINISHED_STATES

        if self.bar is None:
            done = study.get_trials(deepcopy=False, states=FINISHED_STATES)
            self.counted.update(t.number for t in done)
            self.counted.add(number)
            self._make(len(self.counted))
            return
        self.counted.add(number)
        self.bar.n = self._clamp(len(self.counted))
        self.bar.refresh()

    def set_finished(self, study: Any, n: int) -> None:
        """Several workers: the finished count read from the storage."""
        if self.quiet:
            return
        if self.bar is None:
            self._make(n)
        self.bar.n = self._clamp(n)
        self.bar.refresh()

    def write(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line)
        else:
            print(line, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run(args: argparse.Namespace) -> int:
    from hydra_opt.evaluate.objectives import METRICS
    from hydra_opt.dse.reasons import count_reasons, format_reasons, trial_reason
    from hydra_opt.dse.report import format_front_table, publish_to_dashboard
    from hydra_opt.dse.storages import redact_url
    from hydra_opt.dse.objective import FINISHED_STATES
    from hydra_opt.dse.runner import RunOptions, run_study
    from hydra_opt.dse.spec import load_study_spec

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
                      storage_options=storage_options, adopt=args.adopt)
    metrics = [m.name for m in spec.objectives.metrics]
    units = [(m, METRICS[m].unit) for m in metrics]
    storage_shown = redact_url(args.storage or spec.storage)
    budget = n_trials if n_trials is not None else spec.n_trials
    goal = (f"exhaustive sweep (simulate: {spec.exhaustive.simulate})" if spec.exhaustive is not None
            else f"budget {budget} finished trials")
    t_start = time.perf_counter()
    progress = _Progress(budget, time.time(), args.quiet)  # tqdm's clock is time.time

    def on_start(_study: Any) -> None:
        # Printed once everything is validated and the study is open: an error never follows a study header.
        if not args.quiet:
            print(f"study {args.study_name or spec.name!r} on {storage_shown}: {_pairs_text(spec.pairs)}; "
                  f"{goal}, {workers} worker(s), sampler {spec.sampler.cls.__name__}, "
                  f"space {spec.space.name} ({spec.space.size():,} designs)", flush=True)
        if spec.evaluator:
            # docs/distributed.md "Trust": a study file naming an evaluator is code, run with this user's rights.
            print(f"note: {args.study}: evaluator {spec.evaluator!r} is imported and run (a study file with "
                  "'evaluator:' is code: run only study files you trust)", flush=True)
        progress.t_start = time.time()

    seen: set[int] = set()

    def emit(t: Any) -> None:
        if t.number in seen or t.state not in FINISHED_STATES:
            return
        seen.add(t.number)
        if not args.quiet:
            outcome, reason = trial_reason(t)
            progress.write(_trial_line(t.number, t.user_attrs, t.values, units, outcome, reason))

    def on_trial(study: Any, t: Any, _report: Any) -> None:
        if t.state in FINISHED_STATES:
            emit(t)
            progress.trial_finished(study, t.number)

    def poll(study: Any) -> None:
        trials = study.get_trials(deepcopy=False, states=FINISHED_STATES)
        for t in sorted(trials, key=lambda t: t.number):
            emit(t)
        progress.set_finished(study, len(trials))

    try:
        study, summary = run_study(spec, opts, on_trial=on_trial, poll=poll, on_start=on_start)
    finally:
        progress.close()
    wall = time.perf_counter() - t_start
    publish_to_dashboard(study)  # study note (reasons, front) and the titled Pareto plot
    print()
    of = "in the sweep" if spec.exhaustive is not None else f"of budget {budget}"
    print(f"finished trials: {summary.finished} {of} ({summary.finished_here} "
          f"this run) | COMPLETE {summary.complete} ({summary.simulated} simulated) | pruned {summary.pruned - summary.infeasible} | "
          f"infeasible {summary.infeasible} | failed {summary.failed}")
    for line in format_reasons(count_reasons(study.get_trials(deepcopy=False))):
        print(line)
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
