"""Pareto fronts of evaluated designs: the non-dominated mask, non-dominated ranks, HYDRA's B*/M_T picks and the 2-D
hypervolume. Plain numpy on objective vectors (one row a design); the study's pruner, plan, report and exhaustive
mode and the paper experiments all use these, so a front is computed one way everywhere.

Definitions (HYDRA §VI-B; METHODS §2g): **M_T** is the front design with the highest throughput; **B\\*** is, among
front designs whose throughput exceeds the *average* throughput, the one with the highest throughput/TTFT ratio
(the whole front when none exceeds the average).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["pareto_mask", "front_ranks", "select_bstar_mt", "hypervolume_2d"]

#: Rows compared at once (bounds the n × chunk × k comparison arrays).
_CHUNK = 512


def pareto_mask(points: np.ndarray, maximize: Sequence[bool] | None = None) -> np.ndarray:
    """Mask of the non-dominated rows (duplicates of a front point are all kept).

    Args:
        points: Objective vectors, one row per design.
        maximize: Per column, whether it is maximised (None: every column is minimised).
    """
    p = np.asarray(points, dtype=float)
    if len(p) == 0:
        return np.zeros(0, dtype=bool)
    if maximize is not None:
        p = p * np.where(np.asarray(maximize), -1.0, 1.0)
    mask = np.ones(len(p), dtype=bool)
    for s in range(0, len(p), _CHUNK):
        blk = p[s : s + _CHUNK]
        le = np.all(p[None, :, :] <= blk[:, None, :], axis=2)
        lt = np.any(p[None, :, :] < blk[:, None, :], axis=2)
        mask[s : s + _CHUNK] = ~np.any(le & lt, axis=1)
    return mask


def front_ranks(points: np.ndarray, max_rank: int | None = None, alive: np.ndarray | None = None) -> np.ndarray:
    """Non-dominated rank of each row (0 = front; minimisation), found by peeling fronts.

    Args:
        points: Objective vectors in minimisation orientation.
        max_rank: Peel at most this many fronts; rows not reached get ``max_rank`` (None: peel all).
        alive: Rows taking part (default all); the others get ``max_rank`` (None: the largest int64).
    """
    cap = np.iinfo(np.int64).max if max_rank is None else max_rank
    rank = np.full(len(points), cap)
    alive = np.ones(len(points), dtype=bool) if alive is None else alive.copy()
    r = 0
    while alive.any() and (max_rank is None or r < max_rank):
        sub = np.flatnonzero(alive)
        front = pareto_mask(points[sub])
        rank[sub[front]] = r
        alive[sub[front]] = False
        r += 1
    return rank


def select_bstar_mt(tp: np.ndarray, ttft: np.ndarray, front: np.ndarray, average_tp: float | None = None) -> tuple[int, int]:
    """Indices (into the arrays) of B* and M_T; ``front`` is a boolean mask; ``average_tp`` defaults to mean(tp)."""
    idx = np.flatnonzero(front)
    if idx.size == 0:
        return -1, -1
    mt = int(idx[np.argmax(tp[idx])])
    avg = float(np.mean(tp)) if average_tp is None else average_tp
    above = idx[tp[idx] > avg]
    pool = above if above.size else idx
    ratio = tp[pool] / np.maximum(ttft[pool], 1e-30)
    bstar = int(pool[np.argmax(ratio)])
    return bstar, mt


def hypervolume_2d(points: np.ndarray, reference: Sequence[float], maximize: Sequence[bool]) -> float:
    """Hypervolume of 2-D points w.r.t. ``reference`` (area dominated by the points and bounded by it)."""
    sign = np.where(np.asarray(maximize), -1.0, 1.0)
    p = np.asarray(points, dtype=float).reshape(-1, 2) * sign
    r = np.asarray(reference, dtype=float) * sign
    p = p[np.all(p < r, axis=1)]
    if len(p) == 0:
        return 0.0
    p = p[np.argsort(p[:, 0], kind="stable")]
    # Minimisation orientation: sweep by x ascending, keep the staircase of strictly improving y.
    stair = []
    best_y = r[1]
    for x, y in p:
        if y < best_y:
            stair.append((x, y))
            best_y = y
    hv = 0.0
    for i, (x, y) in enumerate(stair):
        x_next = stair[i + 1][0] if i + 1 < len(stair) else r[0]
        hv += (x_next - x) * (r[1] - y)
    return float(hv)
