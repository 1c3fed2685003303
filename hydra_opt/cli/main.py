"""``python -m hydra_opt`` — the subcommand dispatcher.

Each subcommand lives in its own module ``hydra_opt/cli/<name>.py`` that defines
``register(subparsers) -> argparse.ArgumentParser`` and ``run(args) -> int``. Modules are imported lazily so that
``--help`` and light commands stay fast. Every :class:`~hydra_opt.config.ConfigError` becomes one line on stderr,
``hydra_opt: error: <file>: <key>: <value> <problem>``, and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Sequence

from hydra_opt.config.errors import EXIT_STORAGE, EXIT_USAGE, ConfigError

__all__ = ["main", "SUBCOMMANDS", "build_parser", "fail", "EXIT_STORAGE"]

#: name -> (module, one-line help). Order is the order shown in ``--help``.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "run": ("hydra_opt.cli.run_cmd", "launch or resume an Optuna DSE study from a study YAML"),
    "simulate": ("hydra_opt.cli.simulate_cmd", "simulate one design on one workload (event-driven)"),
    "estimate": ("hydra_opt.cli.estimate_cmd", "estimate one design on one workload (Markov/fluid model)"),
    "dynacore": ("hydra_opt.cli.dynacore_cmd", "DynaCore core model: worked checks and batch sweeps"),
    "report": ("hydra_opt.cli.report_cmd", "write a study's Pareto front, plots and summary"),
    "validate": ("hydra_opt.cli.validate_cmd", "validate configuration files without running anything"),
    "recover": ("hydra_opt.cli.recover_cmd", "mark stale RUNNING trials of a journal storage as FAIL"),
    "list": ("hydra_opt.cli.list_cmd", "list the shipped models, workloads, chiplets and memories"),
}


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors use the tool's one-line format (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        fail(message)


def fail(message: str) -> None:
    """Print ``hydra_opt: error: message`` and exit 2."""
    print(f"hydra_opt: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _load(name: str):
    module_name, _ = SUBCOMMANDS[name]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None
        raise


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser; with ``only`` set, just that subcommand is imported and registered."""
    parser = _Parser(
        prog="python -m hydra_opt",
        description="hydra_opt: design-space exploration of chiplet LLM-serving systems as an Optuna plugin.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (_, help_text) in SUBCOMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        module = _load(name)
        if module is None:
            sub.add_parser(name, help=f"{help_text} (not available in this build)")
            continue
        p = module.register(sub)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m hydra_opt`` and the ``hydra-opt`` script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN and threading.current_thread() is threading.main_thread():
        # Started with SIGINT ignored (a shell's background job): Ctrl-C / kill -INT must still stop a command.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    first = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=first if first in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    runner = getattr(args, "_run", None)
    if runner is None:
        if args.command is None:
            parser.print_help()
            return 0
        fail(f"subcommand {args.command!r} is not available in this build")
    try:
        return int(runner(args) or 0)
    except ConfigError as exc:
        print(f"hydra_opt: error: {exc.format()}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("hydra_opt: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - only a storage outage past the retry bound is handled here
        from hydra_opt.dse.storage_retry import storage_outage  # lazily: --help and input errors stay Optuna-free

        outage = storage_outage(exc)
        if outage is None:
            raise
        print(f"hydra_opt: error: {outage}", file=sys.stderr)
        return EXIT_STORAGE


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
