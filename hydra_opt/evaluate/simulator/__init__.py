"""The event-driven serving simulator (docs/simulator.md): engine, options (incl. the paper preset), metrics."""

from __future__ import annotations

from hydra_opt.evaluate.simulator.engine import Engine, RawRun
from hydra_opt.evaluate.simulator.metrics import SimResult, summarize
from hydra_opt.evaluate.simulator.options import SimOptions
from hydra_opt.evaluate.simulator.run import run_system
from hydra_opt.evaluate.simulator.system import SimModel, SimSystem, greedy_omega

__all__ = [
    "Engine",
    "RawRun",
    "SimModel",
    "SimOptions",
    "SimResult",
    "SimSystem",
    "greedy_omega",
    "run_system",
    "summarize",
]
