"""The evaluator protocol: what the study's objective needs from the layers below, and its real implementation.

The objective only talks to an :class:`Evaluator`. :class:`HydraEvaluator` is the product implementation: designs
are ``hydra_opt.system.design.DesignPoint``, feasibility is ``hydra_opt.system.feasibility.feasibility``, estimates come
from ``hydra_opt.evaluate.estimate`` (the Markov/fluid estimator) and simulations from
``hydra_opt.evaluate.simulate`` (the event-driven simulator). Tests of the pruner, search spaces and study
mechanics use small evaluators written in the tests, so they do not depend on the simulator's speed or numbers.

Both estimates and simulations carry ``accuracy_cost``
(:func:`hydra_opt.hardware.dynacore.accuracy.design_accuracy_cost`): the quantisation accuracy drop of the design's
precisions in percentage points vs FP16, from the DynaCore paper's Llama-3.1-8B table (Sec. 8.2). It depends only on the design, so every design the
evaluator accepts has one and an ``accuracy_cost`` objective never fails mid-study.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Evaluator",
    "SimOutcome",
    "HydraEvaluator",
    "numeric_dict",
    "resolve_run",
]


@dataclass
class SimOutcome:
    """A simulation's metrics plus the raw result (for artifacts: link utilisation, per-request metrics).

    Attributes:
        metrics: Flat ``{name: float}`` (``throughput_tok_s``, ``ttft_mean_s``, ``tpot_mean_s``, ...).
        raw: The evaluator's result object (``SimResult``) or None.
    """

    metrics: dict[str, float]
    raw: Any = None


@runtime_checkable
class Evaluator(Protocol):
    """What a study needs to score a design."""

    def design(self, design: Mapping[str, Any]) -> Any:
        """Build the design object from a design dict (raises ``ConfigError`` for a malformed dict)."""

    def load(self, model: Any, workload: Any) -> tuple[Any, Any]:
        """Load a (model, workload) pair: names or paths, or objects a Python caller built."""

    def feasibility(self, design: Any, model: Any) -> list[str]:
        """Reasons the design cannot serve the model (empty = feasible); never raises for a bad design."""

    def estimate(self, design: Any, model: Any, workload: Any) -> dict[str, float]:
        """Fast estimate → flat metric dict."""

    def simulate(self, design: Any, model: Any, workload: Any, *, seed: int) -> SimOutcome:
        """Full simulation → metrics and the raw result."""


def numeric_dict(d: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Flatten the finite numeric leaves of a nested mapping (``a.b`` keys for nested ones)."""
    out: dict[str, float] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)):
            if math.isfinite(float(v)) or prefix == "":
                out[key] = float(v)
        elif isinstance(v, Mapping):
            out.update(numeric_dict(v, prefix=f"{key}."))
    return out


@dataclass
class HydraEvaluator:
    """The real evaluator (estimator + simulator of ``hydra_opt.evaluate``), reading one
    :class:`~hydra_opt.evaluate.scenario.Scenario`.

    A study's run is described once: ``scenario`` (a ``Scenario`` or a study's ``scenario:`` mapping, ``preset:
    paper`` allowed) is resolved here to one frozen object that both ``estimate`` and ``simulate`` receive.
    ``simulate_options`` / ``estimate_options`` hold each evaluator's own knobs; for compatibility with older study
    files, scenario settings and design overrides found there are moved onto the scenario / the design overrides
    (``preset: paper`` of ``simulate:`` included), and two blocks giving one setting different values is an error.

    Attributes:
        estimate_options: ``EstimatorOptions`` knobs: an ``EstimatorOptions`` or a study's ``estimate:`` mapping.
        simulate_options: ``SimOptions`` knobs: a ``SimOptions`` or a study's ``simulate:`` mapping.
        file: The study file (for error messages).
        scenario: The run (resolved to a ``Scenario`` by ``__post_init__``).
        design_overrides: Design fields every design gets (``max_batch``, ``batching``, ``scheduler``,
            ``placement``), applied by ``design()`` before anything is derived.
        slo: ``hydra_opt.evaluate.slo.Slo`` behind ``goodput_tok_s``/``slo_attainment`` (the objectives' SLO; None:
            the scenario's, else the default SLO); carried by the scenario (``scenario.slo``) both evaluators get.
        capacity: ``hydra_opt.evaluate.slo.CapacitySettings``: when set, ``capacity_req_s`` (with ``capacity_runs``
            and ``capacity_lower_bound``) is added
            too — by the estimator's search for estimates, by a simulated search started at the estimated capacity
            for simulations (None: not computed; it costs several simulations).
    """

    estimate_options: Any = None
    simulate_options: Any = None
    file: str = "<study>"
    scenario: Any = None
    design_overrides: Mapping[str, Any] | None = None
    slo: Any = None
    capacity: Any = None
    _cache: dict[tuple[str, str], tuple[Any, Any]] = field(default_factory=dict, repr=False)
    _sim_opts: Any = field(default=None, repr=False)
    _est_opts: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.scenario, self._sim_opts, self._est_opts, self.design_overrides = resolve_run(
            self.scenario, self.simulate_options, self.estimate_options, self.design_overrides, file=self.file)
        if self.slo is not None and self.scenario.slo != self.slo:  # the objectives' SLO rides on the one scenario
            self.scenario = self.scenario.with_(slo=self.slo)

    @property
    def sim_options(self) -> Any:
        """The ``SimOptions`` (engine knobs) ``simulate_options`` resolves to."""
        return self._sim_opts

    @property
    def est_options(self) -> Any:
        """The ``EstimatorOptions`` (model knobs) ``estimate_options`` resolves to."""
        return self._est_opts

    def design(self, design: Mapping[str, Any]) -> Any:
        from hydra_opt.system.design import DesignPoint

        return DesignPoint.from_dict(dict(design)).with_overrides(self.design_overrides, file=self.file,
                                                                   key="design_overrides.")

    def load(self, model: Any, workload: Any) -> tuple[Any, Any]:
        """Load a (model, workload) pair: names or paths are read (once), ``Model``/``Workload`` objects pass."""
        from hydra_opt.workload.models import load_model
        from hydra_opt.workload.workload import load_workload

        if not isinstance(model, (str, os.PathLike)) or not isinstance(workload, (str, os.PathLike)):
            m = load_model(model) if isinstance(model, (str, os.PathLike)) else model
            return m, load_workload(workload) if isinstance(workload, (str, os.PathLike)) else workload
        key = (str(model), str(workload))
        if key not in self._cache:
            self._cache[key] = (load_model(model), load_workload(workload))
        return self._cache[key]

    def feasibility(self, design: Any, model: Any) -> list[str]:
        from hydra_opt.system.feasibility import feasibility

        return list(feasibility(design, model, self.scenario.library()))

    def estimate(self, design: Any, model: Any, workload: Any) -> dict[str, float]:
        from hydra_opt.evaluate.estimator import estimate

        est = estimate(design, model, workload, scenario=self.scenario, options=self._est_opts)
        slo = self._est_slo(est, design, model, workload)
        return {**_metrics_of(est, design, self.scenario.precision), **slo}

    def _slo(self) -> Any:
        from hydra_opt.evaluate.slo import DEFAULT_SLO

        return self.scenario.slo or DEFAULT_SLO

    def _est_slo(self, est: Any, design: Any, model: Any, workload: Any) -> dict[str, float]:
        """SLO metrics of an estimate (capacity by the estimator's search when :attr:`capacity` is set)."""
        from hydra_opt.evaluate.estimator.goodput import estimated_capacity, estimated_slo

        out = estimated_slo(est, self._slo())
        if self.capacity is not None:
            c = estimated_capacity(design, model, workload, scenario=self.scenario, options=self._est_opts,
                                   slo=self._slo(), capacity=self.capacity)
            out.update(_capacity_metrics(c))
        return out

    def estimate_many(self, designs: list[Any], model: Any, workload: Any) -> list[dict[str, float]]:
        """Estimates of many designs at once (the estimator's vectorised design-space path)."""
        from hydra_opt.evaluate.estimator import estimate_space

        results = estimate_space(designs, model, workload, scenario=self.scenario, options=self._est_opts)
        return [{**_metrics_of(e, d, self.scenario.precision), **self._est_slo(e, d, model, workload)}
                for e, d in zip(results, designs)]

    def simulate(self, design: Any, model: Any, workload: Any, *, seed: int) -> SimOutcome:
        from hydra_opt.evaluate import simulate

        from hydra_opt.evaluate.simulator.goodput import simulated_capacity, slo_metrics

        res = simulate(design, model, workload, seed=seed, scenario=self.scenario, options=self._sim_opts)
        metrics = {**_metrics_of(res, design, self.scenario.precision), **slo_metrics(res, self._slo())}
        if self.capacity is not None:
            from hydra_opt.evaluate.estimator.goodput import estimated_capacity

            start = estimated_capacity(design, model, workload, scenario=self.scenario, options=self._est_opts,
                                       slo=self._slo(), capacity=self.capacity).capacity_req_s
            c = simulated_capacity(design, model, workload, seed=seed, scenario=self.scenario, options=self._sim_opts,
                                   slo=self._slo(), capacity=self.capacity, start_req_s=start if start > 0 else None)
            metrics.update(_capacity_metrics(c))
        return SimOutcome(metrics, res)


def _capacity_metrics(c: Any) -> dict[str, float]:
    """A capacity search's metrics: ``capacity_req_s``, its run count and ``capacity_lower_bound`` (1.0 when no
    rate missing the SLO was found, so the capacity is only a lower bound; docs/metrics.md)."""
    return {"capacity_req_s": c.capacity_req_s, "capacity_runs": float(len(c.runs)),
            "capacity_lower_bound": float(c.lower_bound)}


#: Old ``estimate:`` keys naming a scenario setting under another name.
_LEGACY_RENAMES = {"throughput_window": "window", "max_batches_in_flight": "max_batches"}


def resolve_run(scenario: Any, simulate: Mapping[str, Any] | None, estimate: Mapping[str, Any] | None,
                overrides: Mapping[str, Any] | None = None, *, file: str = "<study>") -> tuple[Any, Any, Any, dict]:
    """(Scenario, SimOptions, EstimatorOptions, design overrides) of a study's blocks.

    ``scenario`` is a ``Scenario`` or a ``scenario:`` mapping. Older studies put scenario settings (and
    ``preset: paper``) into ``simulate:``/``estimate:`` and design overrides into ``simulate:``; those are moved
    where they belong. A setting given twice with different values is an error naming both places.

    Raises:
        ConfigError: For an unknown key, a bad value or two disagreeing values (exit 2 in the CLI).
    """
    import dataclasses

    from hydra_opt.config import ConfigError
    from hydra_opt.evaluate import Scenario, SimOptions
    from hydra_opt.evaluate.estimator import EstimatorOptions
    from hydra_opt.evaluate.scenario import SCENARIO_KEYS, scenario_from_mapping
    from hydra_opt.system.design import OVERRIDE_KEYS

    sim_obj = simulate if isinstance(simulate, SimOptions) else None
    est_obj = estimate if isinstance(estimate, EstimatorOptions) else None
    simulate = None if sim_obj is not None else simulate
    estimate = None if est_obj is not None else estimate
    if isinstance(scenario, Scenario) and not simulate and not estimate:
        return scenario, sim_obj or SimOptions(), est_obj or EstimatorOptions(), dict(overrides or {})
    scn: dict[str, Any] = {}
    where: dict[str, str] = {}
    over: dict[str, Any] = dict(overrides or {})
    knobs: dict[str, dict[str, Any]] = {"simulate": {}, "estimate": {}}
    fields = {"simulate": {f.name for f in dataclasses.fields(SimOptions)},
              "estimate": {f.name for f in dataclasses.fields(EstimatorOptions)}}

    def put(key: str, value: Any, place: str) -> None:
        if key in scn and scn[key] != value:
            raise ConfigError(f"disagrees with {where[key]} ({scn[key]!r}): a run has one {key}", file=file,
                              key=f"{place}", value=value)
        scn[key], where[key] = value, place

    if isinstance(scenario, Scenario):
        for f in dataclasses.fields(Scenario):
            put(f.name, getattr(scenario, f.name), "scenario")
    else:
        for k, v in dict(scenario or {}).items():
            put(k, v, f"scenario.{k}")
    for block, data in (("simulate", simulate), ("estimate", estimate)):
        for k, v in dict(data or {}).items():
            name = _LEGACY_RENAMES.get(k, k)
            if name == "preset" or name in SCENARIO_KEYS:
                if name == "preset" and v == "default":
                    continue
                if name == "placement_preset" and v == "paper" and scn.get("preset") == "paper":
                    continue  # the paper preset's own value, restated
                put(name, v, f"{block}.{k}")
            elif block == "simulate" and k in OVERRIDE_KEYS:
                over[k] = v
            elif k in fields[block]:
                knobs[block][k] = v
            else:
                what = "SimOptions" if block == "simulate" else "EstimatorOptions"
                raise ConfigError(f"is not a known option; {what}: {', '.join(sorted(fields[block]))} (run settings "
                                  "belong in scenario:)", file=file, key=f"{block}.{k}")
    if isinstance(scenario, Scenario) and scn == {f.name: getattr(scenario, f.name) for f in dataclasses.fields(Scenario)}:
        run = scenario
    else:
        base = {k: v for k, v in scn.items() if k not in ("slo",)}
        run = scenario_from_mapping(base, file=file)
        if scn.get("slo") is not None:
            run = run.with_(slo=scn["slo"])
    return (run, sim_obj or _options(SimOptions, knobs["simulate"], file, "simulate"),
            est_obj or _options(EstimatorOptions, knobs["estimate"], file, "estimate"), over)


def _options(cls: Any, data: Mapping[str, Any], file: str, key: str) -> Any:
    """An options dataclass from a study's mapping of knobs (keys already checked)."""
    from hydra_opt.config import ConfigError

    try:
        return cls(**data)
    except ConfigError as exc:
        raise ConfigError(exc.problem, file=file, key=f"{key}.{exc.key}" if exc.key else key, value=exc.value,
                          show_value=exc.show_value) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"rejected: {exc}", file=file, key=key) from None


def _metrics_of(result: Any, design: Any, precision: str | None = None) -> dict[str, float]:
    """A result's flat metrics; area and accuracy cost come from the design when the result does not carry them."""
    d = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    out = numeric_dict(d)
    for name in ("throughput_tok_s", "ttft_mean_s", "tpot_mean_s"):
        if name not in out and hasattr(result, name):
            out[name] = float(getattr(result, name))
    if "area_mm2" not in out:
        area = getattr(design, "area_mm2", None)
        area = area() if callable(area) else area
        if isinstance(area, (int, float)):
            out["area_mm2"] = float(area)
    if "accuracy_cost" not in out and hasattr(design, "counts"):
        from hydra_opt.hardware.dynacore.accuracy import design_accuracy_cost

        out["accuracy_cost"] = design_accuracy_cost(design, precision=precision)
    return out
