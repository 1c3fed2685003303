"""The evaluator protocol: what the study's objective needs from the layers below, and its real implementation.

The objective only talks to an :class:`Evaluator`. :class:`HydraEvaluator` is the product implementation: designs
are ``hydra_opt.system.design.DesignPoint``, feasibility is ``hydra_opt.system.design.feasibility``, estimates come
from ``hydra_opt.evaluate.estimate`` (the Markov/fluid estimator) and simulations from
``hydra_opt.evaluate.simulate`` (the event-driven simulator). Tests of the pruner, search spaces and study
mechanics use small evaluators written in the tests, so they do not depend on the simulator's speed or numbers.

Both estimates and simulations carry ``accuracy_cost`` (:func:`design_accuracy_cost`): the quantisation accuracy
drop of the design's precisions in percentage points vs FP16, from the DynaCore paper's Llama-3.1-8B table
(Sec. 8.2; ``hydra_opt.hardware.dynacore.ACCURACY_DROP_PCT``). It depends only on the design, so every design the
evaluator accepts has one and an ``accuracy_cost`` objective never fails mid-study.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Evaluator",
    "SimOutcome",
    "HydraEvaluator",
    "numeric_dict",
    "design_accuracy_cost",
    "pair_accuracy_cost",
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

    def load(self, model: str, workload: str) -> tuple[Any, Any]:
        """Load a (model, workload) pair by name or path."""

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
    """The real evaluator (estimator + simulator of :mod:`hydra_opt.evaluate`).

    Attributes:
        estimate_options: Passed as ``options=`` to ``estimate``.
        simulate_options: Passed as ``options=`` to ``simulate``.
        slo: ``hydra_opt.evaluate.slo.Slo`` behind ``goodput_tok_s``/``slo_attainment`` (None: the default SLO);
            both are added to every estimate and simulation.
        capacity: ``objectives.CapacitySettings``: when set, ``capacity_req_s`` (and ``capacity_runs``) is added
            too — by the estimator's search for estimates, by a simulated search started at the estimated capacity
            for simulations (None: not computed; it costs several simulations).
    """

    estimate_options: Mapping[str, Any] | None = None
    simulate_options: Mapping[str, Any] | None = None
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
        est = dict(self.estimate_options or {})
        # The estimate must describe the run the simulator performs: share the common settings unless given.
        if self._sim_opts is not None:
            for key in _SHARED_OPTIONS:
                if key not in est and getattr(self._sim_opts, key, None) is not None:
                    est[key] = getattr(self._sim_opts, key)
        self._est_opts = _options(EstimatorOptions, est, self.file, "estimate")

    @property
    def sim_options(self) -> Any:
        """The ``SimOptions`` :attr:`simulate_options` resolves to (``preset: paper`` applied; None: defaults)."""
        return self._sim_opts

    def design(self, design: Mapping[str, Any]) -> Any:
        from hydra_opt.system.design import DesignPoint

        return DesignPoint.from_dict(dict(design))

    def load(self, model: str, workload: str) -> tuple[Any, Any]:
        key = (model, workload)
        if key not in self._cache:
            from hydra_opt.workload.models import load_model
            from hydra_opt.workload.workload import load_workload

            self._cache[key] = (load_model(model), load_workload(workload))
        return self._cache[key]

    def feasibility(self, design: Any, model: Any) -> list[str]:
        from hydra_opt.system.design import feasibility

        return list(feasibility(design, model))

    def estimate(self, design: Any, model: Any, workload: Any) -> dict[str, float]:
        from hydra_opt.evaluate.estimator import estimate

        est = estimate(design, model, workload, options=self._est_opts)
        return {**_metrics_of(est, design, self._precision(self._est_opts)), **self._est_slo(est, design, model, workload)}

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


def _options(cls: Any, data: Mapping[str, Any] | None, file: str, key: str) -> Any:
    """An options dataclass from a study's mapping; ``preset: paper`` starts from ``cls.paper()``."""
    import dataclasses

    from hydra_opt.config import ConfigError

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
        out["accuracy_cost"] = design_accuracy_cost(design, precision=precision)
    return out


# -- quantisation accuracy cost ----------------------------------------------------------------------------------
#: (weight bits, activation bits) of precision names without a DynaCore datapath. Assumption: an 8-bit float W8A8
#: costs no more accuracy than the measured INT8 W8A8 (no FP8 figure exists in the DynaCore paper).
_EXTRA_BITS: dict[str, tuple[int, int]] = {"fp8": (8, 8)}


def _bits(name: str) -> tuple[int, int]:
    """(weight bits, activation bits) of a precision name (``int8`` = W8A8, ``bf16`` = FP16 widths)."""
    from hydra_opt.hardware.dynacore import get_datapath

    low = str(name).lower()
    if low in _EXTRA_BITS:
        return _EXTRA_BITS[low]
    dp = get_datapath(low, key="precision")
    return dp.weight_bits, dp.act_bits


def pair_accuracy_cost(prefill: str, decode: str) -> float:
    """Accuracy cost, percentage points vs FP16, of prefilling at ``prefill`` and decoding at ``decode``.

    A pair the DynaCore paper measured (Sec. 8.2: FP16 0, disaggregated W8A8+W4A16 0.07, W8A8 0.09, W4A8 1.51,
    W4A16 2.81) gets its figure. Another pair gets the smallest figure among the measured policies that are at most
    as precise in both phases (no more weight and no more activation bits): an upper bound under the assumption
    that quantising less never costs accuracy. So FP16 prefill + W4A16 decode → 0.07 (the disaggregated pair is
    at most as precise), FP16 prefill + W8A8 decode → 0.09, W8A8 prefill + FP16 decode → 0.07.

    Raises:
        ConfigError: For a precision name without operand widths (none of the shipped ones).
    """
    from hydra_opt.config import ConfigError
    from hydra_opt.hardware.dynacore import ACCURACY_DROP_PCT, POLICIES

    p, d = _bits(prefill), _bits(decode)
    best = math.inf
    for name, pol in POLICIES.items():
        pp, dd = _bits(pol.prefill), _bits(pol.decode)
        if (pp, dd) == (p, d):
            return float(ACCURACY_DROP_PCT[name])
        if pp[0] <= p[0] and pp[1] <= p[1] and dd[0] <= d[0] and dd[1] <= d[1]:
            best = min(best, float(ACCURACY_DROP_PCT[name]))
    if not math.isfinite(best):
        raise ConfigError("has no accuracy figure (no measured policy is at most as precise)", key="precision",
                          value=f"{prefill}+{decode}")
    return best


def design_accuracy_cost(design: Any, *, precision: str | None = None, library: Any = None) -> float:
    """Quantisation accuracy cost of a design, percentage points vs FP16 (0 = full precision).

    Each compute chiplet applies a precision in the phases it serves: library chiplets (``tscs_p``, ``tscs_d``,
    ...) run ``precision`` (a study's ``simulate: {precision: ...}``), else the design's ``precision`` (HYDRA's
    ``int8`` = W8A8), in the phases their library entry lists; DynaCore chiplets serve both phases at the design's
    ``dynacore`` prefill/decode precisions (default W8A8 + W4A16). A request may be prefilled by any prefill-capable
    chiplet and decoded by any decode-capable one, so the cost is the worst :func:`pair_accuracy_cost` over those
    (prefill, decode) pairs. Examples: an int8 HYDRA design 0.09; ``tscs_p`` + DynaCore (W8A8, W4A16) 0.07 (the
    paper's disaggregated pair); an FP16 design 0. The figures are Llama-3.1-8B's and are reused for every model
    (docs/dynacore.md §1.6): an objective, not a prediction.

    Args:
        design: A ``hydra_opt.system.design.DesignPoint``.
        precision: Precision forced on the library chiplets (None: ``design.precision``).
        library: Chiplet library (default: the shipped one).
    """
    from hydra_opt.config import ConfigError
    from hydra_opt.system.design import DynaCoreSettings

    if library is None:
        from hydra_opt.hardware.chiplets import ChipletLibrary

        library = ChipletLibrary.default()
    prec = precision or design.precision
    prefill: set[str] = set()
    decode: set[str] = set()
    for name, n in design.counts:
        if n <= 0:
            continue
        if name == "dynacore":
            dyn = design.dynacore if design.dynacore is not None else DynaCoreSettings()
            prefill.add(dyn.prefill_precision)
            decode.add(dyn.decode_precision)
            continue
        try:
            phases = library.spec(name).phases
        except ConfigError:  # a hook/provider chiplet other than DynaCore: assume it serves both phases
            phases = frozenset({"prefill", "decode"})
        if "prefill" in phases:
            prefill.add(prec)
        if "decode" in phases:
            decode.add(prec)
    prefill, decode = prefill or decode, decode or prefill  # a one-phase design is infeasible; price what it has
    if not prefill:
        return 0.0
    return max(pair_accuracy_cost(p, d) for p in sorted(prefill) for d in sorted(decode))
