"""HYDRA Table V / §VI-F: DSE time and maximum-throughput recovery of exhaustive simulation, roofline screening
and Markov-guided search, measured on this machine on a documented sub-space (issue 8 item 6).

The study file (``studies/paper/table5_quick.yaml`` or ``table5_llama3_chat.yaml``) names the model, workload,
a slice of the Table III space, the simulator/estimator options, the Optuna sampler and promotion pruner, and
``budget.max_simulations`` = k, the simulations each search method may spend. Methods:

* **exhaustive**: every design of the slice simulated (one process) — the reference; its best throughput = 100 %;
* **roofline**: the three-bound estimate (``hydra_opt.evaluate.estimator.roofline_estimate``) of every design,
  simulate its top-k by estimated throughput (the paper's recovery protocol, METHODS §2f);
* **Markov screen**: hydra_opt's estimator on every design (vectorised, ``estimate_space``), simulate its top-k —
  HYDRA's procedure;
* **Optuna (Markov-guided)**: the study itself: a sampler proposes designs, each is estimated, the promotion pruner
  decides which reach the simulator, at most k simulations.

Recovery = best simulated throughput among a method's simulated designs / best of the exhaustive table. Every
method is scored with the exhaustive table's values (the simulations are deterministic and identical). DSE time =
the method's own wall time for estimation and search, plus the measured wall time of the simulations it chose (the
simulations themselves are reused from the exhaustive pass, which ran the same simulator with the same options).
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from hydra_opt.experiments.common import Row, Section
from hydra_opt.experiments.paths import ExperimentPaths
from hydra_opt.experiments.fronts import simulate_cached

__all__ = ["run", "PAPER", "STUDY_QUICK", "STUDY_FULL", "CachedEvaluator", "top_k", "recovery_of"]

#: Study files (in the checkout's ``studies/paper/``) of quick and full mode.
STUDY_QUICK = "table5_quick.yaml"
STUDY_FULL = "table5_llama3_chat.yaml"

#: HYDRA Table V (§VI-F): average exploration time per model over four datasets, and max-throughput recovery.
PAPER = {
    "exhaustive_llama3_min": (2 * 24 + 8) * 60.0,   # "2 d. 8 h."
    "exhaustive_mamba2_min": (3 * 24 + 1) * 60.0,   # "3 d. 1 h."
    "exhaustive_nemotron_min": (8 * 24 + 8) * 60.0,  # "8 d. 8 h."
    "roofline_llama3_min": 4.0,
    "hydra_llama3_min": 4.0,
    "recovery_exhaustive_pct": 100.0,
    "recovery_roofline_pct": 74.0,
    "recovery_hydra_pct": 93.0,
}
#: Table III Llama-3 space: 5,040 designs × 4 datasets, 100 simulated s each (the paper's exhaustive sweep).
PAPER_SWEEP_DESIGNS = 4 * 5040
PAPER_HORIZON_S = 100.0
PAPER_CORES = 64


class CachedEvaluator:
    """Delegates to a :class:`~hydra_opt.evaluate.evaluators.HydraEvaluator`; simulations come from the in-process
    cache (filled by the exhaustive pass) and their original wall time is charged to ``charged_wall_s``."""

    def __init__(self, inner: Any, model: str, workload: str) -> None:
        self.inner = inner
        self.model_name = model
        self.workload_name = workload
        self.simulate_options = inner.simulate_options
        self.scenario = inner.scenario
        self.charged_wall_s = 0.0
        self.simulated: list[dict[str, Any]] = []

    def design(self, design):
        return self.inner.design(design)

    def load(self, model, workload):
        return self.inner.load(model, workload)

    def feasibility(self, design, model):
        return self.inner.feasibility(design, model)

    def estimate(self, design, model, workload):
        return self.inner.estimate(design, model, workload)

    def estimate_many(self, designs, model, workload):
        return self.inner.estimate_many(designs, model, workload)

    def simulate(self, design, model, workload, *, seed):
        from hydra_opt.evaluate.evaluators import SimOutcome

        d = design.to_dict() if hasattr(design, "to_dict") else dict(design)
        metrics, wall = simulate_cached(self.inner, _design_dict(d), self.model_name, self.workload_name, seed=seed)
        self.charged_wall_s += wall
        self.simulated.append(_design_dict(d))
        return SimOutcome(metrics, None)


def _design_dict(d: dict[str, Any]) -> dict[str, Any]:
    """Canonical design dict (search-space form) so the same design hits the same cache entry."""
    from hydra_opt.system.design import DesignPoint

    p = DesignPoint.from_dict(dict(d))
    return {"chiplets": dict(sorted(p.counts)), "n_mem": int(p.n_mem), "memory": p.memory,
            "d2d_bw_gbps": int(p.d2d_bw_gbps), "max_batch": int(p.max_batch), "placement": p.placement,
            "batching": p.batching, "scheduler": p.scheduler,
            "package": {"grid_w": int(p.grid_w), "grid_h": int(p.grid_h), "slot_area_mm2": float(p.slot_area_mm2)}}


def top_k(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` highest finite scores (stable: ties keep enumeration order)."""
    s = np.where(np.isfinite(scores), scores, -np.inf)
    return [int(i) for i in np.argsort(-s, kind="stable")[:k] if np.isfinite(s[i])]


def recovery_of(found_tp: list[float], best_tp: float) -> float:
    """Best throughput found / exhaustive best (0 when nothing was found)."""
    vals = [v for v in found_tp if math.isfinite(v)]
    return max(vals) / best_tp if vals and best_tp > 0 else 0.0


def _fmt_min(s: float) -> str:
    return f"{s / 60:.1f} min" if s < 5400 else f"{s / 3600:.1f} h"


def run(quick: bool, fig_dir: Path, seed: int = 0, *, log=print, study: str | Path | None = None,
        paths: ExperimentPaths | None = None) -> Section:
    """Run the Table V reproduction on the quick or full study file of ``paths``' checkout (or ``study``)."""
    import optuna

    from hydra_opt.evaluate.evaluators import HydraEvaluator
    from hydra_opt.dse.exhaustive import run_exhaustive
    from hydra_opt.evaluate.objectives import DEFAULT_OBJECTIVES
    from hydra_opt.dse.runner import RunOptions, run_study
    from hydra_opt.dse.spec import load_study_spec
    from hydra_opt.evaluate.estimator import roofline_estimate

    t_start = time.perf_counter()
    paths = paths or ExperimentPaths.default()
    path = Path(study) if study else paths.paper_dir / (STUDY_QUICK if quick else STUDY_FULL)
    spec = load_study_spec(path)
    (model, workload), = spec.pairs
    scn = dict(spec.scenario or {})
    horizon = float(scn.get("horizon_s") or PAPER_HORIZON_S)
    scn["horizon_s"] = horizon
    # The paper preset counts every token of the run: the estimator's window is the whole horizon.
    est_opts = {**(spec.estimate_options or {}), "window_s": (0.0, horizon)}
    ev = HydraEvaluator(estimate_options=est_opts, simulate_options=spec.simulate_options, file=spec.file,
                        scenario=scn, design_overrides=spec.design_overrides)
    designs = [_design_dict(d) for d in spec.space.enumerate()]
    k = int(spec.max_simulations or max(1, round(0.031 * len(designs))))

    # 1. Exhaustive: simulate every feasible design (this also fills the cache the other methods are scored from).
    res = run_exhaustive(designs, [(model, workload)], DEFAULT_OBJECTIVES, ev, simulate=0)
    feas = np.flatnonzero(res.feasible)
    sim_tp = np.full(len(designs), np.nan)
    sim_walls = np.full(len(designs), np.nan)
    for i in feas:
        metrics, wall = simulate_cached(ev, designs[i], model, workload)
        sim_tp[i] = float(metrics.get("throughput_tok_s", math.nan))
        sim_walls[i] = wall
    exhaustive_s = float(np.nansum(sim_walls))
    best = float(np.nanmax(sim_tp))
    log(f"[hydra_table5] exhaustive: {len(feas)} simulations, {exhaustive_s:.0f} s, best {best:.1f} tok/s")

    # 2. Roofline: estimate all, simulate the top-k.
    t0 = time.perf_counter()
    m_obj, w_obj = ev.load(model, workload)
    roof = np.full(len(designs), np.nan)
    for i in feas:
        roof[i] = roofline_estimate(ev.design(designs[i]), m_obj, w_obj, scenario=ev.scenario,
                                    options=ev.est_options).throughput_tok_s
    roof_est_s = time.perf_counter() - t0
    roof_pick = top_k(roof, k)
    roof_s = roof_est_s + float(np.nansum(sim_walls[roof_pick]))
    roof_rec = recovery_of(list(sim_tp[roof_pick]), best)

    # 3. Markov screen: the vectorised estimator on all, simulate the top-k.
    markov = np.asarray(res.est["throughput_tok_s"], dtype=float)
    mk_pick = top_k(np.where(res.feasible, markov, np.nan), k)
    mk_s = res.est_wall_s + float(np.nansum(sim_walls[mk_pick]))
    mk_rec = recovery_of(list(sim_tp[mk_pick]), best)

    # 4. Optuna: the study (sampler + promotion pruner, at most k simulations) on a temporary journal storage.
    key_index = {json.dumps(d, sort_keys=True): i for i, d in enumerate(designs)}
    cev = CachedEvaluator(ev, model, workload)
    with tempfile.TemporaryDirectory() as tmp:
        ospec = dataclasses.replace(spec, storage=f"journal:///{tmp}/table5.log", artifact_dir=None, seed=seed,
                                    max_simulations=k, estimate_options=est_opts, scenario=scn)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ostudy, summary = run_study(ospec, RunOptions(quiet=True), evaluator=cev)
        opt_run_s = time.perf_counter() - t0
        n_trials = len(ostudy.get_trials(deepcopy=False))
        done = ostudy.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    opt_idx = sorted({key_index[json.dumps(d, sort_keys=True)] for d in cev.simulated
                      if json.dumps(d, sort_keys=True) in key_index})
    opt_s = opt_run_s  # the cached simulations took no time here ...
    opt_s += cev.charged_wall_s  # ... so charge their measured wall time
    opt_rec = recovery_of(list(sim_tp[opt_idx]), best)
    log(f"[hydra_table5] roofline {roof_rec:.3f}, markov screen {mk_rec:.3f}, optuna {opt_rec:.3f} "
        f"({len(opt_idx)} simulations, {n_trials} trials, {len(done)} complete)")

    n = len(designs)
    mean_sim = float(np.nanmean(sim_walls))
    # Extrapolation of the exhaustive sweep to the paper's size at this machine's measured speed.
    extrap_s = mean_sim * (PAPER_HORIZON_S / horizon) * PAPER_SWEEP_DESIGNS / PAPER_CORES
    setup = (f"{n} designs ({len(feas)} feasible), {model} on {workload}, {horizon:.0f} simulated s per design, "
             f"budget k = {k} simulations per search method ({100 * k / n:.1f} % of the slice)")
    rows = [
        Row("max-throughput recovery, exhaustive", PAPER["recovery_exhaustive_pct"], 100.0, "%",
            "the reference by definition"),
        Row("max-throughput recovery, roofline top-k", PAPER["recovery_roofline_pct"], 100 * roof_rec, "%",
            _rec_comment("roofline", roof_rec, PAPER["recovery_roofline_pct"], roof, sim_tp, roof_pick, feas, k)),
        Row("max-throughput recovery, HYDRA estimator top-k (screen)", PAPER["recovery_hydra_pct"], 100 * mk_rec, "%",
            _rec_comment("hydra_opt's estimator", mk_rec, PAPER["recovery_hydra_pct"], markov, sim_tp, mk_pick,
                         feas, k)),
        Row("max-throughput recovery, Markov-guided Optuna (TPE + promotion pruner)", PAPER["recovery_hydra_pct"],
            100 * opt_rec, "%",
            f"{n_trials} trials, {len(opt_idx)} simulated (promotion rate {summary.promotion_rate:.0%})"
            + ("" if abs(100 * opt_rec - PAPER["recovery_hydra_pct"]) <= 0.25 * PAPER["recovery_hydra_pct"] else
               "; measured: the pruner promoted designs whose best simulates at "
               f"{np.nanmax(sim_tp[opt_idx]) if opt_idx else 0:.0f} tok/s vs {best:.0f} tok/s")),
        Row("DSE time, exhaustive (Llama-3, Table V)", PAPER["exhaustive_llama3_min"], exhaustive_s / 60, "min",
            f"measured on the slice: {setup}; {len(feas)} simulations × {mean_sim:.2f} s mean wall, one process — "
            f"the paper sweeps 4 × 5,040 designs × 100 s on 64 cores"),
        Row("DSE time, exhaustive, extrapolated to Table III Llama-3 (4 × 5,040 designs, 100 s, 64 cores)",
            PAPER["exhaustive_llama3_min"], extrap_s / 60, "min",
            f"measured mean {mean_sim:.2f} s per {horizon:.0f}-s simulation × {PAPER_HORIZON_S / horizon:.0f} "
            f"(horizon) × 20,160 / 64 cores, perfect scaling assumed; the artifact's simulator needs 171–747 s per "
            f"100-s run (METHODS §2h)"),
        Row("DSE time, roofline (Llama-3)", PAPER["roofline_llama3_min"], roof_s / 60, "min",
            f"{len(feas)} roofline estimates ({roof_est_s:.1f} s) + {len(roof_pick)} simulations on the slice; "
            f"the paper's time covers 4 datasets × 5,040 designs"),
        Row("DSE time, HYDRA estimator screen (Llama-3)", PAPER["hydra_llama3_min"], mk_s / 60, "min",
            f"vectorised estimates of {len(feas)} designs ({res.est_wall_s:.1f} s) + {len(mk_pick)} simulations "
            f"on the slice; the paper's time covers 4 datasets × 5,040 designs"),
        Row("DSE time, Markov-guided Optuna (Llama-3)", PAPER["hydra_llama3_min"], opt_s / 60, "min",
            f"study wall {opt_run_s:.1f} s (sampling, estimates, pruner, SQLite-free journal storage) + measured "
            f"wall of its {len(opt_idx)} simulations ({cev.charged_wall_s:.1f} s); the paper's time covers 4 "
            f"datasets × 5,040 designs"),
    ]
    lines = ["| method | simulations | estimates | recovery | DSE time |", "|---|---:|---:|---:|---:|",
             f"| exhaustive | {len(feas)} | 0 | 100.0 % | {_fmt_min(exhaustive_s)} |",
             f"| roofline top-{k} | {len(roof_pick)} | {len(feas)} | {100 * roof_rec:.1f} % | {_fmt_min(roof_s)} |",
             f"| HYDRA estimator top-{k} (screen) | {len(mk_pick)} | {len(feas)} | {100 * mk_rec:.1f} % | "
             f"{_fmt_min(mk_s)} |",
             f"| Optuna {spec.sampler.name} + promotion pruner | {len(opt_idx)} | {n_trials} | {100 * opt_rec:.1f} % "
             f"| {_fmt_min(opt_s)} |", ""]
    lines.append(f"Best simulated throughput of the slice: {best:.1f} tok/s. Study file: "
                 f"`{path.relative_to(paths.checkout) if path.is_relative_to(paths.checkout) else path}`. Mean simulation wall "
                 f"{mean_sim:.2f} s (max {np.nanmax(sim_walls):.2f} s). Wall time of this experiment: "
                 f"{time.perf_counter() - t_start:.0f} s ({'quick' if quick else 'full'} mode).")
    intro = (f"Setup: {setup}; `Scenario.paper(horizon_s={horizon:.0f})`, estimator with the paper placement "
             "preset, TTFT from batch start, whole-run window. Recovery = best simulated throughput among the "
             "designs a method simulated / best of the exhaustive table (all methods scored on the same, "
             "deterministic simulations). DSE time = a method's own estimation/search wall time plus the measured "
             "wall time of the simulations it chose (one process on this shared 2-core machine). The paper's "
             "numbers are averages over four datasets of the whole Table III space on a 64-core CPU; ours are one "
             "dataset on a slice, so times differ by construction — the extrapolated row puts the exhaustive time "
             "on the paper's scale.")
    wall = time.perf_counter() - t_start
    return Section(key="hydra_table5", title="HYDRA Table V / §VI-F — DSE time and throughput recovery",
                   intro_md=intro, rows=rows, figures=[], extra_md="\n".join(lines), wall_s=wall, quick=quick)


def _rec_comment(name: str, rec: float, paper_pct: float, est: np.ndarray, sim: np.ndarray, pick: list[int],
                 feas: np.ndarray, k: int) -> str:
    from hydra_opt.experiments.fronts import spearman

    rho = spearman(est[feas], sim[feas])
    text = f"top-{k} by estimated throughput; Spearman ρ(estimate, simulation) over the slice = {rho:.2f}"
    best = int(np.nanargmax(np.where(np.isfinite(sim), sim, -np.inf)))
    order = np.argsort(-np.where(np.isfinite(est), est, -np.inf), kind="stable")
    rank = int(np.flatnonzero(order == best)[0]) + 1
    text += f"; the slice's best design is ranked {rank} of {len(feas)} by this estimate"
    if abs(100 * rec - paper_pct) > 0.25 * paper_pct:
        text += (f"; measured: its top-{k} simulate at ≤ {np.nanmax(sim[pick]) if pick else 0:.0f} tok/s, the "
                 f"slice's best at {np.nanmax(sim):.0f} tok/s")
        if rec > paper_pct / 100:
            text += (f" — above the paper because on this {len(feas)}-design slice the best design is within the "
                     f"estimate's top-{k} (rank above); the paper's recovery is over 2,048 candidates per dataset")
        elif name == "roofline":
            text += " (the roofline assumes full pipelines and saturated batches, docs/estimator.md)"
    return text
