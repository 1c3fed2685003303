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
    """The real evaluator (estimator + simulator of ``hydra_opt.evaluate``).

    Attributes:
        estimate_options: ``options=`` of ``estimate``: an ``EstimatorOptions`` or a study file's ``estimate:``
            mapping (None: defaults). A mapping shares the run settings the simulator options set
            (``n_requests``, ``horizon_s``, ``warmup_frac``, ``ttft_from``, ``precision``) unless it gives them;
            an ``EstimatorOptions`` object is used as given.
        simulate_options: ``options=`` of ``simulate``: a ``SimOptions`` or a study file's ``simulate:`` mapping
            (``preset: paper`` starts from ``SimOptions.paper()``; None: defaults).
        file: File name for error messages.
        slo: ``hydra_opt.evaluate.slo.Slo`` behind ``goodput_tok_s``/``slo_attainment`` (None: the default SLO);
            both are added to every estimate and simulation.
        capacity: ``objectives.CapacitySettings``: when set, ``capacity_req_s`` (and ``capacity_runs``) is added
            too — by the estimator's search for estimates, by a simulated search started at the estimated capacity
            for simulations (None: not computed; it costs several simulations).
    """

    estimate_options: Any = None
    simulate_options: Any = None
    file: str = "<study>"
    slo: Any = None
    capacity: Any = None
    _cache: dict[tuple[str, str], tuple[Any, Any]] = field(default_factory=dict, repr=False)
    _sim_opts: Any = field(default=None, repr=False)
    _est_opts: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        from hydra_opt.evaluate import SimOptions
        from hydra_opt.evaluate.estimator import EstimatorOptions

        self._sim_opts = _options(SimOptions, self.simulate_options, self.file, "simulate")
        if isinstance(self.estimate_options, EstimatorOptions):
            self._est_opts = self.estimate_options
            return
        est = dict(self.estimate_options or {})
        # The estimate must describe the run the simulator performs: share the common settings unless given.
        if self._sim_opts is not None:
            for key in _SHARED_OPTIONS:
                if key not in est and getattr(self._sim_opts, key, None) is not None:
                    est[key] = getattr(self._sim_opts, key)
        self._est_opts = _options(EstimatorOptions, est, self.file, "estimate")

    @property
    def sim_options(self) -> Any:
        """The ``SimOptions`` ``simulate_options`` resolves to (``preset: paper`` applied; None: defaults)."""
        return self._sim_opts

    def design(self, design: Mapping[str, Any]) -> Any:
        from hydra_opt.system.design import DesignPoint

        return DesignPoint.from_dict(dict(design))

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

        return list(feasibility(design, model))

    def estimate(self, design: Any, model: Any, workload: Any) -> dict[str, float]:
        from hydra_opt.evaluate.estimator import estimate

        est = estimate(design, model, workload, options=self._est_opts)
        slo = self._est_slo(est, design, model, workload)
        return {**_metrics_of(est, design, self._precision(self._est_opts)), **slo}

    def _slo(self) -> Any:
        from hydra_opt.evaluate.slo import DEFAULT_SLO

        return self.slo or DEFAULT_SLO

    def _est_slo(self, est: Any, design: Any, model: Any, workload: Any) -> dict[str, float]:
        """SLO metrics of an estimate (capacity by the estimator's search when :attr:`capacity` is set)."""
        from hydra_opt.evaluate.estimator.goodput import estimated_capacity, estimated_slo

        out = estimated_slo(est, self._slo())
        if self.capacity is not None:
            c = estimated_capacity(design, model, self._capacity_workload(workload), options=self._est_opts,
                                   slo=self._slo(), tolerance=self.capacity.tolerance, window_s=self.capacity.window_s)
            out.update(capacity_req_s=c.capacity_req_s, capacity_runs=float(len(c.runs)))
        return out

    def _capacity_workload(self, workload: Any) -> Any:
        n = getattr(self.capacity, "requests", None)
        if n is None or not hasattr(workload, "n_requests"):
            return workload
        import dataclasses

        return dataclasses.replace(workload, n_requests=int(n), horizon_s=None)

    def estimate_many(self, designs: list[Any], model: Any, workload: Any) -> list[dict[str, float]]:
        """Estimates of many designs at once (the estimator's vectorised design-space path)."""
        from hydra_opt.evaluate.estimator import estimate_space

        prec = self._precision(self._est_opts)
        results = estimate_space(designs, model, workload, options=self._est_opts)
        return [{**_metrics_of(e, d, prec), **self._est_slo(e, d, model, workload)} for e, d in zip(results, designs)]

    def simulate(self, design: Any, model: Any, workload: Any, *, seed: int) -> SimOutcome:
        from hydra_opt.evaluate import simulate

        from hydra_opt.evaluate.simulator.goodput import simulated_capacity, slo_metrics

        res = simulate(design, model, workload, seed=seed, options=self._sim_opts)
        metrics = {**_metrics_of(res, design, self._precision(self._sim_opts)), **slo_metrics(res, self._slo())}
        if self.capacity is not None:
            from hydra_opt.evaluate.estimator.goodput import estimated_capacity

            cw = self._capacity_workload(workload)
            window = self.capacity.window_s
            start = estimated_capacity(design, model, cw, options=self._est_opts, slo=self._slo(),
                                       tolerance=self.capacity.tolerance, window_s=window).capacity_req_s
            c = simulated_capacity(design, model, cw, seed=seed, options=self._sim_opts, slo=self._slo(),
                                   tolerance=self.capacity.tolerance, max_runs=self.capacity.max_runs,
                                   start_req_s=start if start > 0 else None, window_s=window)
            metrics.update(capacity_req_s=c.capacity_req_s, capacity_runs=float(len(c.runs)))
        return SimOutcome(metrics, res)

    @staticmethod
    def _precision(opts: Any) -> str | None:
        """The precision an options object forces on the TSTC-like chiplets (None: the design's)."""
        return getattr(opts, "precision", None) if opts is not None else None


#: Settings that describe the evaluated run itself and must agree between estimator and simulator.
_SHARED_OPTIONS: tuple[str, ...] = ("n_requests", "horizon_s", "warmup_frac", "ttft_from", "precision", "token_budget")


def _options(cls: Any, data: Any, file: str, key: str) -> Any:
    """An options dataclass from a study's mapping (``preset: paper`` starts from ``cls.paper()``), or ``data``
    itself when it already is one."""
    import dataclasses

    from hydra_opt.config import ConfigError

    if isinstance(data, cls):
        return data
    if not data:
        return None
    data = dict(data)
    preset = data.pop("preset", None)
    names = {f.name for f in dataclasses.fields(cls)} - {"paper_preset"}
    for k in data:
        if k not in names:
            raise ConfigError(f"is not a known option; allowed: preset, {', '.join(sorted(names))}", file=file,
                              key=f"{key}.{k}")
    if preset not in (None, "paper", "default"):
        raise ConfigError("is not one of: default, paper", file=file, key=f"{key}.preset", value=preset)
    if preset == "paper" and not hasattr(cls, "paper"):
        raise ConfigError("has no paper preset", file=file, key=f"{key}.preset", value=preset)
    try:
        return cls.paper(**data) if preset == "paper" else cls(**data)
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
