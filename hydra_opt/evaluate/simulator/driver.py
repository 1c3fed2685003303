"""``simulate(design, model, workload)``: resolve names, build the system, replay the scenario, run, summarise."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.evaluate.simulator.build import build_system
from hydra_opt.evaluate.simulator.metrics import SimResult
from hydra_opt.evaluate.simulator.options import SimOptions
from hydra_opt.evaluate.simulator.run import run_system
from hydra_opt.evaluate.simulator.system import SimModel

__all__ = ["simulate_design", "resolve_requests"]


def resolve_requests(workload: Any, seed: int, scenario: Scenario) -> tuple[str, np.ndarray, np.ndarray, np.ndarray, float | None]:
    """(name, arrival_s, prompt_tokens, output_tokens, workload horizon) after the scenario's request rules."""
    name = ""
    horizon = None
    if hasattr(workload, "arrival_s"):
        req = workload
        name = getattr(workload, "name", "requests")
    else:
        if isinstance(workload, (str, os.PathLike)):
            from hydra_opt.workload.workload import load_workload

            workload = load_workload(workload)
        name = workload.name
        horizon = getattr(workload, "horizon_s", None)
        req = workload.requests(seed)
    arr = np.asarray(req.arrival_s, dtype=np.float64)
    prompt = np.asarray(req.prompt_tokens, dtype=np.int64)
    out = np.asarray(req.output_tokens, dtype=np.int64)
    n = scenario.n_requests
    if n is not None:
        arr, prompt, out = arr[:n], prompt[:n], out[:n]
    if scenario.arrival_interval_s is not None:
        arr = np.arange(arr.size, dtype=np.float64) * scenario.arrival_interval_s
    prompt = np.maximum(prompt, 1)
    out = np.maximum(out, 1)
    return name, arr, prompt, out, horizon


def simulate_design(design: Any, model: Any, workload: Any, *, seed: int = 0, scenario: Scenario | None = None,
                    options: SimOptions | None = None, library: Any = None) -> SimResult:
    """See :func:`hydra_opt.evaluate.simulate`."""
    opt = options or SimOptions()
    scn = scenario or Scenario()
    if isinstance(design, (str, os.PathLike)):
        from hydra_opt.system.design import load_design

        design = load_design(design)
    if isinstance(model, (str, os.PathLike)):
        from hydra_opt.workload.models import load_model

        model = load_model(model)
    if library is None:
        library = scn.library()
    precision = scn.precision or design.precision
    sim_model = SimModel.from_model(model, precision)
    pseed = opt.placement_seed if opt.placement_seed is not None else seed
    wname, arr, prompt, out, horizon = resolve_requests(workload, seed, scn)
    # Placement sizes KV/traffic for the workload's typical request (mean prompt + output), not max_position.
    ctx = int(round(float(np.mean(prompt + out)))) if prompt.size else None
    system, info = build_system(design, model, sim_model, library=library, seed=pseed, hop_latency_s=opt.hop_latency_s,
                                placement_preset=scn.placement_preset, context_tokens=ctx, mapping=opt.mapping)
    if scn.horizon_s is None and horizon is not None:
        scn = scn.with_(horizon_s=float(horizon))
    res = run_system(
        system, sim_model, arr, prompt, out, opt,
        scenario=scn,
        batching=design.batching,
        scheduler=design.scheduler,
        max_batch=design.max_batch,
        seed=seed,
        workload=wname,
    )
    info = {**info, "grid": [system.mesh.width, system.mesh.height], "node_labels": list(system.node_labels)}
    object.__setattr__(res, "options", {**res.options, "build": info, "precision_used": precision})
    return res
