"""Exhaustive mode (for validation): every design of an enumerated space is estimated, and all of them or a seeded
sample are simulated; the result is a table from which the exhaustive Pareto front, B*/M_T and the recovery of a
study (best-throughput ratio, hypervolume ratio) are computed.

The estimator runs on all designs through the evaluator's ``estimate_many`` when it has one (vectorised over the
design space), else design by design. Simulations can be spread over worker processes.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hydra_opt.dse.evaluators import Evaluator
from hydra_opt.dse.objectives import ObjectiveSpec
from hydra_opt.dse.report import hypervolume_2d, pareto_mask, select_bstar_mt

__all__ = ["ExhaustiveResult", "run_exhaustive", "recovery", "screen"]


@dataclass
class ExhaustiveResult:
    """Table of an exhaustive run.

    Attributes:
        designs: Design dicts, in enumeration order.
        feasible: Per design, whether it is feasible for every pair.
        est: ``{metric: array}`` aggregated estimates (NaN when infeasible).
        sim: ``{metric: array}`` aggregated simulated values (NaN when not simulated).
        est_wall_s: Wall time of the estimation pass, s.
        sim_wall_s: Wall time of the simulation pass, s.
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


def _sim_one(args: tuple[Any, ...]) -> dict[str, float]:
    evaluator, design_dict, pairs, objectives, sim_seed = args
    design = evaluator.design(design_dict)
    per = {}
    for key, (m, w) in pairs:
        model, wl = evaluator.load(m, w)
        per[key] = evaluator.simulate(design, model, wl, seed=sim_seed).metrics
    return objectives.combine(per)


def run_exhaustive(
    designs: Sequence[Mapping[str, Any]],
    pairs: Sequence[tuple[str, str]],
    objectives: ObjectiveSpec,
    evaluator: Evaluator,
    *,
    simulate: str | int = "all",
    seed: int = 0,
    sim_seed: int = 0,
    processes: int = 1,
    progress: Callable[[str, int, int], None] | None = None,
    checkpoint: str | Path | None = None,
    checkpoint_header: Mapping[str, Any] | None = None,
) -> ExhaustiveResult:
    """Estimate every design, then simulate all (``"all"``), none (0) or a seeded sample of ``simulate`` designs.

    Args:
        designs: Design dicts (e.g. ``list(space.enumerate())``).
        pairs: (model, workload) references.
        objectives: What to read and how to aggregate over pairs.
        evaluator: The evaluator (must be picklable when ``processes > 1``).
        simulate: ``"all"``; ``"front:K"`` = the K designs nearest the estimated front (:func:`screen`);
            ``"plan:K"`` = K designs chosen one at a time by the calibrated plan
            (:func:`hydra_opt.dse.plan.plan_next`, sequential, in this process); or the number of feasible designs
            to simulate (uniform sample, ``seed``).
        seed: Seed of the sample.
        sim_seed: Seed of every simulation.
        processes: Worker processes for the simulations.
        progress: Called as ``progress(stage, done, total)``.
        checkpoint: JSON-lines file to which every simulation is appended as it finishes (not with ``plan:K``).
            A re-run with the same file resumes: designs already in it are not simulated again. The file's first
            line is a header (the pairs, objectives, simulation seed and ``checkpoint_header``); a file whose
            header differs is discarded. ``sim_wall_s`` then includes the earlier runs' simulation time.
        checkpoint_header: Extra header fields that must match for a resume (e.g. the code version, the space).
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
    est_wall = time.perf_counter() - t0

    if isinstance(simulate, str) and simulate.startswith("plan:"):
        return _run_plan(designs, idx, est, feasible, keys, pairs, objectives, evaluator,
                         int(simulate.split(":", 1)[1]), sim_seed, est_wall, progress)
    if simulate == "all":
        chosen = idx
    elif isinstance(simulate, str) and simulate.startswith("front:"):
        chosen = screen(est, objectives, idx, int(simulate.split(":", 1)[1]))
    else:
        k = min(int(simulate), len(idx))
        chosen = np.sort(np.random.default_rng(seed).choice(idx, size=k, replace=False)) if k else idx[:0]
    sim = {m: np.full(n, np.nan) for m in metrics}
    ck = _Checkpoint(checkpoint, {"pairs": keys, "metrics": metrics, "sim_seed": sim_seed,
                                  **dict(checkpoint_header or {})}) if checkpoint else None
    todo, prior_wall = list(chosen), 0.0
    if ck:
        dkeys = {i: json.dumps(dict(designs[i]), sort_keys=True, default=str) for i in chosen}
        done, prior_wall = ck.load()
        todo = []
        for i in chosen:
            rec = done.get(dkeys[i])
            if rec is None:
                todo.append(i)
            else:
                for m in metrics:
                    sim[m][i] = rec.get(m, math.nan)
    t1 = time.perf_counter()
    jobs = [(evaluator, dict(designs[i]), list(zip(keys, pairs)), objectives, sim_seed) for i in todo]
    pool = None
    if processes > 1 and len(jobs) > 1:
        import multiprocessing as mp

        pool = mp.get_context("spawn").Pool(processes)
        results = pool.imap(_sim_one, jobs, chunksize=1)
    else:
        results = map(_sim_one, jobs)
    try:
        t_prev = t1
        for j, (i, r) in enumerate(zip(todo, results)):
            now = time.perf_counter()
            for m in metrics:
                sim[m][i] = r[m]
            if ck:
                ck.append(dkeys[i], {m: float(r[m]) for m in metrics}, now - t_prev)
            t_prev = now
            if progress:
                progress("simulate", len(chosen) - len(todo) + j + 1, len(chosen))
    finally:
        if pool is not None:  # as `with Pool(...)`: an interrupted sweep leaves no worker simulating
            pool.terminate()
            pool.join()
    return ExhaustiveResult([dict(d) for d in designs], feasible, est, sim, est_wall,
                            prior_wall + time.perf_counter() - t1)


class _Checkpoint:
    """Append-only JSON-lines record of finished simulations (``{"header": …}`` then one line per design)."""

    def __init__(self, path: str | Path, header: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self.header = json.loads(json.dumps({"header": dict(header)}, default=str))

    def load(self) -> tuple[dict[str, dict[str, float]], float]:
        """Records of a matching checkpoint (design key → metrics) and their summed wall time, s; starts a new
        file when there is none or its header differs."""
        done: dict[str, dict[str, float]] = {}
        wall = 0.0
        if self.path.exists():
            lines = []
            for x in self.path.read_text().splitlines():
                try:
                    lines.append(json.loads(x))
                except json.JSONDecodeError:  # a line cut by an interrupted write: that design is re-simulated
                    continue
            if lines and lines[0] == self.header:
                for rec in lines[1:]:
                    done[rec["key"]] = rec["sim"]
                    wall += float(rec["wall_s"])
                # rewrite the valid lines, so a record appended next never continues a cut line
                self.path.write_text("".join(json.dumps(x) + "\n" for x in lines))
                return done, wall
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.header) + "\n")
        return done, wall

    def append(self, key: str, sim: Mapping[str, float], wall_s: float) -> None:
        """Record one finished simulation (flushed at once, so an interruption loses at most the running one)."""
        with self.path.open("a") as fh:
            fh.write(json.dumps({"key": key, "sim": dict(sim), "wall_s": wall_s}) + "\n")


def _run_plan(designs, idx, est, feasible, keys, pairs, objectives, evaluator, k, sim_seed, est_wall, progress):
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
        r = _sim_one((evaluator, dict(designs[i]), list(zip(keys, pairs)), objectives, sim_seed))
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
    from hydra_opt.dse.pruner import _front_mask

    names = [m.name for m in objectives.metrics]
    pts = np.column_stack([est[m][idx] for m in names])
    sign = np.array([-1.0 if m.direction == "maximize" else 1.0 for m in objectives.metrics])
    pts = pts * sign
    finite = np.all(np.isfinite(pts), axis=1)
    rank = np.full(len(idx), np.iinfo(np.int64).max)
    alive = finite.copy()
    r = 0
    while alive.any():
        sub = np.flatnonzero(alive)
        front = _front_mask(pts[sub])
        rank[sub[front]] = r
        alive[sub[front]] = False
        r += 1
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
