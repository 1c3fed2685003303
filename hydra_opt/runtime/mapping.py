"""The initial spatial-pipeline mapping Ω (HYDRA Sec. IV-C, Eqs. 3–5).

Given, per task ``k`` (a block in one phase) and compute chiplet ``c``, the cost ``t(k, c) = t_comp(k, c) +
t_comm(k, c)`` (Eq. 3: ``t_comm = d_Man(c, m_k) · V_k / B_NoI``) and which chiplets may run which task, find the
assignment Ω minimising the bottleneck stage ``max_c Σ_{k: Ω(k)=c} t(k, c)`` (Eqs. 4–5). This is makespan
minimisation on unrelated machines (NP-hard in general; tens of tasks here). Algorithm (deterministic):

1. Split into independent sub-problems: connected components of the task–chiplet compatibility graph (e.g.
   attention blocks on attention chiplets, Mamba blocks on Mamba chiplets). Each is solved on its own; the
   bottleneck is the maximum over components.
2. *Greedy* (LPT): tasks by decreasing cheapest cost, each to the chiplet with the smallest load after adding
   it (ties: smaller task cost, then lower index). Round robin is also evaluated and the better one kept.
3. *Improve*: local search with moves (one task off a bottleneck chiplet) and swaps (a task of a bottleneck
   chiplet against a task of another chiplet), best improvement first, until no move lowers the lexicographic
   objective (bottleneck, number of chiplets at the bottleneck, total cost).
4. *Exact*: depth-first branch and bound seeded with that solution, tasks in decreasing cost order; bounds
   ``max(current bottleneck, (Σ loads + Σ remaining cheapest costs)/#chiplets)``; chiplets with identical cost
   columns and load are tried once (symmetry). It proves optimality for small components (≈ ≤ 10 tasks) and
   stops after ``node_limit`` nodes otherwise (the best solution found stands; :attr:`Mapping.optimal` is then
   True only if the bottleneck meets a root lower bound: largest task, average load, or the pigeonhole bound
   — the ⌈n/m⌉ cheapest tasks on one chiplet). Cost: ~2,000 nodes ≈ 10–30 ms per component.

Among bottleneck-optimal mappings the total cost Σ t(k, Ω(k)) is minimised as a tie-break (fewer hops).

:func:`variance_greedy_mapping` is the HYDRA artifact's static mapper (METHODS §2d), kept for comparisons with
the artifact (``SimOptions.mapping = "artifact"``): one greedy pass in model order that keeps the chiplets'
accumulated loads as even as possible (least variance), with no improvement step.

The runtime layer does not price tasks: callers build the cost matrix (``hydra_opt.evaluate`` uses
``opcost.task_time``) and use :func:`comm_time_s` for Eq. 3.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Mapping",
    "bottleneck_s",
    "comm_time_s",
    "map_tasks",
    "round_robin_mapping",
    "spatial_pipeline_mapping",
    "variance_greedy_mapping",
]

_EPS = 1e-12


@dataclass(frozen=True)
class Mapping:
    """An assignment of tasks to chiplets.

    Attributes:
        assign: Chiplet index of each task.
        load_s: Accumulated cost of each chiplet (Eq. 4), s.
        bottleneck_s: ``max(load_s)`` (Eq. 5), s.
        total_s: ``Σ_k t(k, assign[k])``, s.
        optimal: Whether the bottleneck is proven minimal in every component (by a complete search or by meeting
            a lower bound; the total-cost tie-break is exact only after a complete search).
        nodes: Branch-and-bound nodes explored.
    """

    assign: tuple[int, ...]
    load_s: tuple[float, ...]
    bottleneck_s: float
    total_s: float
    optimal: bool
    nodes: int = 0


def comm_time_s(hops, volume_bytes, link_bw_gbps: float):
    """Eq. (3): ``t_comm = d_Man · V / B_NoI`` (numpy-broadcasting), s."""
    return np.asarray(hops, dtype=np.float64) * np.asarray(volume_bytes, dtype=np.float64) / (link_bw_gbps * 1e9)


def _check(cost_s, compatible) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(cost_s, dtype=np.float64)
    if t.ndim != 2:
        raise ValueError(f"cost matrix must be 2-D (tasks × chiplets), got shape {t.shape}")
    ok = np.isfinite(t) if compatible is None else np.asarray(compatible, dtype=bool) & np.isfinite(t)
    if ok.shape != t.shape:
        raise ValueError(f"compatibility mask shape {ok.shape} differs from cost shape {t.shape}")
    if np.any(t[ok] < 0):
        raise ValueError("task costs must be >= 0")
    bad = np.flatnonzero(~ok.any(axis=1))
    if bad.size:
        raise ValueError(f"task {int(bad[0])} has no compatible chiplet")
    return t, ok


def bottleneck_s(cost_s, assign: Sequence[int]) -> float:
    """Bottleneck of an assignment (Eq. 5), s."""
    t = np.asarray(cost_s, dtype=np.float64)
    load = np.zeros(t.shape[1])
    for k, c in enumerate(assign):
        load[c] += t[k, c]
    return float(load.max()) if load.size else 0.0


def round_robin_mapping(cost_s, compatible=None) -> Mapping:
    """Baseline: task ``k`` goes to the next compatible chiplet of a cursor kept per compatible set."""
    t, ok = _check(cost_s, compatible)
    cursor: dict[tuple[int, ...], int] = {}
    assign = []
    for k in range(t.shape[0]):
        cands = tuple(int(c) for c in np.flatnonzero(ok[k]))
        i = cursor.get(cands, 0)
        assign.append(cands[i % len(cands)])
        cursor[cands] = i + 1
    return _result(t, assign, optimal=False)


def variance_greedy_mapping(cost_s, compatible=None) -> Mapping:
    """The artifact's static mapper: tasks in model order, each to the compatible chiplet after which the
    accumulated loads of all the phase's chiplets have the least variance (ties: lower current load, then lower
    index). The phase's chiplets are those that can run at least one of its tasks.

    Unlike :func:`map_tasks` it neither orders tasks by cost nor improves the result, so its bottleneck can be
    well above the optimum (e.g. costs ``[1, 1, 2]`` on two identical chiplets give loads ``(3, 1)``).

    Raises:
        ValueError: A task without any compatible chiplet, a negative cost, or mismatched shapes.
    """
    t, ok = _check(cost_s, compatible)
    phase_chips = np.flatnonzero(ok.any(axis=0))
    pos = {int(c): i for i, c in enumerate(phase_chips)}
    load = np.zeros(phase_chips.size)
    assign = []
    for k in range(t.shape[0]):
        best = None
        for c in np.flatnonzero(ok[k]):
            i = pos[int(c)]
            trial = load.copy()
            trial[i] += t[k, c]
            key = (float(trial.var()), float(load[i]), int(c))
            if best is None or key < best:
                best = key
        c = best[2]
        load[pos[c]] += t[k, c]
        assign.append(c)
    return _result(t, assign, optimal=False)


def _result(t: np.ndarray, assign: Sequence[int], *, optimal: bool, nodes: int = 0) -> Mapping:
    load = [0.0] * t.shape[1]
    total = 0.0
    for k, c in enumerate(assign):
        load[c] += float(t[k, c])
        total += float(t[k, c])
    return Mapping(
        assign=tuple(int(c) for c in assign),
        load_s=tuple(load),
        bottleneck_s=max(load) if load else 0.0,
        total_s=total,
        optimal=optimal,
        nodes=nodes,
    )


def _components(ok: np.ndarray) -> list[tuple[list[int], list[int]]]:
    """Connected components of the bipartite compatibility graph: (tasks, chiplets), both ascending."""
    n_t, n_c = ok.shape
    seen_t = [False] * n_t
    seen_c = [False] * n_c
    out = []
    for k0 in range(n_t):
        if seen_t[k0]:
            continue
        tasks, chips, stack = [], [], [("t", k0)]
        seen_t[k0] = True
        while stack:
            kind, i = stack.pop()
            if kind == "t":
                tasks.append(i)
                for c in np.flatnonzero(ok[i]):
                    if not seen_c[c]:
                        seen_c[c] = True
                        stack.append(("c", int(c)))
            else:
                chips.append(i)
                for k in np.flatnonzero(ok[:, i]):
                    if not seen_t[k]:
                        seen_t[k] = True
                        stack.append(("t", int(k)))
        out.append((sorted(tasks), sorted(chips)))
    return out


def _key(load: Sequence[float], total: float) -> tuple[float, int, float]:
    """Lexicographic objective: bottleneck, chiplets at the bottleneck, total cost."""
    mx = max(load)
    at = sum(1 for v in load if v >= mx * (1 - 1e-12) - 1e-18)
    return (mx, at, total)


def _greedy(t: list[list[float]], ok: list[list[bool]]) -> list[int]:
    n_t, n_c = len(t), len(t[0])
    order = sorted(range(n_t), key=lambda k: (-min(t[k][c] for c in range(n_c) if ok[k][c]), k))
    load = [0.0] * n_c
    assign = [-1] * n_t
    for k in order:
        best = min((c for c in range(n_c) if ok[k][c]), key=lambda c: (load[c] + t[k][c], t[k][c], c))
        assign[k] = best
        load[best] += t[k][best]
    return assign


def _rr(ok: list[list[bool]]) -> list[int]:
    cursor: dict[tuple[int, ...], int] = {}
    out = []
    for row in ok:
        cands = tuple(c for c, v in enumerate(row) if v)
        i = cursor.get(cands, 0)
        out.append(cands[i % len(cands)])
        cursor[cands] = i + 1
    return out


def _loads(t, assign, n_c) -> tuple[list[float], float]:
    load = [0.0] * n_c
    total = 0.0
    for k, c in enumerate(assign):
        load[c] += t[k][c]
        total += t[k][c]
    return load, total


def _improve(t: list[list[float]], ok: list[list[bool]], assign: list[int], max_rounds: int | None = None) -> list[int]:
    """Local search: move a task off a bottleneck chiplet, or swap it with a task of another chiplet.

    A step is taken only if both chiplets it touches end strictly (relative 1e-9) below the current bottleneck,
    so each step lowers the bottleneck or the number of chiplets at it: no cycles. Best step first (smallest
    resulting pair maximum, then smallest total change); O(1) per candidate.
    """
    n_t, n_c = len(t), len(t[0])
    assign = list(assign)
    load, _ = _loads(t, assign, n_c)
    rounds = max_rounds if max_rounds is not None else 20 * n_t + 100
    for _ in range(rounds):
        mx = max(load)
        if mx <= 0:
            break
        lim = mx * (1 - 1e-9)
        best = (lim, math.inf)
        move = None
        for b in range(n_c):
            if load[b] < mx * (1 - 1e-12):
                continue
            lb = load[b]
            on_b = [k for k in range(n_t) if assign[k] == b]
            for k in on_b:
                tkb = t[k][b]
                for c in range(n_c):
                    if c == b or not ok[k][c]:
                        continue
                    lc = load[c]
                    nb, nc = lb - tkb, lc + t[k][c]
                    key = (nb if nb > nc else nc, t[k][c] - tkb)
                    if key < best:
                        best, move = key, (k, c, -1)
                    for j in range(n_t):
                        if assign[j] != c or not ok[j][b]:
                            continue
                        nb2, nc2 = nb + t[j][b], nc - t[j][c]
                        key = (nb2 if nb2 > nc2 else nc2, t[k][c] - tkb + t[j][b] - t[j][c])
                        if key < best:
                            best, move = key, (k, c, j)
        if move is None:
            break
        k, c, j = move
        b = assign[k]
        assign[k] = c
        if j >= 0:
            assign[j] = b
        load, _ = _loads(t, assign, n_c)  # exact re-sum: no drift
    return assign


def _branch_and_bound(
    t: list[list[float]], ok: list[list[bool]], incumbent: list[int], node_limit: int
) -> tuple[list[int], bool, int]:
    """Exact lexicographic (bottleneck, total) minimisation by DFS; returns (assignment, proven, nodes)."""
    n_t, n_c = len(t), len(t[0])
    inc_load, inc_total = _loads(t, incumbent, n_c)
    rel = 1e-12
    # best = [bottleneck, total, assignment, bottleneck·(1±rel), total·(1−rel)] (tolerances cached).
    best: list = []

    def set_best(mx: float, tot: float, a: list[int]) -> None:
        best[:] = [mx, tot, a, mx * (1 + rel), mx * (1 - rel), tot * (1 - rel)]

    set_best(max(inc_load), inc_total, list(incumbent))
    mins = [min(t[k][c] for c in range(n_c) if ok[k][c]) for k in range(n_t)]
    # Root bounds on the bottleneck: the largest single task, the average load, and the pigeonhole bound
    # (some chiplet runs ≥ ⌈n/m⌉ tasks, costing at least the ⌈n/m⌉ smallest task minima). When the incumbent
    # meets them its bottleneck is optimal; only the total-cost tie-break is then left to the search.
    per = -(-n_t // n_c)
    root_lb = max(max(mins), sum(mins) / n_c, sum(sorted(mins)[:per]))
    bottleneck_proven = best[0] <= root_lb * (1 + rel)
    order = sorted(range(n_t), key=lambda k: (-mins[k], k))
    rest_min = [0.0] * (n_t + 1)
    for i in range(n_t - 1, -1, -1):
        rest_min[i] = rest_min[i + 1] + mins[order[i]]
    # Chiplets with identical cost columns (over compatible tasks) are interchangeable.
    keys = [tuple((t[k][c] if ok[k][c] else math.inf) for k in range(n_t)) for c in range(n_c)]
    col_class = [keys.index(keys[c]) for c in range(n_c)]
    cand = [[c for c in range(n_c) if ok[k][c]] for k in range(n_t)]
    for k in range(n_t):
        cand[k].sort(key=lambda c: (t[k][c], c))
    load = [0.0] * n_c
    assign = [-1] * n_t
    nodes = 0
    aborted = False

    def dfs(i: int, cur_max: float, cur_total: float) -> None:  # cur_total = Σ loads
        nonlocal nodes, aborted
        nodes += 1
        if nodes > node_limit:
            aborted = True
            return
        if i == n_t:
            if cur_max < best[4] or (cur_max <= best[3] and cur_total < best[5]):
                set_best(cur_max, cur_total, list(assign))
            return
        k = order[i]
        tk = t[k]
        rest = rest_min[i + 1]
        tried = set()
        for c in cand[k]:
            sym = (col_class[c], load[c])
            if sym in tried:
                continue
            tried.add(sym)
            nl = load[c] + tk[c]
            nm = nl if nl > cur_max else cur_max
            lb_total = cur_total + tk[c] + rest
            lb_max = lb_total / n_c
            if nm > lb_max:
                lb_max = nm
            if lb_max > best[3] or (lb_max >= best[4] and lb_total >= best[5]):
                continue
            load[c] = nl
            assign[k] = c
            dfs(i + 1, nm, cur_total + tk[c])
            load[c] -= tk[c]
            assign[k] = -1
            if aborted:
                return

    dfs(0, 0.0, 0.0)
    return best[2], (not aborted) or bottleneck_proven, nodes


def map_tasks(cost_s, compatible=None, *, node_limit: int = 2_000, exact: bool = True) -> Mapping:
    """Initial mapping Ω minimising the bottleneck stage (Eq. 5), ties by total cost; deterministic.

    Args:
        cost_s: ``(n_tasks, n_chiplets)`` cost ``t_comp + t_comm`` of each task on each chiplet, s
            (``inf`` = cannot run there).
        compatible: Optional boolean mask of the same shape (``False`` = cannot run there).
        node_limit: Branch-and-bound nodes per component before settling for the improved heuristic.
        exact: Run branch and bound after the heuristic.

    Raises:
        ValueError: A task without any compatible chiplet, a negative cost, or mismatched shapes.
    """
    t, ok = _check(cost_s, compatible)
    assign = [-1] * t.shape[0]
    proven = True
    nodes = 0
    for tasks, chips in _components(ok):
        sub_t = [[float(t[k, c]) if ok[k, c] else math.inf for c in chips] for k in tasks]
        sub_ok = [[bool(ok[k, c]) for c in chips] for k in tasks]
        n_c = len(chips)
        cands = []
        for start in (_greedy(sub_t, sub_ok), _rr(sub_ok)):
            cands.append(_improve(sub_t, sub_ok, start))
        sol = min(cands, key=lambda a: _key(*_loads(sub_t, a, n_c)))
        if exact:
            sol, ok_proven, n = _branch_and_bound(sub_t, sub_ok, sol, node_limit)
            proven &= ok_proven
            nodes += n
        else:
            proven = False
        for k, c in zip(tasks, sol):
            assign[k] = chips[c]
    return _result(t, assign, optimal=proven, nodes=nodes)


def spatial_pipeline_mapping(
    costs: dict[str, np.ndarray],
    compatible: dict[str, np.ndarray] | None = None,
    *,
    node_limit: int = 2_000,
    method: str = "bottleneck",
) -> dict[tuple[str, int], int]:
    """Ω for every phase: ``{(phase, block): chiplet}`` from per-phase ``(n_blocks, n_chiplets)`` cost matrices.

    Phases are mapped independently (prefill and decode tasks run on their own chiplets, or share them with
    costs that already say so). Use ``inf`` (or ``compatible=False``) where a chiplet cannot run a block.
    ``method``: ``bottleneck`` (:func:`map_tasks`, Eqs. 4–5) or ``variance`` (:func:`variance_greedy_mapping`,
    the artifact's mapper).
    """
    if method not in ("bottleneck", "variance"):
        raise ValueError(f"method must be 'bottleneck' or 'variance', not {method!r}")
    out: dict[tuple[str, int], int] = {}
    for phase in sorted(costs):
        mask = None if compatible is None else compatible.get(phase)
        m = (map_tasks(costs[phase], mask, node_limit=node_limit) if method == "bottleneck"
             else variance_greedy_mapping(costs[phase], mask))
        for b, c in enumerate(m.assign):
            out[(phase, b)] = c
    return out
