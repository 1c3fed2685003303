"""Run the engine on an already built :class:`SimSystem` (the entry point tests and ``simulate`` share)."""

from __future__ import annotations

import numpy as np

from hydra_opt.runtime.scheduling import make_scheduler

from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.evaluate.simulator.engine import Engine
from hydra_opt.evaluate.simulator.metrics import SimResult, summarize
from hydra_opt.evaluate.simulator.options import SimOptions
from hydra_opt.evaluate.simulator.system import SimModel, SimSystem, greedy_omega

__all__ = ["run_system"]


def run_system(
    system: SimSystem,
    model: SimModel,
    arrival_s: np.ndarray,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    options: SimOptions | None = None,
    *,
    scenario: Scenario | None = None,
    batching: str = "continuous",
    scheduler: str = "static",
    max_batch: int = 8,
    seed: int = 0,
    workload: str = "",
) -> SimResult:
    """Simulate ``system`` serving the given requests.

    Args:
        system: Placed system (its ``omega`` is used by the static/elastic schedulers; computed greedily if None).
        model: Per-block cost coefficients.
        arrival_s, prompt_tokens, output_tokens: The requests (sorted by arrival; lengths ≥ 1 output token).
        options: Engine knobs (default :class:`SimOptions`).
        scenario: The run (default :class:`~hydra_opt.evaluate.scenario.Scenario`); its horizon is used as given.
        batching: ``static`` or ``continuous``.
        scheduler: ``static``, ``fcfs``, ``worksteal`` or ``elastic``.
        max_batch: Maximum requests per batch.
        seed: Recorded in the result (the engine itself is deterministic).
        workload: Workload label for the result.
    """
    opt = options or SimOptions()
    scn = scenario or Scenario()
    arrival_s = np.asarray(arrival_s, dtype=np.float64)
    if arrival_s.size > 1 and np.any(np.diff(arrival_s) < 0):
        raise ValueError("arrival_s must be sorted")
    omega = system.omega if system.omega is not None else greedy_omega(system, model, batch=max_batch)
    sched = make_scheduler(scheduler, omega, lend=scn.lend)
    eng = Engine(
        system,
        model,
        arrival_s,
        np.asarray(prompt_tokens),
        np.asarray(output_tokens),
        opt,
        scn,
        batching=batching,
        scheduler=sched,
        max_batch=max_batch,
    )
    raw = eng.run()
    return summarize(raw, scn, design=system.name, model=model.name, workload=workload, seed=seed, options=opt)
