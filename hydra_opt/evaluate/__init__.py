"""evaluate layer: the single cost model (opcost), the event-driven simulator and the estimator."""

from __future__ import annotations

from typing import Any

from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.evaluate.simulator import SimOptions, SimResult

__all__ = ["simulate", "Scenario", "SimOptions", "SimResult"]


def simulate(design: Any, model: Any, workload: Any, *, seed: int = 0, scenario: Scenario | None = None,
             options: SimOptions | None = None, library: Any = None) -> SimResult:
    """Simulate ``design`` serving ``workload`` with ``model`` (docs/simulator.md, metrics in docs/metrics.md).

    Args:
        design: A ``hydra_opt.system.design.DesignPoint`` (or a path to a design YAML).
        model: A model name (``"nemotron-h-4b"``) or ``hydra_opt.workload.models.Model``.
        workload: A workload name (``"hydra-chat"``), a path, a ``Workload`` or a ``Requests`` record
            (anything with ``arrival_s``, ``prompt_tokens``, ``output_tokens`` arrays).
        seed: Seed of the request stream (and of random placement unless ``options.placement_seed``).
        scenario: The run (:class:`Scenario`; default: the clean defaults; :meth:`Scenario.paper` for the HYDRA
            artifact's setup). ``estimate`` reads the same object.
        options: Engine knobs (:class:`SimOptions`).
        library: Chiplet library (default: ``ChipletLibrary.default(scenario.library_preset)``).
    """
    from hydra_opt.evaluate.simulator.driver import simulate_design

    return simulate_design(design, model, workload, seed=seed, scenario=scenario, options=options, library=library)

# The fast estimator (docs/estimator.md) — re-exported here (added by the estimator work).
from hydra_opt.evaluate.estimator import Estimate, EstimatorOptions, estimate  # noqa: E402

__all__ += ["estimate", "Estimate", "EstimatorOptions"]
