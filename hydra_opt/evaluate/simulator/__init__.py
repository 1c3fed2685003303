"""The event-driven serving simulator (docs/simulator.md): engine, options (incl. the paper preset), metrics."""

from __future__ import annotations

from hydra_opt.evaluate.simulator import _accel

_accel.guard()  # before the engine is imported: never run a stale compiled engine/flows

from hydra_opt.evaluate.simulator._accel import compiled_modules  # noqa: E402
from hydra_opt.evaluate.simulator.engine import Engine, RawRun  # noqa: E402
from hydra_opt.evaluate.simulator.metrics import SimResult, summarize  # noqa: E402
from hydra_opt.evaluate.simulator.options import SimOptions  # noqa: E402
from hydra_opt.evaluate.simulator.run import run_system  # noqa: E402
from hydra_opt.evaluate.simulator.system import SimModel, SimSystem, greedy_omega  # noqa: E402

__all__ = [
    "Engine",
    "RawRun",
    "SimModel",
    "SimOptions",
    "SimResult",
    "SimSystem",
    "compiled_modules",
    "greedy_omega",
    "run_system",
    "summarize",
]
