"""Objectives: how evaluated designs are scored — the metric registry (names, directions, units), multi-workload
aggregation, constraints, the SLO and the capacity search settings. Plain data, no Optuna: a study (``hydra_opt.dse``)
turns an :class:`ObjectiveSpec` into directions and constraint values; the experiments and the evaluator read it too.

An ``objectives/*.yaml`` file lists metrics from :data:`METRICS` (default: maximise throughput, minimise mean
TTFT, HYDRA §VI-B), how to aggregate a design's values over several (model, workload) pairs, and optional
constraints on the aggregated metrics (e.g. a TTFT SLO) that a study records as Optuna constraints.

Multi-workload aggregation (HYDRA §VI-C, Table IV): the paper normalises each workload's value to that workload's
specialised optimum and looks at the worst case and the average. ``geomean`` (default) is invariant to per-workload
scale factors, so it ranks designs exactly like the geometric mean of the normalised values without knowing the
optima; ``worst`` (the min of normalised throughput, max of normalised latency) needs ``reference`` values per
workload to be meaningful (without them raw values are compared).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hydra_opt.config import Node, load_yaml
from hydra_opt.evaluate.slo import DEFAULT_CAPACITY, DEFAULT_SLO, CapacitySettings, Slo, slo_from_node

__all__ = [
    "Metric",
    "METRICS",
    "ObjectiveSpec",
    "Constraint",
    "AGGREGATES",
    "DEFAULT_OBJECTIVES",
    "load_objectives",
    "parse_objectives",
    "aggregate",
    "CapacitySettings",
    "SLO_METRICS",
]


@dataclass(frozen=True)
class Metric:
    """A metric a study can optimise.

    Attributes:
        name: Metric name used in YAML and in user attributes (``est_<name>``, ``sim_<name>``).
        direction: ``"maximize"`` or ``"minimize"``.
        unit: Unit shown in metric names and tables.
        label: Short human label.
        keys: Keys looked up, in order, in an evaluator's result dictionary.
    """

    name: str
    direction: str
    unit: str
    label: str
    keys: tuple[str, ...]

    @property
    def display(self) -> str:
        """The name given to ``study.set_metric_names``, e.g. ``"throughput [tok/s]"``."""
        return f"{self.label} [{self.unit}]" if self.unit else self.label

    def read(self, result: Mapping[str, float]) -> float:
        """This metric's value from an evaluator result dictionary (KeyError naming the keys tried)."""
        for k in self.keys:
            if k in result and result[k] is not None:
                return float(result[k])
        if self.name == "tp_per_ttft":
            tp, ttft = METRICS["throughput_tok_s"].read(result), METRICS["ttft_s"].read(result)
            return tp / ttft if ttft > 0 else math.inf
        raise KeyError(f"metric {self.name!r}: none of {', '.join(self.keys)} in the evaluator result")

    def better(self, a: float, b: float) -> bool:
        """Whether ``a`` is strictly better than ``b``."""
        return a > b if self.direction == "maximize" else a < b


#: The metric registry. ``tp_per_ttft`` is the B* score of HYDRA §VI-B (throughput / TTFT).
METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("throughput_tok_s", "maximize", "tok/s", "throughput", ("throughput_tok_s",)),
        Metric("ttft_s", "minimize", "s", "TTFT", ("ttft_mean_s", "ttft_s")),
        Metric("ttft_p99_s", "minimize", "s", "TTFT p99", ("ttft_p99_s",)),
        Metric("tpot_s", "minimize", "s", "TPOT", ("tpot_mean_s", "tpot_s")),
        Metric("energy_j_per_token", "minimize", "J/token", "energy", ("energy_j_per_token", "energy_per_token_j")),
        Metric("area_mm2", "minimize", "mm2", "area", ("area_mm2", "total_area_mm2")),
        Metric("accuracy_cost", "minimize", "pp", "accuracy cost", ("accuracy_cost",)),
        Metric("tp_per_ttft", "maximize", "tok/s^2", "TP/TTFT", ("tp_per_ttft",)),
        Metric("ttft_p90_s", "minimize", "s", "TTFT p90", ("ttft_p90_s",)),
        Metric("capacity_req_s", "maximize", "req/s", "SLO capacity", ("capacity_req_s",)),
        Metric("goodput_tok_s", "maximize", "tok/s", "goodput", ("goodput_tok_s",)),
        Metric("slo_attainment", "maximize", "", "SLO attainment", ("slo_attainment",)),
    )
}

#: Metrics that depend on the SLO (``slo:`` of the objective file).
SLO_METRICS: tuple[str, ...] = ("capacity_req_s", "goodput_tok_s", "slo_attainment")


#: Aggregations over (model, workload) pairs.
AGGREGATES: tuple[str, ...] = ("geomean", "mean", "worst", "best")


@dataclass(frozen=True)
class Constraint:
    """A bound on an aggregated metric; its Optuna constraint value is the relative violation (≤ 0 = feasible).

    Attributes:
        metric: The metric.
        bound: The bound value (in the metric's unit).
        upper: True for ``max:`` (value must be ≤ bound), False for ``min:``.
    """

    metric: Metric
    bound: float
    upper: bool

    def violation(self, value: float) -> float:
        """``(value − bound)/|bound|`` for an upper bound, the mirror for a lower bound."""
        scale = abs(self.bound) if self.bound != 0 else 1.0
        v = (value - self.bound) / scale if self.upper else (self.bound - value) / scale
        return float(v) if math.isfinite(v) else 1e12

    @property
    def label(self) -> str:
        return f"{self.metric.name} {'<=' if self.upper else '>='} {self.bound:g} {self.metric.unit}".strip()


@dataclass(frozen=True)
class ObjectiveSpec:
    """What a study optimises.

    Attributes:
        name: Name of the objective set.
        metrics: Metrics in objective order.
        aggregate: How values over several (model, workload) pairs combine (one of :data:`AGGREGATES`).
        weights: Optional weight per pair key ``"model/workload"`` (default 1).
        reference: Optional normaliser per pair key and metric name (``{pair: {metric: value}}``).
        constraints: Bounds on aggregated metrics.
        slo: The latency SLO behind ``capacity_req_s``, ``goodput_tok_s`` and ``slo_attainment``.
        capacity: How ``capacity_req_s`` is searched.
    """

    name: str = "throughput-ttft"
    metrics: tuple[Metric, ...] = (METRICS["throughput_tok_s"], METRICS["ttft_s"])
    aggregate: str = "geomean"
    weights: Mapping[str, float] = field(default_factory=dict)
    reference: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    constraints: tuple[Constraint, ...] = ()
    slo: Slo = DEFAULT_SLO
    capacity: CapacitySettings = CapacitySettings()

    @property
    def needs_capacity(self) -> bool:
        """Whether any objective or constraint reads ``capacity_req_s`` (the expensive search)."""
        return any(m.name == "capacity_req_s" for m in self.needed())

    @property
    def directions(self) -> list[str]:
        return [m.direction for m in self.metrics]

    @property
    def metric_names(self) -> list[str]:
        return [m.display for m in self.metrics]

    def needed(self) -> tuple[Metric, ...]:
        """Metrics read from results: objectives plus constrained ones (no duplicates)."""
        seen: dict[str, Metric] = {m.name: m for m in self.metrics}
        for c in self.constraints:
            seen.setdefault(c.metric.name, c.metric)
        return tuple(seen.values())

    def combine(self, per_pair: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        """Aggregate every needed metric over the pairs (``{pair: result dict}``) → ``{metric: value}``."""
        out: dict[str, float] = {}
        for m in self.needed():
            vals, wts = [], []
            for pair, result in per_pair.items():
                v = m.read(result)
                ref = self.reference.get(pair, {}).get(m.name)
                vals.append(v / ref if ref else v)
                wts.append(self.weights.get(pair, 1.0))
            out[m.name] = aggregate(vals, wts, self.aggregate, m.direction)
        return out

    def values(self, combined: Mapping[str, float]) -> list[float]:
        """Objective values in order."""
        return [float(combined[m.name]) for m in self.metrics]

    def constraint_values(self, combined: Mapping[str, float]) -> list[float]:
        """Relative violations of the declared constraints."""
        return [c.violation(combined[c.metric.name]) for c in self.constraints]


DEFAULT_OBJECTIVES = ObjectiveSpec()


def aggregate(values: Sequence[float], weights: Sequence[float], how: str, direction: str) -> float:
    """Combine one metric over pairs: weighted geometric/arithmetic mean, or the worst/best value."""
    if len(values) == 1:
        return float(values[0])
    if how == "mean":
        return float(sum(w * v for w, v in zip(weights, values)) / sum(weights))
    if how == "geomean":
        if any(v <= 0 for v in values):
            # A zero throughput (nothing served) makes the geometric mean zero, as it should; negative is a bug.
            return 0.0 if all(v >= 0 for v in values) else float("nan")
        return float(math.exp(sum(w * math.log(v) for w, v in zip(weights, values)) / sum(weights)))
    worst_is_min = direction == "maximize"
    if how == "worst":
        return float(min(values) if worst_is_min else max(values))
    if how == "best":
        return float(max(values) if worst_is_min else min(values))
    raise ValueError(f"unknown aggregate {how!r}")


# -- parsing ---------------------------------------------------------------------------------------------------
def load_objectives(path: str, *, display: str | None = None) -> ObjectiveSpec:
    """Read and validate an ``objectives/*.yaml`` file."""
    return parse_objectives(load_yaml(path, display=display))


def _metric(node: Node) -> Metric:
    return METRICS[node.str(choices=tuple(METRICS))]


def parse_objectives(root: Node) -> ObjectiveSpec:
    """Validate a parsed objective document (also used for an inline ``objectives:`` block of a study)."""
    root.mapping()
    kind = root.get("kind", "objective").str()
    if kind != "objective":
        raise root.error("must be 'objective'", value=kind, key="kind")
    name = root.get("name", "objectives").str(max_len=128)
    root.get("description", "").str(max_len=4096)
    metrics: list[Metric] = []
    for item in root.get("objectives").list(min_len=1, max_len=8):
        if isinstance(item.data, str):
            metrics.append(_metric(item))
            continue
        item.mapping()
        m = _metric(item.get("metric"))
        if item.has("direction"):
            d = item.get("direction").str(choices=("maximize", "minimize"))
            if d != m.direction:
                raise item.error(f"{m.name} is always {m.direction}d", value=d, key="direction")
        item.done(["metric", "direction"])
        metrics.append(m)
    if len({m.name for m in metrics}) != len(metrics):
        raise root.error("lists a metric twice", value=[m.name for m in metrics], key="objectives")
    how = root.get("aggregate", "geomean").str(choices=AGGREGATES)
    weights: dict[str, float] = {}
    if root.has("weights"):
        for pair, w in root.get("weights").items():
            weights[pair] = w.number(positive=True, maximum=1e6)
    reference: dict[str, dict[str, float]] = {}
    if root.has("reference"):
        for pair, refs in root.get("reference").items():
            reference[pair] = {}
            for mname, v in refs.items():
                if mname not in METRICS:
                    raise v.error(f"is not a metric; allowed: {', '.join(METRICS)}", value=mname)
                reference[pair][mname] = v.number(positive=True)
    constraints: list[Constraint] = []
    if root.has("constraints"):
        for c in root.get("constraints").list(max_len=16):
            c.mapping()
            m = _metric(c.get("metric"))
            has_max, has_min = c.has("max"), c.has("min")
            if has_max == has_min:
                raise c.error("needs exactly one of max: or min:")
            bound = c.get("max" if has_max else "min").number()
            c.done(["metric", "max", "min"])
            constraints.append(Constraint(m, bound, has_max))
    slo = slo_from_node(root.get("slo")) if root.has("slo") else DEFAULT_SLO
    capacity = DEFAULT_CAPACITY
    if root.has("capacity"):  # defaults and checks: hydra_opt.evaluate.slo.CapacitySettings (the one definition)
        cn = root.get("capacity").mapping()
        d = DEFAULT_CAPACITY
        capacity = CapacitySettings(
            tolerance=cn.get("tolerance", d.tolerance).number(positive=True, maximum=0.5),
            max_runs=int(cn.get("max_runs", d.max_runs).int(minimum=2, maximum=64)),
            requests=int(cn.get("requests", d.requests).int(minimum=2, maximum=100_000)),
            window_s=cn.get("window_s", d.window_s).number(positive=True, maximum=1e6),
            min_requests=int(cn.get("min_requests", d.min_requests).int(minimum=2, maximum=100_000)),
        )
        cn.done(["tolerance", "max_runs", "requests", "window_s", "min_requests"])
    root.done(["kind", "name", "description", "objectives", "aggregate", "weights", "reference", "constraints", "slo",
               "capacity"])
    return ObjectiveSpec(name, tuple(metrics), how, weights, reference, tuple(constraints), slo, capacity)
