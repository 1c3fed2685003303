"""The evaluator protocol: what the study's objective needs from the layers below, and its real implementation.

The objective only talks to an :class:`Evaluator`. :class:`HydraEvaluator` is the product implementation: designs
are ``hydra_opt.system.design.DesignPoint``, feasibility is ``hydra_opt.system.feasibility.feasibility``, estimates come
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
    """The real evaluator (estimator + simulator of :mod:`hydra_opt.evaluate`), reading one :class:`Scenario`.

    A study's run is described once: ``scenario`` (a ``Scenario`` or a study's ``scenario:`` mapping, ``preset:
    paper`` allowed) is resolved here to one frozen object that both ``estimate`` and ``simulate`` receive.
    ``simulate_options`` / ``estimate_options`` hold each evaluator's own knobs; for compatibility with older study
    files, scenario settings and design overrides found there are moved onto the scenario / the design overrides
    (``preset: paper`` of ``simulate:`` included), and two blocks giving one setting different values is an error.

    Attributes:
        estimate_options: ``EstimatorOptions`` knobs.
        simulate_options: ``SimOptions`` knobs.
        file: The study file (for error messages).
        scenario: The run (resolved to a ``Scenario`` by ``__post_init__``).
        design_overrides: Design fields every design gets (``max_batch``, ``batching``, ``scheduler``,
            ``placement``), applied by :meth:`design` before anything is derived.
    """

    estimate_options: Mapping[str, Any] | None = None
    simulate_options: Mapping[str, Any] | None = None
    file: str = "<study>"
    scenario: Any = None
    design_overrides: Mapping[str, Any] | None = None
    _cache: dict[tuple[str, str], tuple[Any, Any]] = field(default_factory=dict, repr=False)
    _sim_opts: Any = field(default=None, repr=False)
    _est_opts: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.scenario, self._sim_opts, self._est_opts, self.design_overrides = resolve_run(
            self.scenario, self.simulate_options, self.estimate_options, self.design_overrides, file=self.file)

    @property
    def sim_options(self) -> Any:
        """The ``SimOptions`` (engine knobs) :attr:`simulate_options` resolves to."""
        return self._sim_opts

    @property
    def est_options(self) -> Any:
        """The ``EstimatorOptions`` (model knobs) :attr:`estimate_options` resolves to."""
        return self._est_opts

    def design(self, design: Mapping[str, Any]) -> Any:
        from hydra_opt.system.design import DesignPoint

        return DesignPoint.from_dict(dict(design)).with_overrides(self.design_overrides, file=self.file,
                                                                   key="design_overrides.")

    def load(self, model: str, workload: str) -> tuple[Any, Any]:
        key = (model, workload)
        if key not in self._cache:
            from hydra_opt.workload.models import load_model
            from hydra_opt.workload.workload import load_workload

            self._cache[key] = (load_model(model), load_workload(workload))
        return self._cache[key]

    def feasibility(self, design: Any, model: Any) -> list[str]:
        from hydra_opt.system.feasibility import feasibility

        return list(feasibility(design, model, self.scenario.library()))

    def estimate(self, design: Any, model: Any, workload: Any) -> dict[str, float]:
        from hydra_opt.evaluate.estimator import estimate

        est = estimate(design, model, workload, scenario=self.scenario, options=self._est_opts)
        return _metrics_of(est, design, self.scenario.precision)

    def estimate_many(self, designs: list[Any], model: Any, workload: Any) -> list[dict[str, float]]:
        """Estimates of many designs at once (the estimator's vectorised design-space path)."""
        from hydra_opt.evaluate.estimator import estimate_space

        results = estimate_space(designs, model, workload, scenario=self.scenario, options=self._est_opts)
        return [_metrics_of(e, d, self.scenario.precision) for e, d in zip(results, designs)]

    def simulate(self, design: Any, model: Any, workload: Any, *, seed: int) -> SimOutcome:
        from hydra_opt.evaluate import simulate

        res = simulate(design, model, workload, seed=seed, scenario=self.scenario, options=self._sim_opts)
        return SimOutcome(_metrics_of(res, design, self.scenario.precision), res)


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

    if isinstance(scenario, Scenario) and not simulate and not estimate:
        return scenario, SimOptions(), EstimatorOptions(), dict(overrides or {})
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
                allowed = sorted(fields[block] | set(SCENARIO_KEYS) | {"preset"})
                raise ConfigError(f"is not a known option; allowed: {', '.join(allowed)}", file=file,
                                  key=f"{block}.{k}")
    if isinstance(scenario, Scenario) and scn == {f.name: getattr(scenario, f.name) for f in dataclasses.fields(Scenario)}:
        run = scenario
    else:
        base = {k: v for k, v in scn.items() if k not in ("slo",)}
        run = scenario_from_mapping(base, file=file)
        if scn.get("slo") is not None:
            run = run.with_(slo=scn["slo"])
    return run, _options(SimOptions, knobs["simulate"], file, "simulate"), \
        _options(EstimatorOptions, knobs["estimate"], file, "estimate"), over


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
