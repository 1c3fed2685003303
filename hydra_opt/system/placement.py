"""Chiplet placement on the package grid (HYDRA Sec. IV-A): memories on the ring, compute near its memory.

Policies (docs/noi_placement.md):

* ``cp`` — communication-aware (HYDRA "CP"), two steps:

  1. *Memory step.* Memory chiplets take the first ``n_mem`` slots of a fixed ring order. For a hybrid model they
     are split into a Mamba group (the ``N_M`` lowest node ids) and an attention group (the rest), choosing
     ``N_M`` (at most one memory per block of the family) to maximise ``min(r_M, r_A)`` of Eq. (1):
     ``r_f = max(0, ⌊(N_f·C_mem − W_f) / S_f⌋)``, the number of concurrent requests whose per-request memory
     ``S_f`` (Mamba: recurrent + conv state; attention: KV at ``context_tokens``) fits next to the family's
     weights ``W_f`` (``split="capacity"``, our default). The artifact's bandwidth variant
     (``split="bandwidth"``, paper preset) scores ``r_M = ⌊(BW/⌈L_M/N_M⌉)/100⌋, r_A = ⌊(BW/⌈L_A/N_A⌉)/200⌋``
     instead; ``split="traffic"`` minimises the larger of the groups' bytes per memory per pass (weights + a
     batch's state/KV), among splits whose Eq. (1) admits a full batch. Ties: a split whose weights fit first,
     then the larger ``r_M + r_A``, then the larger ``N_M``. Each block's weights go to one memory of its
     family's group: ``weights="traffic"`` (default of ``place(preset="clean")``) balances the bytes each
     memory serves per pass (weights + a batch's state/KV at ``context_tokens``; LPT greedy, then moves, swaps
     and exact pair re-splits; model-order runs kept when no worse), and with ``split="traffic"`` the split
     minimises the busiest memory of that map; ``weights="balanced"`` cuts contiguous runs of the model order
     with the least largest weight bytes; ``weights="chunks"`` (paper preset) deals equal block counts per kind.
     Why balance: Eq. 2 is about distance and Eq. 1 about concurrency, but every pass streams all weights, so
     the busiest HBM interface bounds a pass (docs/noi_placement.md, "Findings").
  2. *Compute step* (Eq. 2). A compute chiplet ``c`` at slot ``p`` costs ``v(c)·Σ_h d(p, h)`` over the memories
     ``h`` holding weights of the block families it runs (Manhattan distance ``d``; volume weight ``v``:
     1 for prefill, 4 for decode chiplets — the ratio of the artifact's per-task bandwidths 64:256 GB/s).
     Default ``cp_order="joint"``: one exact minimum-cost assignment of all compute chiplets to the free slots
     (``scipy.optimize.linear_sum_assignment``) — the exact minimum of Eq. (2) summed over both groups, so no
     conflict between groups is left to resolve. ``cp_order="sequential"`` follows the paper's procedure: the
     groups are placed one after another, larger first, each by an exact assignment of its chiplets to the
     still-free slots (the optimum for that group given the earlier ones, where the paper draws 1,000 random
     shuffles over a candidate region); its total is never below the joint one.

* ``rr`` — round robin: compute types dealt cyclically over the free slots in node-id order; block ``i``'s
  weights on memory ``i mod n_mem``.
* ``random`` — compute chiplets on a seeded random permutation of the free slots; each block's weights on the
  first memory with room in a seeded random order.

Slots/nodes are numbered ``x·height + y`` like :class:`hydra_opt.system.package.Package` and
:class:`hydra_opt.hardware.noi.Mesh`. Everything is deterministic for a given seed (only ``random`` uses it).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hydra_opt.system.policies import PLACEMENTS

__all__ = [
    "DEFAULT_PHASE_VOLUME",
    "PLACEMENT_POLICIES",
    "BlockSpec",
    "ComputeSpec",
    "MemorySplit",
    "PlacedChiplet",
    "Placement",
    "PlacementError",
    "PlacementProblem",
    "block_pass_bytes",
    "eq2_cost",
    "family_traffic_bytes",
    "group_concurrency",
    "mean_hops",
    "mem_pass_bytes",
    "memory_split",
    "place",
    "place_problem",
    "placement_problem",
    "ring_order",
    "split_memories",
]

#: Placement policies.
PLACEMENT_POLICIES: tuple[str, ...] = PLACEMENTS  # the policy vocabulary (system.policies)
#: Eq. (2) volume weight of a chiplet per phase it serves (a dual-phase chiplet gets the mean).
DEFAULT_PHASE_VOLUME: dict[str, float] = {"prefill": 1.0, "decode": 4.0}
# Artifact's per-request bandwidth demand constants of the bandwidth split (GB/s), METHODS §2d.
_BW_DEMAND_GBPS = {"mamba": 100.0, "attention": 200.0}
# Artifact's ring order for the 6 x 4 package (METHODS §2d), as (x, y).
_ARTIFACT_RING_6X4 = (
    (0, 2), (5, 2), (0, 1), (5, 1),
    (3, 0), (3, 3), (4, 0), (4, 3), (2, 0), (2, 3), (1, 0), (1, 3),
    (0, 0), (5, 3), (5, 0), (0, 3),
)  # fmt: skip


# Artifact's round-robin dealing order of compute types (METHODS §2d).
_ARTIFACT_RR_TYPES = ("marca_p", "marca_d", "tscs_p", "tscs_d")


class PlacementError(ValueError):
    """The chiplets cannot be placed (too many for the grid or ring, or weights that do not fit)."""


@dataclass(frozen=True)
class ComputeSpec:
    """One compute chiplet instance to place.

    Attributes:
        name: Library name (``tscs_p``...).
        families: Block families it runs.
        phases: Phases it runs.
        volume: Eq. (2) communication-volume weight ``v``; 0 = from :data:`DEFAULT_PHASE_VOLUME`.
    """

    name: str
    families: frozenset[str]
    phases: frozenset[str]
    volume: float = 0.0

    @property
    def weight(self) -> float:
        """The volume weight used in Eq. (2)."""
        if self.volume > 0:
            return self.volume
        vals = [DEFAULT_PHASE_VOLUME[p] for p in sorted(self.phases) if p in DEFAULT_PHASE_VOLUME]
        return sum(vals) / len(vals) if vals else 1.0


@dataclass(frozen=True)
class BlockSpec:
    """One model block, as placement sees it.

    Attributes:
        family: ``"attention"`` or ``"mamba"``.
        weight_bytes: Weight bytes, bytes.
        kv_bytes_per_token: KV-cache bytes per context token per request, bytes.
        state_bytes: Recurrent/conv state bytes per request, bytes.
        kind: Block type label (blocks with equal labels are chunked together by ``weights="chunks"``).
    """

    family: str
    weight_bytes: float
    kv_bytes_per_token: float = 0.0
    state_bytes: float = 0.0
    kind: str = ""


@dataclass(frozen=True)
class PlacementProblem:
    """Plain input of placement (decoupled from DesignPoint/Model; see :func:`placement_problem`).

    Attributes:
        width, height: Grid size (slots).
        compute: One entry per compute chiplet instance (their order is the chiplet index order).
        n_mem: Number of memory chiplets.
        mem_capacity_bytes: Capacity of one memory chiplet, bytes.
        blocks: The model's blocks in order.
        mem_bw_gbps: Interface bandwidth of one memory chiplet, GB/s (bandwidth split only).
        context_tokens: Context length whose KV cache one request reserves in Eq. (1), tokens.
        mem_name: Label of memory slots in :attr:`Placement.grid`.
        batch: Requests per batch (the design's maximum batch): nominal batch of the ``traffic`` split.
    """

    width: int
    height: int
    compute: tuple[ComputeSpec, ...]
    n_mem: int
    mem_capacity_bytes: float
    blocks: tuple[BlockSpec, ...]
    mem_bw_gbps: float = 600.0
    context_tokens: int = 4096
    mem_name: str = "hbm"
    batch: int = 16

    def family_blocks(self, family: str) -> list[int]:
        """Indices of the blocks of ``family``."""
        return [i for i, b in enumerate(self.blocks) if b.family == family]


@dataclass(frozen=True)
class PlacedChiplet:
    """A compute chiplet and its slot.

    Attributes:
        index: Chiplet index (order of :attr:`PlacementProblem.compute`).
        name: Library name.
        slot: Node id.
        families, phases: What it runs.
    """

    index: int
    name: str
    slot: int
    families: frozenset[str]
    phases: frozenset[str]


@dataclass(frozen=True)
class Placement:
    """A placed package.

    Attributes:
        width, height: Grid size.
        grid: Occupant label of each slot (``""`` empty, the memory name, or a compute chiplet name).
        chiplets: Compute chiplets in index order.
        mem_slots: Node id of each memory chiplet; memory indices ascend with node id.
        mem_groups: Family group of each memory (``"mamba"``, ``"attention"``, ``"shared"`` or ``"any"`` when
            the policy makes no groups).
        weight_map: Memory index holding each block's weights.
        cost: Eq. (2) objective of this placement (volume-weighted Manhattan distance), hop·weight units.
        concurrency: ``(r_M, r_A)`` of Eq. (1) for the memory split (requests; inf when a family needs none;
            nan when the policy makes no split).
        policy: ``cp``, ``rr`` or ``random``.
        seed: Seed used (``random`` only).
        mean_hops: Byte-weighted distance (hops) from a chiplet to the weights it reads, averaged over chiplets
            with their volume weights: ``Σ_c v(c) Σ_h s_c(h)·d(p(c), h) / Σ_c v(c)``, ``s_c(h)`` = share of the
            weight bytes of c's families held by memory h. Unlike :attr:`cost` it is comparable between
            placements with different weight maps (Eq. 2 grows with the number of memories a family uses).
        mem_weight_bytes: Weight bytes held by each memory, bytes.
    """

    width: int
    height: int
    grid: tuple[str, ...]
    chiplets: tuple[PlacedChiplet, ...]
    mem_slots: tuple[int, ...]
    mem_groups: tuple[str, ...]
    weight_map: tuple[int, ...]
    cost: float
    concurrency: tuple[float, float] = (math.nan, math.nan)
    policy: str = "cp"
    seed: int = 0
    mean_hops: float = math.nan
    mem_weight_bytes: tuple[float, ...] = field(default=(), compare=False)

    @property
    def chiplet_slots(self) -> tuple[int, ...]:
        """Node id of each compute chiplet."""
        return tuple(c.slot for c in self.chiplets)

    def block_slot(self, block: int) -> int:
        """Node id of the memory holding ``block``'s weights."""
        return self.mem_slots[self.weight_map[block]]

    def hops(self, a: int, b: int) -> int:
        """Manhattan distance between two slots."""
        return abs(a // self.height - b // self.height) + abs(a % self.height - b % self.height)

    def to_dict(self) -> dict:
        """JSON-ready summary (slots as node ids; units as in the attribute docs)."""
        def num(v: float):
            return v if math.isfinite(v) else None

        return {
            "policy": self.policy,
            "seed": self.seed,
            "grid": {"width": self.width, "height": self.height, "slots": list(self.grid)},
            "chiplets": [{"index": c.index, "name": c.name, "slot": c.slot} for c in self.chiplets],
            "mem_slots": list(self.mem_slots),
            "mem_groups": list(self.mem_groups),
            "weight_map": list(self.weight_map),
            "mem_weight_bytes": list(self.mem_weight_bytes),
            "eq2_cost": self.cost,
            "mean_hops": num(self.mean_hops),
            "eq1_concurrency": [num(self.concurrency[0]), num(self.concurrency[1])],
        }

    def render(self) -> str:
        """The grid as text, top row (largest y) first."""
        w = max(6, max((len(g) for g in self.grid), default=1))
        rows = []
        for y in reversed(range(self.height)):
            rows.append(" ".join((self.grid[x * self.height + y] or ".").ljust(w) for x in range(self.width)))
        return "\n".join(rows)


# ---------------------------------------------------------------------------------------------------------------
# Step 1: memories
# ---------------------------------------------------------------------------------------------------------------
def ring_order(width: int, height: int, style: str = "spread") -> list[int]:
    """Ring slots in the order memories take them.

    Args:
        width, height: Grid size.
        style: ``"spread"`` (default): edge slots before corners, nearest to the middle of their edge first
            (so few memories sit mid-edge, where most slots are near), ties by edge (left, right, bottom, top)
            then node id. ``"artifact"``: the HYDRA artifact's fixed 6×4 order (METHODS §2d; 6×4 only).
    """
    if style == "artifact":
        if (width, height) != (6, 4):
            raise PlacementError(f"the artifact's ring order exists only for a 6x4 grid, not {width}x{height}")
        return [x * height + y for x, y in _ARTIFACT_RING_6X4]
    if style != "spread":
        raise ValueError(f"unknown ring order {style!r}")
    keys = []
    for x in range(width):
        for y in range(height):
            vert = x in (0, width - 1)
            horiz = y in (0, height - 1)
            if not (vert or horiz):
                continue
            corner = vert and horiz
            if vert and not corner:
                dist, edge = abs(y - (height - 1) / 2), (0 if x == 0 else 1)
            elif horiz and not corner:
                dist, edge = abs(x - (width - 1) / 2), (2 if y == 0 else 3)
            else:
                dist, edge = 0.0, 0
            keys.append((corner, dist, edge, x * height + y))
    return [k[-1] for k in sorted(keys)]


def group_concurrency(
    problem: PlacementProblem, n_m: int, *, split: str = "capacity"
) -> tuple[float, float]:
    """``(r_M, r_A)`` of Eq. (1) when ``n_m`` memories serve Mamba and the rest attention.

    ``split="capacity"``: ``r_f = max(0, ⌊(N_f·C − W_f)/S_f⌋)`` (inf if ``S_f = 0`` and the weights fit; inf for
    a family without blocks). ``split="bandwidth"``: the artifact's ``⌊(BW/⌈L_f/N_f⌉)/D_f⌋`` with
    ``D_M = 100``, ``D_A = 200`` GB/s.
    """
    out = []
    for fam, n in (("mamba", n_m), ("attention", problem.n_mem - n_m)):
        idx = problem.family_blocks(fam)
        if not idx:
            out.append(math.inf)
            continue
        if n <= 0:
            out.append(0.0)
            continue
        if split == "bandwidth":
            per_mem = math.ceil(len(idx) / n)
            out.append(float(math.floor((problem.mem_bw_gbps / per_mem) / _BW_DEMAND_GBPS[fam])))
            continue
        if split != "capacity":
            raise ValueError(f"unknown split {split!r}")
        weights = sum(problem.blocks[i].weight_bytes for i in idx)
        # Per-request memory: recurrent/conv state + KV cache at the reserved context (either may be 0).
        per_req = sum(
            problem.blocks[i].state_bytes + problem.blocks[i].kv_bytes_per_token * problem.context_tokens for i in idx
        )
        free = n * problem.mem_capacity_bytes - weights
        if free < 0:
            out.append(0.0)
        elif per_req <= 0:
            out.append(math.inf)
        else:
            out.append(float(math.floor(free / per_req)))
    return out[0], out[1]


def family_traffic_bytes(problem: PlacementProblem, family: str) -> float:
    """Bytes one pass of a ``problem.batch``-request batch reads from the family's memories, bytes.

    Weights once per pass (shared by the batch) plus, per request, its state and its KV cache at
    ``context_tokens`` — the traffic the family's memory group must serve per pass.
    """
    idx = problem.family_blocks(family)
    w = sum(problem.blocks[i].weight_bytes for i in idx)
    per_req = sum(
        problem.blocks[i].state_bytes + problem.blocks[i].kv_bytes_per_token * problem.context_tokens for i in idx
    )
    return w + problem.batch * per_req


def split_memories(problem: PlacementProblem, *, split: str = "capacity", weights: str = "balanced") -> int:
    """Number of memories ``N_M`` for the Mamba group (HYDRA Eq. 1; see the module docstring for ties).

    Pure models give all memories to their family (``n_mem`` for Mamba-only, 0 for attention-only). A hybrid
    model needs ≥ 2 memories to split (with one, both families share it: returns 1 and the caller shares).
    """
    has_m = bool(problem.family_blocks("mamba"))
    has_a = bool(problem.family_blocks("attention"))
    m = problem.n_mem
    if not has_a:
        return m
    if not has_m:
        return 0
    if m < 2:
        return m
    best_key, best_n = None, 1
    # A block's weights and its KV/state live on one memory, so a group gets at most one memory per block of
    # its family (more would be capacity Eq. 1 counts but no block can use; the artifact clamps the same way).
    lo = max(1, m - len(problem.family_blocks("attention")))
    hi = min(m - 1, len(problem.family_blocks("mamba")))
    if lo > hi:  # more memories than blocks: the surplus holds nothing whichever way we split
        lo = hi = min(m - 1, len(problem.family_blocks("mamba")))
    if split == "traffic":
        t_m, t_a = family_traffic_bytes(problem, "mamba"), family_traffic_bytes(problem, "attention")
    for n_m in range(lo, hi + 1):
        try:
            wmap = _cp_weight_map(problem, n_m, weights)
            fits = max(_mem_bytes(problem, wmap), default=0.0) <= problem.mem_capacity_bytes
        except PlacementError:
            wmap, fits = None, False
        if split == "traffic":
            # Bandwidth balance: the most loaded group's bytes per memory per pass, lowest first (Eq. 1's
            # capacity concurrency must still admit a full batch; then it breaks ties).
            r_m, r_a = group_concurrency(problem, n_m, split="capacity")
            admits = min(r_m, r_a) >= problem.batch
            worst = max(t_m / n_m, t_a / (m - n_m))
            if weights == "traffic" and fits:
                # The busiest memory of the weight map actually produced (T_f/N_f is only its lower bound).
                worst = max(mem_pass_bytes(problem, wmap))
            key = (fits, admits, -worst, min(r_m, r_a), n_m)
        else:
            r_m, r_a = group_concurrency(problem, n_m, split=split)
            key = (fits, min(r_m, r_a), _finite_sum(r_m, r_a), n_m)
        if best_key is None or key > best_key:
            best_key, best_n = key, n_m
    return best_n


def _finite_sum(a: float, b: float) -> float:
    return (a if math.isfinite(a) else 0.0) + (b if math.isfinite(b) else 0.0)


def _groups(problem: PlacementProblem, n_m: int) -> tuple[list[str], dict[str, list[int]]]:
    """Per-memory group label and family → memory indices (memory indices ascend with node id)."""
    m = problem.n_mem
    has_m = bool(problem.family_blocks("mamba"))
    has_a = bool(problem.family_blocks("attention"))
    if has_m and has_a and m == 1:
        return ["shared"], {"mamba": [0], "attention": [0]}
    labels = ["mamba"] * n_m + ["attention"] * (m - n_m)
    return labels, {"mamba": list(range(n_m)), "attention": list(range(n_m, m))}


def _contiguous_balanced(sizes: Sequence[float], k: int) -> list[int]:
    """Split ``sizes`` (in order) into ``min(k, n)`` non-empty contiguous parts minimising the largest sum.

    Returns the part index of each item. Exact (dynamic programming); ties resolved toward earlier, larger parts.
    Memoised: split searches and design sweeps ask for the same (sizes, k) many times.
    """
    return list(_contiguous_balanced_cached(tuple(float(x) for x in sizes), int(k)))


@functools.lru_cache(maxsize=4096)
def _contiguous_balanced_cached(sizes: tuple[float, ...], k: int) -> tuple[int, ...]:
    n = len(sizes)
    if n == 0:
        return []
    k = min(k, n)
    pre = np.concatenate([[0.0], np.cumsum(sizes)])
    inf = math.inf
    # best[j][i]: min over splits of items[:i] into j parts of the largest part; cut[j][i]: start of last part.
    best = [[inf] * (n + 1) for _ in range(k + 1)]
    cut = [[0] * (n + 1) for _ in range(k + 1)]
    best[0][0] = 0.0
    for j in range(1, k + 1):
        for i in range(j, n - (k - j) + 1):
            bj, cj = inf, j - 1
            for s in range(j - 1, i):
                v = max(best[j - 1][s], pre[i] - pre[s])
                if v < bj - 1e-9 * max(1.0, v):
                    bj, cj = v, s
            best[j][i], cut[j][i] = bj, cj
    part = [0] * n
    i = n
    for j in range(k, 0, -1):
        s = cut[j][i]
        for t in range(s, i):
            part[t] = j - 1
        i = s
    return tuple(part)


def _chunked(kinds: Sequence[str], k: int) -> list[int]:
    """The artifact's chunks: per block kind, ⌊n/k⌋ consecutive blocks per memory, the first n mod k one more."""
    part = [0] * len(kinds)
    order: list[str] = []
    for kd in kinds:
        if kd not in order:
            order.append(kd)
    for kd in order:
        idx = [i for i, x in enumerate(kinds) if x == kd]
        n = len(idx)
        q, r = divmod(n, k)
        pos = 0
        for mem in range(k):
            take = q + (1 if mem < r else 0)
            for i in idx[pos : pos + take]:
                part[i] = mem
            pos += take
    return part


def block_pass_bytes(problem: PlacementProblem) -> list[float]:
    """Bytes each block reads from its memory in one pass of a ``problem.batch``-request batch, bytes.

    Every pass (prefill or decode step) streams the block's weights once (shared by the batch) plus, per
    request, its recurrent/conv state and its KV cache at ``context_tokens`` (the same terms as
    :func:`family_traffic_bytes`, per block).
    """
    return [
        b.weight_bytes + problem.batch * (b.state_bytes + b.kv_bytes_per_token * problem.context_tokens)
        for b in problem.blocks
    ]


def mem_pass_bytes(problem: PlacementProblem, wmap: Sequence[int]) -> list[float]:
    """Per memory: bytes it serves per pass under the weight map ``wmap`` (:func:`block_pass_bytes`), bytes."""
    out = [0.0] * problem.n_mem
    for v, m in zip(block_pass_bytes(problem), wmap):
        out[m] += v
    return out


def _traffic_balanced(sizes: Sequence[float], weights: Sequence[float], k: int, cap: float) -> list[int]:
    """Assign items to ``k`` memories minimising the largest per-memory traffic, weights within ``cap``.

    Longest-processing-time greedy (largest traffic first, onto the least loaded memory with room; ties by
    index): within 4/3 of the optimum makespan (Graham 1969). The contiguous exact split of the model order
    (:func:`_contiguous_balanced` on the same traffic) is kept instead when it is no worse and fits — model-order
    runs are what the paper's chunks look like, but they buy nothing physically, so never at the cost of balance.
    Memoised on its arguments (pure and deterministic): split searches and design sweeps repeat them.
    """
    return list(_traffic_balanced_cached(tuple(float(x) for x in sizes), tuple(float(x) for x in weights), int(k),
                                         float(cap)))


@functools.lru_cache(maxsize=4096)
def _traffic_balanced_cached(
    sizes: tuple[float, ...], weights: tuple[float, ...], k: int, cap: float
) -> tuple[int, ...]:
    n = len(sizes)
    if n == 0:
        return ()
    load = [0.0] * k
    room = [cap] * k
    part = [0] * n
    for i in sorted(range(n), key=lambda i: (-sizes[i], i)):
        ok = [m for m in range(k) if room[m] >= weights[i]]
        if not ok:
            raise PlacementError(
                f"weights do not fit: a block of {weights[i] / 2**30:.2f} GiB finds no memory with room"
            )
        m = min(ok, key=lambda m: (load[m], m))
        part[i] = m
        load[m] += sizes[i]
        room[m] -= weights[i]
    _improve_moves_swaps(sizes, weights, part, load, room)
    contig = _contiguous_balanced(sizes, k)
    c_load, c_w = [0.0] * k, [0.0] * k
    for i, m in enumerate(contig):
        c_load[m] += sizes[i]
        c_w[m] += weights[i]
    if max(c_load) <= max(load) * (1 + 1e-12) and max(c_w) <= cap:
        return tuple(contig)
    return tuple(part)


def _improve_moves_swaps(sizes, weights, part, load, room, max_steps: int = 1000) -> None:
    """Local search after LPT: move one item off the busiest memory, or swap it for a smaller one, while that
    lowers the pair's larger load (so the busiest memory's load never rises; in place, deterministic)."""
    k = len(load)
    for _ in range(max_steps):
        a = max(range(k), key=lambda m: (load[m], -m))
        best = None  # (new pair max, i, j or -1, b)
        items_a = [i for i in range(len(part)) if part[i] == a]
        for b in range(k):
            if b == a:
                continue
            items_b = [j for j in range(len(part)) if part[j] == b]
            for i in items_a:
                if room[b] >= weights[i]:
                    v = max(load[a] - sizes[i], load[b] + sizes[i])
                    if v < load[a] * (1 - 1e-12) and (best is None or v < best[0]):
                        best = (v, i, -1, b)
                for j in items_b:
                    d = sizes[i] - sizes[j]
                    if d <= 0 or room[b] + weights[j] < weights[i] or room[a] + weights[i] < weights[j]:
                        continue
                    v = max(load[a] - d, load[b] + d)
                    if v < load[a] * (1 - 1e-12) and (best is None or v < best[0]):
                        best = (v, i, j, b)
        if best is None:
            if not _repartition_pair(sizes, weights, part, load, room, a):
                return
            continue
        _, i, j, b = best
        for x, src, dst in ((i, a, b),) + (((j, b, a),) if j >= 0 else ()):
            part[x] = dst
            load[src] -= sizes[x]
            load[dst] += sizes[x]
            room[src] += weights[x]
            room[dst] -= weights[x]


def _repartition_pair(sizes, weights, part, load, room, a: int, max_combos: int = 20000) -> bool:
    """Exactly re-split the items of the busiest memory ``a`` and one other memory between the two (enumerating
    counts per class of equal (traffic, weight) items — model blocks come in few sizes); apply the first pair
    whose best split lowers ``a``'s load. Returns whether something changed."""
    k = len(load)
    for b in sorted((m for m in range(k) if m != a), key=lambda m: (load[m], m)):
        items = [i for i in range(len(part)) if part[i] in (a, b)]
        classes: dict[tuple[float, float], list[int]] = {}
        for i in items:
            classes.setdefault((sizes[i], weights[i]), []).append(i)
        keys = sorted(classes)
        if math.prod(len(classes[c]) + 1 for c in keys) > max_combos:
            continue
        cap_a, cap_b = room[a] + sum(weights[i] for i in items if part[i] == a), room[b] + sum(
            weights[i] for i in items if part[i] == b
        )
        total = load[a] + load[b]
        best_v, best_counts = load[a], None
        for counts in itertools.product(*(range(len(classes[c]) + 1) for c in keys)):
            la = sum(n * c[0] for n, c in zip(counts, keys))
            wa = sum(n * c[1] for n, c in zip(counts, keys))
            wb = sum((len(classes[c]) - n) * c[1] for n, c in zip(counts, keys))
            v = max(la, total - la)
            if wa <= cap_a and wb <= cap_b and v < best_v * (1 - 1e-9):
                best_v, best_counts = v, counts
        if best_counts is None:
            continue
        for n, c in zip(best_counts, keys):
            for t, i in enumerate(classes[c]):
                part[i] = a if t < n else b
        for m, cap in ((a, cap_a), (b, cap_b)):
            load[m] = sum(sizes[i] for i in items if part[i] == m)
            room[m] = cap - sum(weights[i] for i in items if part[i] == m)
        return True
    return False


def _cp_weight_map(problem: PlacementProblem, n_m: int, weights: str) -> list[int]:
    _, members = _groups(problem, n_m)
    pass_bytes = block_pass_bytes(problem) if weights == "traffic" else []
    wmap = [0] * len(problem.blocks)
    for fam in ("mamba", "attention"):
        idx = problem.family_blocks(fam)
        mems = members[fam]
        if not idx:
            continue
        if not mems:  # a family without memories (only when n_mem is 0, rejected earlier)
            raise PlacementError(f"no memory chiplet for the {fam} blocks")
        if weights == "balanced":
            part = _contiguous_balanced([problem.blocks[i].weight_bytes for i in idx], len(mems))
        elif weights == "traffic":
            part = _traffic_balanced(
                [pass_bytes[i] for i in idx],
                [problem.blocks[i].weight_bytes for i in idx],
                len(mems),
                problem.mem_capacity_bytes,
            )
        elif weights == "chunks":
            part = _chunked([problem.blocks[i].kind for i in idx], len(mems))
        else:
            raise ValueError(f"unknown weight policy {weights!r}")
        for i, p in zip(idx, part):
            wmap[i] = mems[p]
    return wmap


def _mem_bytes(problem: PlacementProblem, wmap: Sequence[int]) -> list[float]:
    out = [0.0] * problem.n_mem
    for b, m in zip(problem.blocks, wmap):
        out[m] += b.weight_bytes
    return out


# ---------------------------------------------------------------------------------------------------------------
# Step 2: compute
# ---------------------------------------------------------------------------------------------------------------
def _partners(problem: PlacementProblem, wmap: Sequence[int]) -> list[list[int]]:
    """Per compute chiplet: memory indices holding weights of the families it runs (Eq. 2's Loc)."""
    fam_mems: dict[str, set[int]] = {}
    for b, m in zip(problem.blocks, wmap):
        fam_mems.setdefault(b.family, set()).add(m)
    return [sorted(set().union(*(fam_mems.get(f, set()) for f in c.families))) for c in problem.compute]


def eq2_cost(
    problem: PlacementProblem, chip_slots: Sequence[int], mem_slots: Sequence[int], wmap: Sequence[int]
) -> float:
    """Eq. (2) summed over all compute chiplets: ``Σ_c v(c) Σ_{h ∈ Loc(c)} d(p(c), h)``."""
    h = problem.height
    total = 0.0
    for c, slot, mems in zip(problem.compute, chip_slots, _partners(problem, wmap)):
        d = sum(abs(slot // h - mem_slots[m] // h) + abs(slot % h - mem_slots[m] % h) for m in mems)
        total += c.weight * d
    return total


def mean_hops(
    problem: PlacementProblem, chip_slots: Sequence[int], mem_slots: Sequence[int], wmap: Sequence[int]
) -> float:
    """Byte-weighted mean chiplet-to-weights distance, hops (see :attr:`Placement.mean_hops`)."""
    h = problem.height
    fam_bytes: dict[str, dict[int, float]] = {}
    for b, m in zip(problem.blocks, wmap):
        d = fam_bytes.setdefault(b.family, {})
        d[m] = d.get(m, 0.0) + b.weight_bytes
    num = den = 0.0
    for c, slot in zip(problem.compute, chip_slots):
        per: dict[int, float] = {}
        for f in c.families:
            for m, v in fam_bytes.get(f, {}).items():
                per[m] = per.get(m, 0.0) + v
        tot = sum(per.values())
        if tot <= 0:
            continue
        dist = sum(v * (abs(slot // h - mem_slots[m] // h) + abs(slot % h - mem_slots[m] % h)) for m, v in per.items())
        num += c.weight * dist / tot
        den += c.weight
    return num / den if den else 0.0


def _cost_matrix(problem: PlacementProblem, chips: Sequence[int], slots: Sequence[int], mem_slots, partners):
    h = problem.height
    sx = np.array([s // h for s in slots])
    sy = np.array([s % h for s in slots])
    out = np.zeros((len(chips), len(slots)))
    for r, c in enumerate(chips):
        ms = [mem_slots[m] for m in partners[c]]
        if ms:
            mx = np.array([m // h for m in ms])[:, None]
            my = np.array([m % h for m in ms])[:, None]
            out[r] = problem.compute[c].weight * (np.abs(sx - mx) + np.abs(sy - my)).sum(axis=0)
    return out


def _group_key(c: ComputeSpec) -> str:
    if c.families == frozenset({"mamba"}):
        return "mamba"
    if c.families == frozenset({"attention"}):
        return "attention"
    return "both"


def _cp_compute(problem: PlacementProblem, free: list[int], mem_slots, wmap, order: str) -> list[int]:
    partners = _partners(problem, wmap)
    n = len(problem.compute)
    chip_slot = [-1] * n
    if order == "joint":
        groups = [list(range(n))]
    elif order == "sequential":
        by: dict[str, list[int]] = {}
        for i, c in enumerate(problem.compute):
            by.setdefault(_group_key(c), []).append(i)
        rank = {"mamba": 0, "attention": 1, "both": 2}
        # Larger group first (HYDRA Sec. IV-A); ties: Mamba, attention, dual-family.
        groups = [by[k] for k in sorted(by, key=lambda k: (-len(by[k]), rank[k]))]
    else:
        raise ValueError(f"unknown cp_order {order!r}")
    from scipy.optimize import (
        linear_sum_assignment,  # lazy: keeps `import hydra_opt.system` light
    )

    avail = sorted(free)
    for chips in groups:
        cost = _cost_matrix(problem, chips, avail, mem_slots, partners)
        rows, cols = linear_sum_assignment(cost)
        taken = set()
        for r, col in zip(rows, cols):
            chip_slot[chips[r]] = avail[col]
            taken.add(avail[col])
        avail = [s for s in avail if s not in taken]
    return chip_slot


def _rr_compute(problem: PlacementProblem, free: list[int], type_order: Sequence[str] = ()) -> list[int]:
    types: list[str] = []
    by: dict[str, list[int]] = {}
    for i, c in enumerate(problem.compute):
        if c.name not in by:
            types.append(c.name)
            by[c.name] = []
        by[c.name].append(i)
    # Types named in ``type_order`` first, in that order; the others after, in order of first appearance.
    rank = {t: i for i, t in enumerate(type_order)}
    first = {t: i for i, t in enumerate(types)}
    types.sort(key=lambda t: (rank.get(t, len(rank)), first[t]))
    chip_slot = [-1] * len(problem.compute)
    cursor = {t: 0 for t in types}
    slots = iter(sorted(free))
    placed, t = 0, 0
    while placed < len(problem.compute):
        name = types[t % len(types)]
        t += 1
        if cursor[name] < len(by[name]):
            chip_slot[by[name][cursor[name]]] = next(slots)
            cursor[name] += 1
            placed += 1
    return chip_slot


# ---------------------------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------------------------
def place_problem(
    problem: PlacementProblem,
    policy: str = "cp",
    *,
    seed: int = 0,
    split: str = "capacity",
    ring: str = "spread",
    cp_order: str = "joint",
    weights: str = "balanced",
    rr_types: Sequence[str] = (),
) -> Placement:
    """Place a :class:`PlacementProblem`.

    Args:
        problem: What to place.
        policy: ``cp``, ``rr`` or ``random``.
        seed: Seed of the ``random`` policy.
        split: Memory split of ``cp``: ``capacity`` (Eq. 1, default), ``bandwidth`` (artifact) or ``traffic``
            (balance the groups' bytes per memory per pass, subject to Eq. 1 admitting a full batch).
        ring: Ring order of memory slots: ``spread`` (default) or ``artifact`` (6×4 only).
        cp_order: ``joint`` (exact minimum of the total Eq. 2; default) or ``sequential`` (larger group first,
            exact per group; the paper's procedure).
        weights: Weight map of ``cp``: ``balanced`` (contiguous, minimum largest memory in weight bytes;
            default here), ``traffic`` (minimum busiest memory in bytes per pass, weights + a batch's state/KV;
            default of ``place(preset="clean")``) or ``chunks`` (the artifact's per-block-kind equal counts).
        rr_types: Order in which ``rr`` deals chiplet types (default: the order of ``problem.compute``).

    Raises:
        PlacementError: Too many chiplets for the grid, memories for the ring, or weights that do not fit.
    """
    if policy not in PLACEMENT_POLICIES:
        raise ValueError(f"placement policy must be one of {PLACEMENT_POLICIES}, got {policy!r}")
    w, h = problem.width, problem.height
    n_comp = len(problem.compute)
    if problem.n_mem < 1 and problem.blocks:
        raise PlacementError("no memory chiplet to hold the weights")
    order = ring_order(w, h, ring)
    if problem.n_mem > len(order):
        raise PlacementError(f"{problem.n_mem} memory chiplets do not fit the {len(order)} ring slots of {w}x{h}")
    if n_comp + problem.n_mem > w * h:
        raise PlacementError(f"{n_comp} compute + {problem.n_mem} memory chiplets exceed the {w * h} slots of {w}x{h}")
    mem_slots = tuple(sorted(order[: problem.n_mem]))
    free = [s for s in range(w * h) if s not in set(mem_slots)]
    concurrency = (math.nan, math.nan)
    if policy == "cp":
        n_m = split_memories(problem, split=split, weights=weights)
        labels, _ = _groups(problem, n_m)
        eq1 = "capacity" if split == "traffic" else split
        concurrency = group_concurrency(problem, n_m, split=eq1) if problem.n_mem >= 2 else concurrency
        wmap = _cp_weight_map(problem, n_m, weights)
        chip_slot = _cp_compute(problem, free, mem_slots, wmap, cp_order)
    elif policy == "rr":
        labels = ["any"] * problem.n_mem
        wmap = [i % problem.n_mem for i in range(len(problem.blocks))]
        chip_slot = _rr_compute(problem, free, rr_types)
    else:
        rng = np.random.default_rng(seed)
        labels = ["any"] * problem.n_mem
        perm = rng.permutation(len(free))
        chip_slot = [free[int(perm[i])] for i in range(n_comp)]
        room = [problem.mem_capacity_bytes] * problem.n_mem
        wmap = []
        for b in problem.blocks:
            for m in rng.permutation(problem.n_mem):
                if room[int(m)] >= b.weight_bytes:
                    break
            else:
                m = int(np.argmax(room))
            room[int(m)] -= b.weight_bytes
            wmap.append(int(m))
    used = _mem_bytes(problem, wmap)
    over = [i for i, u in enumerate(used) if u > problem.mem_capacity_bytes]
    if over:
        raise PlacementError(
            f"weights do not fit: memory {over[0]} would hold {used[over[0]] / 2**30:.2f} GiB "
            f"> capacity {problem.mem_capacity_bytes / 2**30:.2f} GiB ({policy} placement)"
        )
    grid = [""] * (w * h)
    for s in mem_slots:
        grid[s] = problem.mem_name
    chips = []
    for i, (c, s) in enumerate(zip(problem.compute, chip_slot)):
        grid[s] = c.name
        chips.append(PlacedChiplet(i, c.name, s, c.families, c.phases))
    return Placement(
        width=w,
        height=h,
        grid=tuple(grid),
        chiplets=tuple(chips),
        mem_slots=mem_slots,
        mem_groups=tuple(labels),
        weight_map=tuple(int(m) for m in wmap),
        cost=eq2_cost(problem, chip_slot, mem_slots, wmap),
        mean_hops=mean_hops(problem, chip_slot, mem_slots, wmap),
        concurrency=(float(concurrency[0]), float(concurrency[1])),
        policy=policy,
        seed=int(seed),
        mem_weight_bytes=tuple(used),
    )


def placement_problem(design, model, library=None, *, context_tokens: int | None = None) -> PlacementProblem:
    """Build a :class:`PlacementProblem` from a ``DesignPoint`` and a ``Model``.

    Args:
        design: ``hydra_opt.system.design.DesignPoint``.
        model: ``hydra_opt.workload.models.Model``.
        library: ``hydra_opt.hardware.chiplets.ChipletLibrary`` (default library when None).
        context_tokens: KV context reserved per request in Eq. (1) (default: the model's ``max_position``).
    """
    from hydra_opt.system.materialise import materialise

    hw = materialise(design, library)
    compute: list[ComputeSpec] = []
    for (name, count), ct in zip(hw.counts, hw.chiplets):
        compute += [ComputeSpec(name, frozenset(ct.families), frozenset(ct.phases))] * count
    mem = hw.memory
    prec = design.precision
    wb = model.block_weight_bytes(prec)
    kv = model.block_kv_bytes_per_token(prec)
    st = model.block_state_bytes(prec)
    blocks = tuple(
        BlockSpec(b.family, float(wb[i]), float(kv[i]), float(st[i]), "+".join(b.kinds))
        for i, b in enumerate(model.blocks)
    )
    return PlacementProblem(
        width=design.grid_w,
        height=design.grid_h,
        compute=tuple(compute),
        n_mem=design.n_mem,
        mem_capacity_bytes=float(mem.capacity_bytes),
        blocks=blocks,
        mem_bw_gbps=float(mem.bw_gbps),
        context_tokens=int(context_tokens if context_tokens is not None else model.max_position),
        mem_name=mem.name,
        batch=int(design.max_batch),
    )


def place(
    design, model, *, seed: int = 0, library=None, preset: str = "clean", context_tokens: int | None = None, **kwargs
) -> Placement:
    """Place a design for a model with the design's policy (``design.placement``).

    Args:
        design: ``DesignPoint``.
        model: ``Model``.
        seed: Seed of the ``random`` policy.
        library: Chiplet library (default library when None).
        preset: ``clean`` (``split="traffic"``: Eq. 1 must admit a full batch, then the least busiest memory;
            ``weights="traffic"``; spread ring order; joint assignment) or ``paper`` (the artifact: bandwidth
            split, its 6×4 ring order, per-kind equal chunks, groups placed larger first, round robin dealing
            marca_p, marca_d, tscs_p, tscs_d).
        context_tokens: Per-request KV context of Eq. (1) and of the per-pass traffic (default: the model's
            ``max_position``, the worst case; the simulator passes the workload's mean prompt + output).
        **kwargs: Overrides of :func:`place_problem` options (``split``, ``ring``, ``cp_order``, ``weights``).
    """
    problem = placement_problem(design, model, library, context_tokens=context_tokens)
    opts = _preset_options(design, preset)
    opts.update(kwargs)
    return place_problem(problem, design.placement, seed=seed, **opts)


def _preset_options(design, preset: str) -> dict:
    """:func:`place_problem` options of a placement preset (see :func:`place`)."""
    if preset == "paper":
        return {
            "split": "bandwidth",
            "ring": "artifact" if (design.grid_w, design.grid_h) == (6, 4) else "spread",
            "weights": "chunks",
            "cp_order": "sequential",
            "rr_types": _ARTIFACT_RR_TYPES,
        }
    if preset == "clean":
        # Physically sound defaults: Eq. 1 as a constraint (a full batch must fit), then the split and the
        # weight map that balance bytes per memory per pass (every pass streams all weights through the HBM
        # interfaces; Eq. 2 is about distance, Eq. 1 about concurrency — neither sees interface load).
        return {"split": "traffic", "weights": "traffic"}
    raise ValueError(f"unknown placement preset {preset!r}")


@dataclass(frozen=True)
class MemorySplit:
    """The memory side of a placement: groups and weight map, without placing compute chiplets.

    Attributes:
        mem_groups: Family group of each memory (as :attr:`Placement.mem_groups`).
        weight_map: Memory index holding each block's weights (as :attr:`Placement.weight_map`).
        mem_pass_bytes: Bytes each memory serves per pass of a full batch at the problem's context
            (:func:`mem_pass_bytes`), bytes.
    """

    mem_groups: tuple[str, ...]
    weight_map: tuple[int, ...]
    mem_pass_bytes: tuple[float, ...]

    def family_memories(self, family: str) -> int:
        """Number of memories serving ``family`` (its group, plus ``shared``/``any`` memories)."""
        return sum(1 for g in self.mem_groups if g in (family, "shared", "any"))


def memory_split(
    design, model, *, seed: int = 0, library=None, preset: str = "clean", context_tokens: int | None = None, **kwargs
) -> MemorySplit:
    """The memory groups and weight map :func:`place` would produce, without the compute step (Eq. 2).

    Same arguments and result as ``place(...)`` restricted to :attr:`Placement.mem_groups` and
    :attr:`Placement.weight_map` (the weight map does not depend on where compute chiplets go); for cheap
    callers such as the analytical estimator. ``kwargs`` may override ``split`` and ``weights``.
    """
    problem = placement_problem(design, model, library, context_tokens=context_tokens)
    opts = _preset_options(design, preset)
    opts.update(kwargs)
    m = problem.n_mem
    policy = design.placement
    if policy not in PLACEMENT_POLICIES:
        raise ValueError(f"placement policy must be one of {PLACEMENT_POLICIES}, got {policy!r}")
    if m < 1:
        raise PlacementError("no memory chiplet to hold the weights")
    if policy == "cp":
        n_m = split_memories(problem, split=opts["split"], weights=opts["weights"])
        labels, _ = _groups(problem, n_m)
        wmap = _cp_weight_map(problem, n_m, opts["weights"])
    elif policy == "rr":
        labels = ["any"] * m
        wmap = [i % m for i in range(len(problem.blocks))]
    else:
        # Replays place_problem's random draws (compute permutation first, then one draw per block).
        order = ring_order(problem.width, problem.height, opts.get("ring", "spread"))
        n_free = problem.width * problem.height - len(order[:m])
        rng = np.random.default_rng(seed)
        labels = ["any"] * m
        rng.permutation(n_free)
        room = [problem.mem_capacity_bytes] * m
        wmap = []
        for b in problem.blocks:
            for k in rng.permutation(m):
                if room[int(k)] >= b.weight_bytes:
                    break
            else:
                k = int(np.argmax(room))
            room[int(k)] -= b.weight_bytes
            wmap.append(int(k))
    return MemorySplit(tuple(labels), tuple(int(x) for x in wmap), tuple(mem_pass_bytes(problem, wmap)))
