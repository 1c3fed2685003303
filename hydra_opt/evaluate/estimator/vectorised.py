"""Estimate a whole enumerated design space (exhaustive screening) with the estimator's one solver.

Every distinct design goes through :func:`hydra_opt.evaluate.estimator.single.estimate_one` on one prepared
workload; what is shared across designs is cached below it (per chiplet type × bandwidth × batch block-time tables,
LPT orders, cycle plans, family memory groups), so a space costs its distinct designs' solves, and the results are
exactly the single-design path's (issue 16 step 3: the array solver over designs that used to run here was kept
equal to it by a test, to 1e-6 in the fluid sweeps).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from hydra_opt.evaluate.estimator import core
from hydra_opt.evaluate.estimator.result import Estimate, EstimatorOptions
from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.evaluate.estimator.single import estimate_one

__all__ = ["estimate_space", "space_arrays"]

_KEYS = ("throughput_tok_s", "ttft_mean_s", "tpot_mean_s", "capacity_tok_s")


def _estimates(designs: list, model, workload, scn: Scenario, opts: EstimatorOptions) -> list[Estimate]:
    """The estimate of every design (identical designs solved once); all designs share the precision."""
    if not designs:
        return []
    prep = core.prepare(model, workload, scenario=scn, options=opts, precision=getattr(designs[0], "precision", None))
    lib = scn.library()
    seen: dict = {}
    out = []
    for d in designs:
        try:
            hit = seen.get(d)
        except TypeError:  # an unhashable design object: no sharing
            out.append(estimate_one(d, prep, opts, lib))
            continue
        if hit is None:
            hit = seen[d] = estimate_one(d, prep, opts, lib)
        out.append(hit)
    return out


def space_arrays(designs: Iterable, model, workload, *, scenario: Scenario | None = None,
                 options: EstimatorOptions | None = None) -> dict[str, np.ndarray]:
    """Throughput, TTFT, TPOT, capacity, ρ and bottleneck of every design, as arrays.

    All designs must share the precision (one prepared workload); mixed precisions are grouped by the caller.
    """
    opts = options or EstimatorOptions()
    est = _estimates(list(designs), model, workload, scenario or Scenario(), opts)
    arrays = {k: np.array([getattr(e, k) for e in est], dtype=np.float64) for k in _KEYS}
    arrays["rho"] = np.array([e.diagnostics["rho"] for e in est], dtype=np.float64)
    arrays["bottleneck"] = np.array([e.bottleneck for e in est], dtype=object)
    return arrays


def estimate_space(designs: Iterable, model, workload, *, scenario: Scenario | None = None,
                   options: EstimatorOptions | None = None) -> list[Estimate]:
    """:class:`Estimate` of every design (the single-design path's, diagnostics included)."""
    return _estimates(list(designs), model, workload, scenario or Scenario(), options or EstimatorOptions())
