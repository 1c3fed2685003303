"""Study specs: the study file (``studies/*.yaml``) parsed into a frozen :class:`StudySpec`, and its fingerprint.

A study file names the (model, workload) pairs, a search space, objectives, a sampler, the promotion pruner, a
budget, a storage URL and an artifact folder (schema in ``docs/dse.md``). Relative paths inside resolve against the
file's folder. :meth:`StudySpec.fingerprint` hashes what defines the study's trials, so a study is never resumed
with a different definition (:func:`hydra_opt.dse.runner.open_study`).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from hydra_opt.config import ConfigError, Node, load_yaml
from hydra_opt.dse.plan import PLANS
from hydra_opt.dse.samplers import SamplerSpec
from hydra_opt.dse.search_space import SearchSpace, design_key, load_search_space, parse_search_space
from hydra_opt.dse.storages import check_url, sqlite_url_for
from hydra_opt.dse.sweep import SweepSpec, parse_sweep
from hydra_opt.evaluate.evaluators import Evaluator, HydraEvaluator
from hydra_opt.evaluate.objectives import SLO_METRICS, DEFAULT_OBJECTIVES, ObjectiveSpec, load_objectives, parse_objectives

__all__ = [
    "StudySpec",
    "PrunerSpec",
    "load_study_spec",
    "parse_study_spec",
    "design_key",
    "content_digest",
    "output_dir_problem",
    "PLAN_POOLS",
    "PLAN_POOL_MAX",
]

#: ``budget.plan_pool`` values.
PLAN_POOLS: tuple[str, ...] = ("estimated", "space")
#: Largest search space ``plan_pool: space`` estimates in full (≈ 1 ms per design and pair, once per worker).
PLAN_POOL_MAX = 20_000


@dataclass(frozen=True)
class PrunerSpec:
    """Promotion settings; ``enabled=False`` simulates every feasible trial."""

    enabled: bool = True
    rule: str = "either"
    k_ranks: int = 1
    epsilon: float = 0.05
    n_warmup_trials: int = 10
    min_estimates: int = 0


@dataclass(frozen=True)
class StudySpec:
    """A parsed study file.

    Attributes:
        name: Study name (the Optuna study name unless overridden).
        file: The study file.
        pairs: (model, workload) names or paths, or ``Model``/``Workload`` objects (a spec built in Python).
        space: The search space.
        objectives: Objectives, aggregation and constraints.
        sampler: The sampler choice.
        pruner: Promotion settings.
        n_trials: Total budget of finished trials over the whole study (None = unbounded).
        max_simulations: Cap on distinct simulated designs over the whole study (None = none); once reached,
            trials are still estimated but end PRUNED (``promotion: simulation-budget``).
        plan: How the simulation budget is spent: ``"greedy"`` (promote as the pruner decides until the cap) or
            ``"calibrated"`` (estimate only until the trials left equal the simulations left, then simulate the
            designs :func:`hydra_opt.dse.plan.plan_next` picks; needs ``max_simulations``). The file's ``auto``
            (default) resolves to calibrated when ``budget.max_simulations`` is set, else greedy.
        plan_pool: Where the calibrated plan picks from: ``"estimated"`` (the designs the study's trials estimated)
            or ``"space"`` (every design of the search space, estimated once, vectorised, when the plan starts — a
            design no trial proposed is enqueued with the parameters that draw it; the space must have at most
            :data:`PLAN_POOL_MAX` designs). The file's ``auto`` (default) resolves to space for a calibrated plan on
            a space that small, else estimated.
        timeout_s: Wall-time limit of one invocation, s (None = none).
        storage: Storage URL.
        artifact_dir: Folder of the artifact store (None = no artifacts).
        seed: Study seed (per-worker sampler seeds derive from it).
        sim_seed: Seed of every simulation (common random numbers: all designs see the same request sample).
        estimate_options: ``EstimatorOptions`` knobs (older files: scenario settings too, moved to the scenario).
        simulate_options: ``SimOptions`` knobs (older files: scenario settings and design overrides too).
        scenario: The study's ``scenario:`` block: the one run description both evaluators read
            (``hydra_opt.evaluate.scenario``; ``preset: paper`` allowed).
        design_overrides: The study's ``design_overrides:`` block (``max_batch``, ``batching``, ``scheduler``,
            ``placement`` given to every design before it is evaluated).
        evaluator: ``"module:callable"`` building the evaluator (default: the real estimator + simulator).
        exhaustive: The ``exhaustive:`` block: the study is a sweep of a fixed design list
            (:mod:`hydra_opt.dse.sweep`) instead of a sampled search; None for a search.
    """

    name: str
    file: str
    pairs: tuple[tuple[Any, Any], ...]
    space: SearchSpace
    objectives: ObjectiveSpec = DEFAULT_OBJECTIVES
    sampler: SamplerSpec = field(default_factory=SamplerSpec)
    pruner: PrunerSpec = PrunerSpec()
    n_trials: int | None = 100
    timeout_s: float | None = None
    max_simulations: int | None = None
    plan: str = "greedy"
    plan_pool: str = "estimated"
    storage: str = ""
    artifact_dir: Path | None = None
    seed: int = 0
    sim_seed: int = 0
    estimate_options: Mapping[str, Any] | None = None
    simulate_options: Mapping[str, Any] | None = None
    evaluator: str = ""
    scenario: Mapping[str, Any] | None = None
    design_overrides: Mapping[str, Any] | None = None
    exhaustive: SweepSpec | None = None

    @property
    def pair_keys(self) -> list[str]:
        """``"model/workload"`` per pair (an object is named by its ``name``)."""
        return [f"{_ref_label(m)}/{_ref_label(w)}" for m, w in self.pairs]

    def fingerprint(self, content: str = "") -> str:
        """Hash of what defines the study's trials: pairs, space, objectives, pruner and the run settings
        (estimate/simulate options, simulation seed) — not budget, storage, paths or the evaluator (code).

        Args:
            content: :func:`content_digest` of the loaded (model, workload) pairs, so that editing a workload
                file (its rate, its trace's bytes) between runs changes the fingerprint although its path does not.
        """
        blob = json.dumps(
            {
                "pairs": [(_ref_label(m), _ref_label(w)) for m, w in self.pairs],
                "space": [self.space.composition.slots, [(p.name, p.values) for p in self.space.composition.parts],
                          [(d.name, list(map(repr, d.values))) for d in self.space.scalars], self.space.encoding,
                          sorted(self.space.package.items())],
                "objectives": [m.name for m in self.objectives.metrics],
                "aggregate": self.objectives.aggregate,
                "pruner": asdict(self.pruner),
                "run": [self.estimate_options, self.simulate_options, self.sim_seed],
                "content": content,
                # SLO-based metrics change with the SLO (key absent otherwise: older fingerprints stay valid).
                **({"slo": self.objectives.slo.to_dict()} if any(
                    m.name in SLO_METRICS for m in self.objectives.needed()) else {}),
                # The capacity search's settings decide capacity_req_s (window, min requests, tolerance, runs).
                **({"capacity": asdict(self.objectives.capacity)} if self.objectives.needs_capacity else {}),
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def make_evaluator(self) -> Evaluator:
        """The evaluator named by ``evaluator`` (default :class:`~hydra_opt.evaluate.evaluators.HydraEvaluator`)."""
        if not self.evaluator:
            obj = self.objectives
            return HydraEvaluator(self.estimate_options, self.simulate_options, file=self.file,
                                  scenario=self.scenario, design_overrides=self.design_overrides, slo=obj.slo,
                                  capacity=obj.capacity if obj.needs_capacity else None)
        mod, _, attr = self.evaluator.partition(":")
        try:
            factory = getattr(importlib.import_module(mod), attr)
        except Exception:  # noqa: BLE001 - ImportError, or anything a module raises on import
            raise ConfigError("cannot be imported (expected module:callable)", file=self.file, key="evaluator",
                              value=self.evaluator) from None
        try:
            evaluator = factory(self)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. `os:system` called with a spec: a bad value, not a crash
            raise ConfigError(f"failed to build an evaluator ({type(exc).__name__})", file=self.file, key="evaluator",
                              value=self.evaluator) from None
        if not isinstance(evaluator, Evaluator):
            raise ConfigError("did not return an evaluator (design/load/feasibility/estimate/simulate)",
                              file=self.file, key="evaluator", value=self.evaluator)
        return evaluator


#: Fields left out of :func:`content_digest`: where a file lives or how it is described does not change the runs.
_NOT_CONTENT = frozenset({"path", "file", "description", "source"})


def content_digest(objects: Any) -> str:
    """A hash of the content of loaded models/workloads (dataclasses, arrays, plain values), e.g. the evaluator's
    resolved pairs: a trace's token and timestamp arrays are hashed by their bytes; paths are left out."""
    import numpy as np

    h = hashlib.sha256()

    def walk(o: Any, depth: int) -> None:
        if depth > 24:
            h.update(b"<deep>")
        elif isinstance(o, np.ndarray):
            h.update(f"nd{o.dtype}{o.shape}".encode())
            h.update(np.ascontiguousarray(o).tobytes())
        elif is_dataclass(o) and not isinstance(o, type):
            h.update(type(o).__name__.encode())
            for f in fields(o):
                if f.name not in _NOT_CONTENT:
                    h.update(f.name.encode())
                    walk(getattr(o, f.name), depth + 1)
        elif isinstance(o, Mapping):
            h.update(b"{")
            for k in sorted(o, key=repr):
                walk(k, depth + 1)
                walk(o[k], depth + 1)
        elif isinstance(o, (list, tuple)):
            h.update(f"[{len(o)}".encode())
            for x in o:
                walk(x, depth + 1)
        elif isinstance(o, (str, int, float, bool, bytes, type(None), np.generic)):
            h.update(repr(o).encode())
        else:  # an object without a stable content (a callable, a cache): its type only, never its address
            h.update(type(o).__qualname__.encode())

    walk(objects, 0)
    return h.hexdigest()[:16]


def _ref_label(ref: Any) -> str:
    """A model/workload reference as text: a name or path as given, an object by its ``name``."""
    return ref if isinstance(ref, str) else str(getattr(ref, "name", ref))


def load_study_spec(path: str | os.PathLike[str]) -> StudySpec:
    """Read and validate a study file (relative paths inside resolve against its folder)."""
    return parse_study_spec(load_yaml(path))


def _names(root: Node, single: str, plural: str) -> list[str]:
    if root.has(plural):
        return [n.str(max_len=1024) for n in root.get(plural).list(min_len=1, max_len=64)]
    return [root.get(single).str(max_len=1024)]


def _safe_output_dir(node: Node, base: Path) -> Path:
    """An output folder; a relative one must stay inside ``base`` (no ``..`` escapes)."""
    raw = node.str(max_len=4096)
    if "\x00" in raw or not raw.strip():
        raise node.error("is not a folder path")
    p = Path(os.path.expanduser(raw))
    if not p.is_absolute():
        if ".." in p.parts:
            raise node.error("must not contain '..' (write artifacts inside the study folder or give an absolute path)")
        p = base / p
    problem = output_dir_problem(p)
    if problem:
        raise node.error(problem)
    return p


def output_dir_problem(p: Path) -> str | None:
    """Why the folder ``p`` cannot be created or written (checked before a study is created), or None."""
    existing = next((a for a in (p, *p.parents) if a.exists()), None)
    if existing is not None and not existing.is_dir():
        where = "is an existing file" if existing == p else f"lies under the file {existing}"
        return f"{where}, not a folder (artifacts are written into a folder)"
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        return f"cannot be created: {existing} is not writable"
    return None


def parse_study_spec(root: Node) -> StudySpec:
    """Validate a parsed study document."""
    root.mapping()
    base = Path(root.file).resolve().parent
    kind = root.get("kind", "study").str()
    if kind != "study":
        raise root.error("must be 'study'", value=kind, key="kind")
    name = root.get("name").str(max_len=128)
    if not name.strip() or any(ord(c) < 32 for c in name):
        raise root.error("must be a non-empty printable name", value=name, key="name")
    pairs = _parse_pairs(root, base)
    space = _parse_space(root, base)
    objectives = _parse_objectives(root, base)
    sampler = _parse_sampler(root)
    if sampler.needs_static_space and space.encoding == "conditional" and not space.encoding_explicit:
        # Samplers that model a fixed space cannot use conditional (dynamic-range) parameters well.
        space = space.with_encoding("stick_breaking")
    sweep = parse_sweep(root.get("exhaustive")) if root.has("exhaustive") else None
    if sweep is not None:
        for key in ("sampler", "pruner"):
            if root.has(key):
                raise root.error("does not apply to an exhaustive sweep (it simulates a fixed design list; "
                                 "drop the key)", key=key, value=root.get(key).data)
    if sampler.is_grid or sweep is not None:
        space = space.with_encoding("enumerated")
    pruner = _parse_pruner(root)
    budget = _parse_budget(root, space)
    if sweep is not None:
        extra = sorted(set(root.get("budget").data) - {"timeout_s"}) if root.has("budget") else []
        if extra:
            raise ConfigError("an exhaustive sweep's trials are its designs (exhaustive.simulate): only "
                              "budget.timeout_s applies", file=root.file, key="budget", value=extra)
        budget["n_trials"] = None
    storage = _parse_storage(root, base)

    from hydra_opt.dse.artifacts import safe_name

    artifact_dir: Path | None = base / "artifacts" / safe_name(name)  # a name like "../../x" must not escape
    if root.has("artifacts"):
        an = root.get("artifacts")
        artifact_dir = None if an.data is False else _safe_output_dir(an, base)

    seed = root.get("seed", 0).int(minimum=0, maximum=2**32 - 1)
    est_opts = root.get("estimate", {}).mapping().data or None
    sim_node = root.get("simulate", {}).mapping()
    sim_opts = dict(sim_node.data) if sim_node.data else {}
    sim_seed = sim_node.get("seed", 0).int(minimum=0, maximum=2**32 - 1)
    sim_opts.pop("seed", None)
    scenario = root.get("scenario", {}).mapping().data or None
    overrides = root.get("design_overrides", {}).mapping().data or None
    evaluator = root.get("evaluator", "").str(max_len=256)
    root.get("description", "").str(max_len=4096)
    root.done(
        ["kind", "name", "description", "model", "models", "workload", "workloads", "pairs", "search_space",
         "objectives", "sampler", "pruner", "budget", "storage", "artifacts", "seed", "estimate", "simulate",
         "scenario", "design_overrides", "evaluator", "exhaustive"]
    )
    if not evaluator:  # the real evaluator's run description: checked here, so `validate` reports it too
        from hydra_opt.evaluate.evaluators import resolve_run

        resolve_run(scenario, sim_opts or None, est_opts, overrides, file=root.file)
    return StudySpec(
        name=name, file=root.file, pairs=tuple(pairs), space=space, objectives=objectives, sampler=sampler,
        pruner=pruner, **budget, storage=storage, artifact_dir=artifact_dir,
        seed=seed, sim_seed=sim_seed, estimate_options=est_opts, simulate_options=sim_opts or None,
        evaluator=evaluator, scenario=scenario, design_overrides=overrides, exhaustive=sweep,
    )


def _parse_pairs(root: Node, base: Path) -> list[tuple[str, str]]:
    """``pairs:`` or the product of ``model(s)`` × ``workload(s)``, file references resolved against ``base``."""
    if root.has("pairs"):
        pairs = []
        for item in root.get("pairs").list(min_len=1, max_len=64):
            item.mapping()
            pairs.append((item.get("model").str(max_len=1024), item.get("workload").str(max_len=1024)))
            item.done(["model", "workload"])
    else:
        models = _names(root, "model", "models")
        workloads = _names(root, "workload", "workloads")
        pairs = [(m, w) for m in models for w in workloads]
    return [(_resolve_ref(m, base), _resolve_ref(w, base)) for m, w in pairs]


def _parse_space(root: Node, base: Path) -> SearchSpace:
    """``search_space:`` inline or as a file."""
    snode = root.get("search_space")
    if isinstance(snode.data, dict):
        return parse_search_space(Node(snode.data, file=root.file, key=snode.key))
    return load_search_space(str(snode.path(base=base, must_exist=True)))


def _parse_objectives(root: Node, base: Path) -> ObjectiveSpec:
    """``objectives:`` inline, as a file, or the defaults."""
    if not root.has("objectives"):
        return DEFAULT_OBJECTIVES
    onode = root.get("objectives")
    if isinstance(onode.data, dict):
        return parse_objectives(Node(onode.data, file=root.file, key=onode.key))
    return load_objectives(str(onode.path(base=base, must_exist=True)))


def _parse_sampler(root: Node) -> SamplerSpec:
    """``sampler:`` as a name or ``{name, args}``."""
    if not root.has("sampler"):
        return SamplerSpec(file=root.file)
    sn = root.get("sampler")
    if isinstance(sn.data, str):
        return SamplerSpec(sn.str(max_len=64), file=root.file)
    sn.mapping()
    args = sn.get("args", {}).mapping().data
    sampler = SamplerSpec(sn.get("name", "tpe").str(max_len=64), args, file=root.file)
    sn.done(["name", "args"])
    return sampler


def _parse_pruner(root: Node) -> PrunerSpec:
    """``pruner:`` (``none``/``false`` disables promotion)."""
    if not root.has("pruner"):
        return PrunerSpec()
    pn = root.get("pruner")
    if pn.data in ("none", False):
        return PrunerSpec(enabled=False)
    pn.mapping()
    pruner = PrunerSpec(
        enabled=pn.get("enabled", True).bool(),
        rule=pn.get("rule", "either").str(choices=("rank", "epsilon", "either")),
        k_ranks=pn.get("k_ranks", 1).int(minimum=1, maximum=1000),
        epsilon=pn.get("epsilon", 0.05).number(minimum=0.0, maximum=100.0),
        n_warmup_trials=pn.get("n_warmup_trials", 10).int(minimum=0, maximum=10**6),
        min_estimates=pn.get("min_estimates", 0).int(minimum=0, maximum=10**6),
    )
    pn.done(["enabled", "rule", "k_ranks", "epsilon", "n_warmup_trials", "min_estimates"])
    return pruner


def _parse_budget(root: Node, space: SearchSpace) -> dict[str, Any]:
    """``budget:`` as :class:`StudySpec` fields (``n_trials``, ``timeout_s``, ``max_simulations``, ``plan``,
    ``plan_pool``), with the ``auto`` plan and pool resolved."""
    out: dict[str, Any] = {"n_trials": 100, "timeout_s": None, "max_simulations": None, "plan": "greedy",
                           "plan_pool": "estimated"}
    if not root.has("budget"):
        return out
    bn = root.get("budget").mapping()
    out["n_trials"] = bn.get("n_trials", 100).int(minimum=1, maximum=10**7)
    if bn.has("timeout_s"):
        out["timeout_s"] = bn.get("timeout_s").number(positive=True, maximum=10**8)
    if bn.has("max_simulations"):
        out["max_simulations"] = bn.get("max_simulations").int(minimum=1, maximum=10**7)
    plan = bn.get("plan", "auto").str(choices=("auto", *PLANS))
    if plan == "auto":
        # The recovery benchmark (docs/dse.md): with a known simulation budget, planning it beats greedy promotion.
        plan = "calibrated" if out["max_simulations"] is not None else "greedy"
    if plan == "calibrated" and out["max_simulations"] is None:
        raise ConfigError("needs budget.max_simulations (the budget it plans)", file=root.file, key="budget.plan",
                          value=plan)
    plan_pool = bn.get("plan_pool", "auto").str(choices=("auto", *PLAN_POOLS))
    if plan_pool == "auto":
        plan_pool = "space" if plan == "calibrated" and space.size() <= PLAN_POOL_MAX else "estimated"
    if plan_pool == "space":
        if plan != "calibrated":
            raise ConfigError("needs budget.plan: calibrated", file=root.file, key="budget.plan_pool",
                              value=plan_pool)
        if space.size() > PLAN_POOL_MAX:
            raise ConfigError(f"space has {space.size():,} designs; plan_pool: space allows at most "
                              f"{PLAN_POOL_MAX:,} (use plan_pool: estimated)", file=root.file,
                              key="budget.plan_pool", value=plan_pool)
    bn.done(["n_trials", "timeout_s", "max_simulations", "plan", "plan_pool"])
    out["plan"], out["plan_pool"] = plan, plan_pool
    return out


def _parse_storage(root: Node, base: Path) -> str:
    """``storage:`` (a relative SQLite file lives next to the study file; default ``<stem>.db`` there)."""
    if not root.has("storage"):
        return sqlite_url_for(base / f"{Path(root.file).stem}.db")
    storage = root.get("storage").str(max_len=4096)
    if storage.startswith("sqlite:///") and not storage.startswith("sqlite:////"):
        rel = storage[len("sqlite:///"):]
        if rel and rel != ":memory:" and not Path(rel).is_absolute():
            storage = sqlite_url_for(base / rel)  # relative SQLite files live next to the study file
    check_url(storage, file=root.file, key="storage")
    return storage


def _resolve_ref(ref: str, base: Path) -> str:
    """A model/workload reference: a shipped name stays a name; a relative file path resolves against ``base``."""
    if ref.endswith((".yaml", ".yml", ".csv", ".jsonl", ".json")) and not Path(ref).is_absolute():
        return str((base / ref).resolve())
    return ref

