"""Exhaustive mode (for validation): every design of an enumerated space is estimated, and all of them or a seeded
sample are simulated; the result is a table from which the exhaustive Pareto front, B*/M_T and the recovery of a
study (best-throughput ratio, hypervolume ratio) are computed.

The estimator runs on all designs through the evaluator's ``estimate_many`` when it has one (vectorised over the
design space), else design by design. The simulations are an Optuna study (:mod:`hydra_opt.dse.sweep`): every design
to simulate is one enqueued trial that any number of workers pull from a shared storage; :func:`run_exhaustive` is
the local convenience over it, ``python -m hydra_opt.run`` on a study file with ``exhaustive:`` the distributed form.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from hydra_opt.config import ConfigError
from hydra_opt.dse import sweep
from hydra_opt.dse.search_space import design_key
from hydra_opt.dse.storages import StorageOptions
from hydra_opt.evaluate.evaluators import Evaluator
from hydra_opt.evaluate.front import front_ranks, hypervolume_2d, pareto_mask, select_bstar_mt
from hydra_opt.evaluate.objectives import ObjectiveSpec

if TYPE_CHECKING:
    from hydra_opt.dse.spec import StudySpec

__all__ = ["ExhaustiveResult", "choose", "estimate_designs", "prepare_sweep", "run_exhaustive", "run_sweep_worker", "recovery",
           "screen", "sweep_table"]


@dataclass
class ExhaustiveResult:
    """Table of an exhaustive run.

    Attributes:
        designs: Design dicts, in enumeration order.
        feasible: Per design, whether it is feasible for every pair.
        est: ``{metric: array}`` aggregated estimates (NaN when infeasible).
        sim: ``{metric: array}`` aggregated simulated values (NaN when not simulated).
        est_wall_s: Wall time of the estimation pass, s.
        sim_wall_s: Simulation wall time, s: the sum over the simulated designs (over all workers; a resumed sweep
            includes the earlier runs' simulations).
    """

    designs: list[dict[str, Any]]
    feasible: np.ndarray
    est: dict[str, np.ndarray]
    sim: dict[str, np.ndarray]
    est_wall_s: float
    sim_wall_s: float

    def frame(self):
        """As a pandas DataFrame (design columns + ``est_*`` + ``sim_*``)."""
        import pandas as pd

        from hydra_opt.dse.report import design_label

        df = pd.DataFrame({"design": [design_label(d) for d in self.designs], "feasible": self.feasible})
        for k, v in self.est.items():
            df[f"est_{k}"] = v
        for k, v in self.sim.items():
            df[f"sim_{k}"] = v
        return df


def _sim_one(evaluator: Evaluator, design_dict: Mapping[str, Any], pairs: Sequence[tuple[str, str]],
             objectives: ObjectiveSpec, sim_seed: int) -> dict[str, float]:
    design = evaluator.design(dict(design_dict))
    per = {}
    for m, w in pairs:
        model, wl = evaluator.load(m, w)
        per[f"{m}/{w}"] = evaluator.simulate(design, model, wl, seed=sim_seed).metrics
    return objectives.combine(per)


def estimate_designs(
    designs: Sequence[Mapping[str, Any]],
    pairs: Sequence[tuple[str, str]],
    objectives: ObjectiveSpec,
    evaluator: Evaluator,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray], float]:
    """Feasibility (on every pair) and aggregated estimates of every design: ``(feasible, est, wall_s)``.

    The estimator runs through the evaluator's ``estimate_many`` when it has one (vectorised over the designs),
    else design by design; infeasible designs get NaN estimates.
    """
    keys = [f"{m}/{w}" for m, w in pairs]
    loaded = [(k, *evaluator.load(m, w)) for k, (m, w) in zip(keys, pairs)]
    metrics = [m.name for m in objectives.needed()]
    n = len(designs)
    est = {m: np.full(n, np.nan) for m in metrics}
    feasible = np.zeros(n, dtype=bool)
    t0 = time.perf_counter()
    objs = []
    for i, d in enumerate(designs):
        obj = evaluator.design(d)
        objs.append(obj)
        feasible[i] = all(not evaluator.feasibility(obj, model) for _, model, _ in loaded)
    idx = np.flatnonzero(feasible)
    many = getattr(evaluator, "estimate_many", None)
    per_pair: dict[str, list[Mapping[str, float]]] = {}
    for key, model, wl in loaded:
        if many is not None:
            per_pair[key] = list(many([objs[i] for i in idx], model, wl))
        else:
            per_pair[key] = []
            for j, i in enumerate(idx):
                per_pair[key].append(evaluator.estimate(objs[i], model, wl))
                if progress and j % 50 == 0:
                    progress("estimate", j, len(idx))
    for j, i in enumerate(idx):
        combined = objectives.combine({k: per_pair[k][j] for k in keys})
        for m in metrics:
            est[m][i] = combined[m]
    return feasible, est, time.perf_counter() - t0


def choose(simulate: str | int, est: Mapping[str, np.ndarray], feasible: np.ndarray, objectives: ObjectiveSpec,
           seed: int = 0) -> np.ndarray:
    """Indices (sorted) of the designs a sweep simulates: ``"all"`` feasible ones, ``"front:K"`` (the K nearest the
    estimated front, :func:`screen`) or an integer N (a uniform sample of N feasible designs drawn with ``seed``)."""
    idx = np.flatnonzero(feasible)
    if simulate == "all":
        return idx
    if isinstance(simulate, str) and simulate.startswith("front:"):
        return screen(est, objectives, idx, int(simulate.split(":", 1)[1]))
    k = min(int(simulate), len(idx))
    return np.sort(np.random.default_rng(seed).choice(idx, size=k, replace=False)) if k else idx[:0]


def run_exhaustive(
    designs: Sequence[Mapping[str, Any]],
    pairs: Sequence[tuple[str, str]],
    objectives: ObjectiveSpec,
    evaluator: Evaluator,
    *,
    simulate: str | int = "all",
    seed: int = 0,
    sim_seed: int = 0,
    progress: Callable[[str, int, int], None] | None = None,
    storage: str | None = None,
    study_name: str | None = None,
    workers: int = 1,
) -> ExhaustiveResult:
    """Estimate every design, then simulate all (``"all"``), none (0) or a chosen subset — a local convenience over
    the same Optuna sweep study that ``python -m hydra_opt.run`` runs for a study file with ``exhaustive:``
    (:mod:`hydra_opt.dse.sweep`): the designs to simulate are enqueued once, workers pull them, and the table's
    simulated values are read back from the storage.

    Args:
        designs: Design dicts (e.g. ``list(space.enumerate())``).
        pairs: (model, workload) references.
        objectives: What to read and how to aggregate over pairs.
        evaluator: The evaluator (must be picklable when ``workers > 1``).
        simulate: ``"all"``; ``"front:K"`` = the K designs nearest the estimated front (:func:`screen`);
            ``"plan:K"`` = K designs chosen one at a time by the calibrated plan
            (:func:`hydra_opt.dse.plan.plan_next`, sequential, in this process, no storage); or the number of
            feasible designs to simulate (uniform sample, ``seed``).
        seed: Seed of the sample.
        sim_seed: Seed of every simulation.
        progress: Called as ``progress(stage, done, total)``.
        storage: Storage URL of the sweep study (default: in memory). With a persistent storage a re-run resumes:
            designs already simulated there are not simulated again.
        study_name: Name of the sweep study (default: derived from the designs, pairs, objectives and seeds).
        workers: Worker processes (spawned, each pulling designs from the study's queue; needs a storage other
            than in-memory when > 1).
    """
    feasible, est, est_wall = estimate_designs(designs, pairs, objectives, evaluator, progress)
    if isinstance(simulate, str) and simulate.startswith("plan:"):
        return _run_plan(designs, np.flatnonzero(feasible), est, feasible, pairs, objectives, evaluator,
                         int(simulate.split(":", 1)[1]), sim_seed, est_wall, progress)
    chosen = choose(simulate, est, feasible, objectives, seed)
    metrics = list(est)
    sim = {m: np.full(len(designs), np.nan) for m in metrics}
    sim_wall = 0.0
    if len(chosen):
        found, sim_wall = sweep.run_local_sweep([dict(designs[i]) for i in chosen], pairs, objectives, evaluator,
                                          est_rows=[{m: est[m][i] for m in metrics} for i in chosen],
                                          sim_seed=sim_seed, storage=storage, study_name=study_name,
                                          workers=workers, progress=progress)
        for j, i in enumerate(chosen):
            for m in metrics:
                sim[m][i] = found[j].get(m, math.nan)
    return ExhaustiveResult([dict(d) for d in designs], feasible, est, sim, est_wall, sim_wall)


# -- the table of a sweep study ----------------------------------------------------------------------------------
def _fill(designs: Sequence[Mapping[str, Any]], metrics: Sequence[str],
          found: Mapping[str, tuple[dict[str, float], float]]) -> tuple[dict[str, np.ndarray], float]:
    sim = {m: np.full(len(designs), np.nan) for m in metrics}
    wall = 0.0
    for i, d in enumerate(designs):
        hit = found.get(design_key(d))
        if hit is not None:
            wall += hit[1]
            for m in metrics:
                sim[m][i] = hit[0].get(m, math.nan)
    return sim, wall


def sweep_table(study: optuna.Study, spec: StudySpec, evaluator: Evaluator | None = None) -> ExhaustiveResult:
    """The exhaustive table of a sweep study: every design of the space (enumeration order), its feasibility and
    estimates (recomputed, vectorised) and the simulated values stored in ``study`` (NaN where not simulated).
    ``sim_wall_s`` is the sum of the stored simulations' wall times (over all workers)."""
    evaluator = evaluator or spec.make_evaluator()
    designs = list(spec.space.enumerate())
    feasible, est, est_wall = estimate_designs(designs, spec.pairs, spec.objectives, evaluator)
    sim, wall = _fill(designs, list(est), sweep.simulated(study))
    return ExhaustiveResult(designs, feasible, est, sim, est_wall, wall)


# -- the study-file sweep (python -m hydra_opt.run) ------------------------------------------------------------
def prepare_sweep(study: optuna.Study, spec: StudySpec, evaluator: Evaluator) -> None:
    """Fill the queue once (estimation pass + enqueue), or, once it is complete, re-queue failed designs."""
    assert spec.exhaustive is not None
    definition = spec.exhaustive.definition(spec.sim_seed)
    old = study.user_attrs.get(sweep.SWEEP_ATTR)
    if old is not None and {k: old.get(k) for k in definition} != definition:
        raise ConfigError(f"exists in the storage as another sweep ({ {k: old.get(k) for k in definition} }); "
                          "resume it with the same exhaustive/simulate settings or choose another --study-name",
                          file=spec.file, key="name", value=spec.name)
    if old is not None and old.get("enqueued"):
        sweep.requeue_failed(study)
        return
    items = list(spec.space.enumerate_params())
    feasible, est, _ = estimate_designs([d for d, _ in items], spec.pairs, spec.objectives, evaluator)
    chosen = choose(spec.exhaustive.simulate, est, feasible, spec.objectives, spec.exhaustive.sample_seed)
    rows = [(items[i][1], sweep.row_attrs(items[i][0], {m: est[m][i] for m in est})) for i in chosen]
    if old is None:
        study.set_user_attr(sweep.SWEEP_ATTR, {**definition, "designs": len(rows), "enqueued": False})
    sweep.enqueue_missing(study, rows)
    study.set_user_attr(sweep.SWEEP_ATTR, {**definition, "designs": len(rows), "enqueued": True})


def _write_table(study: optuna.Study, spec: StudySpec, evaluator: Evaluator) -> Path | None:
    """``<artifact dir>/exhaustive.csv`` once nothing is queued or running (atomic replace: workers may race)."""
    if spec.artifact_dir is None or study.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING)):
        return None
    df = sweep_table(study, spec, evaluator).frame()
    designs = list(spec.space.enumerate())
    df["design_key"] = [design_key(d) for d in designs]
    df["design_json"] = [json.dumps(d, sort_keys=True) for d in designs]
    spec.artifact_dir.mkdir(parents=True, exist_ok=True)
    out = spec.artifact_dir / "exhaustive.csv"
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    df.to_csv(tmp, index=False)
    os.replace(tmp, out)
    return out


def run_sweep_worker(
    study: optuna.Study,
    spec: StudySpec,
    evaluator: Evaluator,
    *,
    storage_options: StorageOptions | None = None,
    on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
) -> int:
    """One worker of the sweep of a study file: fill or repair the queue, run it, write the table when complete.
    Returns the number of trials this worker ran."""
    prepare_sweep(study, spec, evaluator)
    objective = sweep.SweepObjective(evaluator, spec.pairs, spec.objectives, spec.sim_seed, suggest=spec.space.suggest)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        n = sweep.work(study, objective, storage_options=storage_options, timeout_s=spec.timeout_s, on_trial=on_trial)
    _write_table(study, spec, evaluator)
    return n


def _run_plan(designs, idx, est, feasible, pairs, objectives, evaluator, k, sim_seed, est_wall, progress):
    from hydra_opt.dse.plan import design_features, plan_next

    names = [m.name for m in objectives.metrics]
    metrics = list(est)
    n = len(designs)
    pts = np.column_stack([est[m][idx] for m in names])
    usable = np.all(np.isfinite(pts), axis=1)
    pool, est_pool = idx[usable], pts[usable]
    feats = design_features([designs[i] for i in pool])
    maximize = [m.direction == "maximize" for m in objectives.metrics]
    sim_pool = np.full((len(pool), len(names)), np.nan)
    sim = {m: np.full(n, np.nan) for m in metrics}
    t1 = time.perf_counter()
    for j in range(min(k, len(pool))):
        pick = plan_next(est_pool, sim_pool, feats, maximize, k)
        if pick is None:
            break
        i = pool[pick[0]]
        r = _sim_one(evaluator, designs[i], pairs, objectives, sim_seed)
        for m in metrics:
            sim[m][i] = r[m]
        # a non-finite simulation still counts as spent: mark it so it is not picked again
        sim_pool[pick[0]] = [r[m] if math.isfinite(r[m]) else -math.inf for m in names]
        if progress:
            progress("simulate", j + 1, k)
    return ExhaustiveResult([dict(d) for d in designs], feasible, est, sim, est_wall, time.perf_counter() - t1)


def screen(est: Mapping[str, np.ndarray], objectives: ObjectiveSpec, idx: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` feasible designs nearest the *estimated* front (HYDRA §VI-B: simulate the estimator's Pareto
    candidates): by non-dominated rank, then by the first objective (best first); returned sorted by index."""
    names = [m.name for m in objectives.metrics]
    pts = np.column_stack([est[m][idx] for m in names])
    sign = np.array([-1.0 if m.direction == "maximize" else 1.0 for m in objectives.metrics])
    pts = pts * sign
    finite = np.all(np.isfinite(pts), axis=1)
    rank = front_ranks(pts, alive=finite)
    order = np.lexsort((pts[:, 0], rank))
    order = order[finite[order]][:k]
    return np.sort(idx[order])


def recovery(
    reference: np.ndarray,
    found: np.ndarray,
    maximize: Sequence[bool],
    *,
    hv_reference: Sequence[float] | None = None,
) -> dict[str, float]:
    """How well ``found`` (simulated values of a study's designs) recovers ``reference`` (exhaustive, simulated).

    Returns ``best_ratio`` (best first-objective value found / exhaustive best; HYDRA §VI-F "max throughput
    recovery") and, for two objectives, ``hv_ratio`` (hypervolume of the found front / exhaustive front, both
    w.r.t. ``hv_reference``; default: the worst exhaustive value of each objective).
    """
    reference = np.asarray(reference, dtype=float)
    found = np.asarray(found, dtype=float).reshape(-1, reference.shape[1])
    reference = reference[np.all(np.isfinite(reference), axis=1)]
    found = found[np.all(np.isfinite(found), axis=1)]
    out: dict[str, float] = {}
    best_ref = reference[:, 0].max() if maximize[0] else reference[:, 0].min()
    best_found = (found[:, 0].max() if maximize[0] else found[:, 0].min()) if len(found) else math.nan
    out["best_ratio"] = float(best_found / best_ref) if maximize[0] else float(best_ref / best_found)
    if reference.shape[1] == 2:
        if hv_reference is None:
            hv_reference = [reference[:, j].min() if maximize[j] else reference[:, j].max() for j in range(2)]
        hv_ref = hypervolume_2d(reference, hv_reference, maximize)
        hv_found = hypervolume_2d(found, hv_reference, maximize) if len(found) else 0.0
        out["hv_ratio"] = float(hv_found / hv_ref) if hv_ref > 0 else math.nan
        out["hv_reference_0"], out["hv_reference_1"] = float(hv_reference[0]), float(hv_reference[1])
    mask = pareto_mask(reference, maximize)
    out["front_size"] = int(mask.sum())
    if reference.shape[1] == 2 and maximize[0] and not maximize[1]:
        b, m = select_bstar_mt(reference[:, 0], reference[:, 1], mask)
        out["bstar_tp"], out["mt_tp"] = float(reference[b, 0]), float(reference[m, 0])
    return out
