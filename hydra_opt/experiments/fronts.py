"""Pure helpers of the DSE reproductions (HYDRA Fig. 8 / §VI-B and Table V / §VI-F): fronts, B*/M_T, stratified
sub-spaces, the estimator's candidate selection, the artifact's published fronts and rank correlation.

Nothing here simulates; the experiment modules (:mod:`hydra_opt.experiments.hydra_fig8`,
:mod:`hydra_opt.experiments.hydra_table5`) call the simulator and use these functions on the numbers.

Conventions: throughput in tok/s (maximised), TTFT in s (minimised). A design that served no token (throughput 0 or
non-finite, TTFT NaN) is never on a front.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hydra_opt.evaluate.front import pareto_mask, select_bstar_mt
from hydra_opt.experiments._hydra_sims import disk_cached

__all__ = [
    "ArtifactPoint",
    "FrontPick",
    "artifact_design",
    "artifact_front_path",
    "bstar_mt",
    "front_mask",
    "load_artifact_front",
    "pick_along_front",
    "select_candidates",
    "simulate_cached",
    "spearman",
    "stratified_sample",
    "stratum_key",
]

#: Dataset names: hydra_opt workload suffix → the artifact's file tag.
_ARTIFACT_DATASET = {"arxiv": "ARXIV", "bwb": "BWB", "chat": "CHAT", "longwriter": "LW"}
#: hydra_opt model name (without the ``@hydra`` suffix) → the artifact's file tag.
_ARTIFACT_MODEL = {"llama-3-8b": "LLAMA3", "mamba2-2.7b": "MAMBA2"}
#: The artifact's count columns → hydra_opt chiplet names (METHODS §2a).
_ARTIFACT_CHIPLETS = {"Num Ap": "tscs_p", "Num Ad": "tscs_d", "Num Mp": "marca_p", "Num Md": "marca_d"}


def _valid(tp: np.ndarray, ttft: np.ndarray) -> np.ndarray:
    """Designs that served tokens and have a finite TTFT."""
    tp = np.asarray(tp, dtype=float)
    ttft = np.asarray(ttft, dtype=float)
    return np.isfinite(tp) & np.isfinite(ttft) & (tp > 0)


def front_mask(tp: Sequence[float], ttft: Sequence[float]) -> np.ndarray:
    """Mask of the (throughput ↑, TTFT ↓) Pareto front; designs without served tokens or TTFT are excluded."""
    tp = np.asarray(tp, dtype=float)
    ttft = np.asarray(ttft, dtype=float)
    ok = _valid(tp, ttft)
    mask = np.zeros(tp.size, dtype=bool)
    idx = np.flatnonzero(ok)
    if idx.size:
        mask[idx] = pareto_mask(np.column_stack([tp[idx], ttft[idx]]), [True, False])
    return mask


def bstar_mt(tp: Sequence[float], ttft: Sequence[float], mask: np.ndarray | None = None,
             average_tp: float | None = None) -> tuple[int, int]:
    """Indices of B* and M_T (HYDRA §VI-B; ``hydra_opt.evaluate.front.select_bstar_mt``).

    M_T = the front design with the highest throughput; B* = among front designs whose throughput exceeds
    ``average_tp`` (default: the mean throughput of the designs that served tokens), the highest throughput/TTFT.

    Args:
        tp: Throughputs, tok/s.
        ttft: TTFTs, s.
        mask: Front mask (default: :func:`front_mask`).
        average_tp: The B* throughput floor, tok/s.

    Returns:
        ``(bstar, mt)``, ``(-1, -1)`` when no design served tokens.
    """
    tp = np.asarray(tp, dtype=float)
    ttft = np.asarray(ttft, dtype=float)
    mask = front_mask(tp, ttft) if mask is None else np.asarray(mask, dtype=bool)
    ok = _valid(tp, ttft)
    if not ok.any() or not mask.any():
        return -1, -1
    avg = float(np.mean(tp[ok])) if average_tp is None else float(average_tp)
    return select_bstar_mt(np.where(ok, tp, 0.0), np.where(ok, ttft, np.inf), mask & ok, avg)


def stratum_key(design: Mapping[str, Any]) -> tuple[int, int, int]:
    """Stratum of a design: (max batch, D2D bandwidth, HBM-count bucket of 4) — the axes that move throughput most."""
    return int(design["max_batch"]), int(design["d2d_bw_gbps"]), int(design["n_mem"]) // 4


def stratified_sample(designs: Sequence[Mapping[str, Any]], n: int, seed: int = 0) -> list[int]:
    """Indices of ``n`` designs drawn round-robin over the strata (in a seeded order), so every prefix of the
    sample spreads over batch sizes, bandwidths and HBM counts (the sampling of benchmarks/estimator_ranking.py).

    Returns sorted indices into ``designs``.
    """
    rng = np.random.default_rng(seed)
    strata: dict[tuple[int, int, int], list[int]] = {}
    for i, d in enumerate(designs):
        strata.setdefault(stratum_key(d), []).append(i)
    keys = sorted(strata)
    keys = [keys[j] for j in rng.permutation(len(keys))]
    order = {k: [strata[k][j] for j in rng.permutation(len(strata[k]))] for k in keys}
    out: list[int] = []
    n = min(int(n), len(designs))
    while len(out) < n:
        for k in keys:
            if order[k] and len(out) < n:
                out.append(order[k].pop())
    return sorted(out)


def pick_along_front(tp: np.ndarray, ttft: np.ndarray, idx: np.ndarray, k: int) -> list[int]:
    """Up to ``k`` of ``idx`` spread evenly along the front in throughput order (both ends included)."""
    idx = np.asarray(idx)
    if idx.size <= k:
        return [int(i) for i in idx]
    order = idx[np.argsort(np.asarray(tp)[idx], kind="stable")]
    pos = np.unique(np.round(np.linspace(0, order.size - 1, k)).astype(int))
    return [int(order[p]) for p in pos]


def select_candidates(est_tp: Sequence[float], est_ttft: Sequence[float], k: int) -> list[int]:
    """The ``k`` designs the estimator proposes for simulation (HYDRA §VI-B "estimator-selected Pareto points").

    Always the estimated M_T and B* first, then designs spread evenly along the estimated front; when the front
    has fewer than ``k`` designs, the next non-dominated layers are used the same way. Returns sorted indices.
    """
    tp = np.asarray(est_tp, dtype=float)
    ttft = np.asarray(est_ttft, dtype=float)
    chosen: list[int] = []
    b, m = bstar_mt(tp, ttft)
    for i in (m, b):
        if i >= 0 and i not in chosen and len(chosen) < k:
            chosen.append(int(i))
    alive = _valid(tp, ttft)
    alive[chosen] = False
    while len(chosen) < k and alive.any():
        sub = np.flatnonzero(alive)
        layer = sub[pareto_mask(np.column_stack([tp[sub], ttft[sub]]), [True, False])]
        for i in pick_along_front(tp, ttft, layer, k - len(chosen)):
            chosen.append(i)
        alive[layer] = False
    return sorted(chosen)


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's ρ over the pairs where both are finite (NaN with fewer than 3 pairs or a constant side)."""
    from scipy.stats import spearmanr

    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or np.ptp(a[ok]) == 0 or np.ptp(b[ok]) == 0:
        return math.nan
    return float(spearmanr(a[ok], b[ok]).statistic)


@dataclass(frozen=True)
class ArtifactPoint:
    """One design of a published front with the artifact simulator's values.

    Attributes:
        design: hydra_opt design dict (``kind: design`` fields; CP = the artifact's ``bw`` placement).
        throughput_tok_s: Published ``tokens_per_sec``.
        ttft_s: Published ``TTFT(s)``.
        label: Short label ``B<b> M<hbm> <counts> <bw>``.
    """

    design: dict[str, Any]
    throughput_tok_s: float
    ttft_s: float
    label: str


@dataclass(frozen=True)
class FrontPick:
    """B* / M_T of one design set, by index into it (-1 when undefined)."""

    bstar: int
    mt: int


def artifact_front_path(model: str, dataset: str, folder: Path) -> Path | None:
    """The published front CSV of (model, dataset) in ``folder`` (the artifact's ``pareto_fronts/``,
    :attr:`~hydra_opt.experiments.paths.ExperimentPaths.artifact_fronts`), or None when the artifact has none
    (Nemotron-H)."""
    m = _ARTIFACT_MODEL.get(model.split("@")[0])
    d = _ARTIFACT_DATASET.get(dataset.removeprefix("hydra-"))
    if m is None or d is None:
        return None
    return Path(folder) / f"pareto_frontier_results_summary_{m}-{d}_bw_static_static.csv"


def artifact_design(row: Mapping[str, str]) -> dict[str, Any]:
    """hydra_opt design dict of one artifact CSV row (METHODS §2a: 6×4 package, 144 mm² slots, HBM3, int8)."""
    chiplets = {name: int(row[col]) for col, name in _ARTIFACT_CHIPLETS.items() if int(row.get(col, 0) or 0) > 0}
    placement = {"bw": "cp", "rr": "rr", "random": "random"}.get(row.get("placer", "bw"), "cp")
    return {
        "chiplets": dict(sorted(chiplets.items())),
        "n_mem": int(row["Num M"]),
        "memory": "hbm3",
        "d2d_bw_gbps": int(float(row["NoI_bw(GBps)"])),
        "max_batch": int(row["batchsize"]),
        "placement": placement,
        "batching": "static",
        "scheduler": "static",
        "precision": "int8",
        "package": {"grid_w": 6, "grid_h": 4, "slot_area_mm2": 144.0},
    }


#: In-process cache of simulations: (model, workload, design JSON, options repr, seed) → (metrics, wall s).
_SIM_CACHE: dict[tuple[str, str, str, str, int], tuple[dict[str, float], float]] = {}


def simulate_cached(evaluator: Any, design: Mapping[str, Any], model: str, workload: str, *,
                    seed: int = 0) -> tuple[dict[str, float], float]:
    """Simulate ``design`` with ``evaluator`` (a :class:`hydra_opt.evaluate.evaluators.HydraEvaluator`) once per process.

    Experiments that run in the same process (Fig. 8 and Table V share the Llama-3 chat setting in quick mode)
    reuse each other's simulations; the wall time returned is the original simulation's, s.
    """
    import json
    import time

    key = (model, workload, json.dumps(design, sort_keys=True, default=str),
           repr(sorted((getattr(evaluator, "simulate_options", None) or {}).items())),
           repr(getattr(evaluator, "scenario", None)), int(seed))
    if key not in _SIM_CACHE:
        def run() -> tuple[dict[str, float], float]:
            m, w = evaluator.load(model, workload)
            t0 = time.perf_counter()
            out = evaluator.simulate(evaluator.design(dict(design)), m, w, seed=seed)
            return dict(out.metrics), time.perf_counter() - t0

        _SIM_CACHE[key] = disk_cached(("fronts",) + key, run)
    metrics, wall = _SIM_CACHE[key]
    return dict(metrics), wall


def _label(d: Mapping[str, Any]) -> str:
    counts = "/".join(f"{k}{v}" for k, v in d["chiplets"].items())
    return f"B{d['max_batch']} M{d['n_mem']} {counts} {d['d2d_bw_gbps']}"


def load_artifact_front(path: str | Path) -> list[ArtifactPoint]:
    """The designs of a published front CSV (rows with ``is_pareto`` true), in file order."""
    out: list[ArtifactPoint] = []
    with Path(path).open(newline="") as fh:
        for row in csv.DictReader(fh):
            if str(row.get("is_pareto", "True")).strip().lower() not in ("true", "1"):
                continue
            d = artifact_design(row)
            out.append(ArtifactPoint(d, float(row["tokens_per_sec"]), float(row["TTFT(s)"]), _label(d)))
    return out
