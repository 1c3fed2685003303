"""The estimator's per-workload and per-design inputs (HYDRA §V); the solver that uses them is ``single.py``.

Pipeline of one estimate (docs/estimator.md has the derivations):

1. **Prepare** (:func:`prepare`, once per model × workload × precision, cached): block cost coefficients, per-block
   weight/KV/state bytes, length moments (:class:`~.capacities.LengthStats`), arrival rate and measurement window.
2. **Design inputs** (here, per chiplet type, cached): :func:`type_table` prices the block times of one *cycle* of a
   circulating batch through ``opcost`` — for static batching the batch's whole life (one prefill pass over B
   prompts, then decode passes whose membership shrinks as requests finish: the expected number of passes with
   ``a`` members comes from order statistics of the output-length distribution); for continuous batching one pass
   with the steady-state mix of new (prefill) and running (decode) members (:func:`cycle_plan`). Also the
   memory-capacity concurrency, family memory groups and the HBM/NoI bandwidth cap.
3. **Solve** (``single.estimate_one``, the one solver of the single-design and the vectorised paths): Ω by LPT
   (static scheduler) or type-balanced loads (dynamic schedulers), MVA of the closed pipeline with ``m`` batches in
   flight → cycles/s, capped by HBM/NoI bandwidth → capacity (tokens/s, requests/s); the occupancy CTMC (ρ < 1) or
   the fluid backlog (ρ ≥ 1) → throughput (Eq. 8) and TTFT.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from hydra_opt.evaluate.estimator import capacities as cap
from hydra_opt.evaluate.estimator import fluid, markov
from hydra_opt.evaluate.estimator.result import EstimatorOptions
from hydra_opt.evaluate.scenario import Scenario

__all__ = ["Prepared", "prepare", "TypeTable", "type_table", "cycle_plan", "family_memory_groups", "placed_package",
           "prefill_omega", "memory_concurrency", "hbm_port_cap_gbps", "order_stats", "resolve"]

#: Span a burst of simultaneous arrivals is read as, s (see ``prepare``).
_BURST_S = 1e-6



@dataclass(frozen=True)
class Prepared:
    """Per (model, workload, precision) data shared by every design.

    Attributes:
        model_name, workload_name: Names.
        families: Family of each block.
        coeffs: ``(n_blocks, 8, 6)`` cost coefficients.
        weight_bytes, kv_bytes_per_token, state_bytes: Per block, bytes.
        stats: Length moments.
        arrival_per_s: Mean arrival rate λ, requests/s.
        window_s: Measurement window ``(start, end)``, s.
        order_stats: ``B -> E[a-th largest decode-step count of B requests]`` for a = 1..B.
        ctx_cap_tok: Largest context a block attends to, tokens (None: unbounded).
        context_mean_tok: Mean prompt + output tokens of the replayed requests (before the horizon cut), tokens:
            the context the simulator's clean placement sizes KV and traffic for.
        offered_tokens: Output tokens of every replayed request that arrives before the horizon: no run can emit
            more, whatever its window (the fluid's arrival stream is open-ended at rate λ, so a window reaching past
            the last arrival — the paper preset's whole run of 5,000 requests over 100 s — is capped by it).
        trace: The replayed requests (after the horizon cut) as ``(arrival_s, decode_steps, prompt_tok)`` arrays:
            the run the continuous/chunked fluid follows request by request (None: no requests).
        model: The model object (placement needs its blocks; None: load it by name).
        scenario: The run described (TTFT rule, token budget, pipeline depth, presets, lending).
        memo: What the estimator derives from this preparation and caches (type tables, columns, plans): it lives
            and dies with the preparation, so no cache keyed by object ids can outlive it.
    """

    model_name: str
    workload_name: str
    families: tuple[str, ...]
    coeffs: np.ndarray
    weight_bytes: np.ndarray
    kv_bytes_per_token: np.ndarray
    state_bytes: np.ndarray
    stats: cap.LengthStats
    arrival_per_s: float
    window_s: tuple[float, float]
    order_stats: dict
    precision: str
    horizon_s: float
    first_arrival_s: float
    grid_k: np.ndarray
    grid_emin: np.ndarray
    grid_cdf: np.ndarray
    context_mean_tok: float | None = None
    offered_tokens: float = float("inf")
    trace: tuple | None = field(default=None, compare=False, repr=False)
    model: object = field(default=None, compare=False, repr=False)
    scenario: Scenario = field(default_factory=Scenario, compare=False)
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def n_blocks(self) -> int:
        return len(self.families)


try:  # the ufunc scipy.stats.binom.sf evaluates, without importing scipy.stats (see _binom_sf)
    from scipy.special._ufuncs import _binom_sf as _BINOM_SF
except ImportError:  # pragma: no cover - another scipy layout: the public route below
    _BINOM_SF = None


def _binom_sf(k: np.ndarray, n: int, p: np.ndarray) -> np.ndarray:
    """``scipy.stats.binom.sf(k, n, p)`` for integer ``0 ≤ k < n`` and ``p`` in [0, 1]: the same values bit for bit
    (checked over 675k points), without importing ``scipy.stats`` — that import was ≈ 90 % of a cold first
    estimate (2–5 s on the loaded test machine, against 0.3 s for ``scipy.special``, now imported with this
    module)."""
    if _BINOM_SF is None:  # pragma: no cover
        from scipy.stats import binom

        return binom.sf(k, n, p)
    return _BINOM_SF(np.floor(np.asarray(k, dtype=np.float64)), n, p)


def _order_stats(steps: np.ndarray, b: int) -> np.ndarray:
    """E[a-th largest of ``b`` i.i.d. draws from the empirical distribution of ``steps``], a = 1..b.

    ``E[L_a] = Σ_{k≥1} P(#{S_i ≥ k} ≥ a)``, summed exactly over the empirical support.
    """
    s = np.sort(np.asarray(steps, dtype=np.float64))
    vals = np.unique(s)
    vals = vals[vals > 0]
    if vals.size == 0:
        return np.zeros(b)
    # p_k is constant on (v_{j-1}, v_j]: P(S ≥ k) = P(S ≥ v_j) there.
    widths = np.diff(np.concatenate([[0.0], vals]))
    p_ge = 1.0 - np.searchsorted(s, vals, side="left") / s.size
    a = np.arange(1, b + 1)
    tail = _binom_sf(a[:, None] - 1, b, p_ge[None, :])  # P(Bin ≥ a)
    return (tail * widths[None, :]).sum(axis=1)


def prepare(model, workload, *, scenario: Scenario | None = None, options: EstimatorOptions | None = None,
            precision: str | None = None) -> Prepared:
    """Everything about (model, workload, scenario) that does not depend on the design (cached by names and options).

    Args:
        precision: The design's precision, used when the scenario sets none (None there too: ``fp16``).
    """
    opts = options or EstimatorOptions()
    scn = scenario or Scenario()
    prec = scn.precision or precision or "fp16"
    horizon = scn.horizon_s if scn.horizon_s is not None else getattr(workload, "horizon_s", None)
    return _prepare_cached(model, workload, prec, opts.n_samples, opts.seed, opts.window_s, horizon, scn)


#: ``key -> (model ref, workload ref, Prepared)``; the key holds ids, the refs tell a live object from a new one
#: that reuses a dead one's id (a request stream built in a loop: the estimate of one stream came back for another).
#: An entry leaves when its model or workload is freed (a capacity search prepares a stream per rate: kept, they
#: grew a process by ~0.5 MB per design).
_PREP_CACHE: dict = {}


def _ref(obj, key):
    """A weak reference to ``obj`` that drops ``key``'s entry when ``obj`` is freed, or a strong one where ``obj``
    takes no weak references."""
    try:
        return weakref.ref(obj, lambda _r, k=key: _PREP_CACHE.pop(k, None))
    except TypeError:
        return lambda: obj


def _prepare_cached(model, workload, prec, n_samples, seed, window, horizon, scn: Scenario) -> Prepared:
    warmup, n_requests = scn.warmup_frac, scn.n_requests
    key = (id(model), getattr(model, "name", None), id(workload), getattr(workload, "name", None), prec, n_samples,
           seed, window, horizon, scn)
    hit = _PREP_CACHE.get(key)
    if hit is not None and hit[0]() is model and hit[1]() is workload:
        return hit[2]
    from hydra_opt.workload.precision import get_precision

    p = get_precision(prec)
    blocks = list(model.blocks)
    coeffs = np.asarray(model.block_coeffs(p), dtype=np.float64)
    # The same request stream the simulator replays (``simulate(seed=0)`` by default), cut like it is.
    reqs = workload.requests(0 if seed is None else seed) if hasattr(workload, "requests") else workload
    arr = np.asarray(reqs.arrival_s, dtype=np.float64)
    if arr.size > 1 and bool(np.any(np.diff(arr) < 0)):
        raise ValueError("arrival_s must be sorted")  # as the simulator says (simulator.run.run_system)
    pt = np.asarray(reqs.prompt_tokens, dtype=np.float64)
    ot = np.maximum(np.asarray(reqs.output_tokens, dtype=np.float64), 1.0)
    if n_requests is not None:
        arr, pt, ot = arr[:n_requests], pt[:n_requests], ot[:n_requests]
    if scn.arrival_interval_s is not None:  # the simulator's fixed-interval replay (resolve_requests)
        arr = np.arange(arr.size, dtype=np.float64) * scn.arrival_interval_s
    # The simulator's placement context: mean of max(prompt, 1) + max(output, 1) over the replayed requests.
    ctx_mean = float(np.mean(np.maximum(pt, 1.0) + ot)) if pt.size else None
    if horizon:
        keep = arr <= float(horizon)
        if keep.sum() >= 2:
            arr, pt, ot = arr[keep], pt[keep], ot[keep]
    if pt.size > n_samples:
        idx = np.linspace(0, pt.size - 1, n_samples).astype(np.int64)
        pt_s, ot_s = pt[idx], ot[idx]
    else:
        pt_s, ot_s = pt, ot
    max_pos = getattr(model, "max_position", None)
    stats = cap.length_stats(pt_s, ot_s, ctx_cap_tok=float(max_pos) if max_pos else None)
    span = float(arr[-1] - arr[0]) if arr.size > 1 else 1.0
    # A burst (every request at one instant) is read as arriving over _BURST_S: its rate stays finite and a queue
    # of n that starts empty waits (n − 1)/2 services on average, as the diffusion over that span gives.
    lam = (arr.size - 1) / max(span, _BURST_S)
    h = float(horizon) if horizon else float("inf")
    a0 = float(arr[0]) if arr.size else 0.0
    arrived = arr[arr <= h]
    a1 = float(arrived[-1]) if arrived.size else a0
    if arrived.size > 1 and a1 - a0 < _BURST_S:
        a1 = a0 + _BURST_S
    if window is None and scn.window == "whole_run":
        # The simulator's whole-run throughput: every token over the served time (docs/metrics.md).
        window = (0.0, h if math.isfinite(h) else a1)
    elif window is None:
        # The simulator's measurement window (docs/metrics.md).
        window = (a0 + warmup * (a1 - a0), min(a1, h))
    grid_k, grid_emin = fluid.emin_curve(stats.steps)
    prep = Prepared(
        model_name=str(model.name),
        workload_name=str(getattr(workload, "name", "workload")),
        families=tuple(str(b.family) for b in blocks),
        coeffs=coeffs,
        weight_bytes=np.asarray(model.block_weight_bytes(p), dtype=np.float64),
        kv_bytes_per_token=np.asarray(model.block_kv_bytes_per_token(p), dtype=np.float64),
        state_bytes=np.asarray(model.block_state_bytes(p), dtype=np.float64),
        stats=stats,
        arrival_per_s=float(lam),
        window_s=(float(window[0]), float(window[1])),
        order_stats={},
        precision=prec,
        horizon_s=h,
        first_arrival_s=a0,
        grid_k=grid_k,
        grid_emin=grid_emin,
        grid_cdf=fluid.cdf_on(stats.steps, grid_k),
        context_mean_tok=ctx_mean,
        offered_tokens=float(ot.sum()) if ot.size else float("inf"),
        trace=(arr, ot - 1.0, np.maximum(pt, 1.0)) if arr.size else None,
        model=model,
        scenario=scn,
    )
    _PREP_CACHE[key] = (_ref(model, key), _ref(workload, key), prep)
    return prep


def order_stats(prep: Prepared, b: int) -> np.ndarray:
    """Cached :func:`_order_stats` of the prepared workload for batch size ``b``."""
    out = prep.order_stats.get(b)
    if out is None:
        out = _order_stats(prep.stats.steps, b)
        prep.order_stats[b] = out
    return out


# ---------------------------------------------------------------------------------------------------------------
# Per chiplet type: block time tables (the only place opcost is called).


@dataclass(frozen=True)
class TypeTable:
    """Per-block times of one chiplet type for one design's batching (arrays over blocks).

    Attributes:
        pre_s: Prefill part of one cycle, s per block.
        dec_s: Decode part of one cycle, s per block.
        pre_ref_s, dec_ref_s: Per-pass times at a full batch (the reference Ω is built on).
        dec1_s: Per-pass decode time with one member.
        mem_bytes: Memory bytes per block per cycle.
        mem1_bytes, memb_bytes: Memory bytes per block of a decode pass with one / ``B`` members.
    """

    pre_s: np.ndarray
    dec_s: np.ndarray
    pre_ref_s: np.ndarray
    dec_ref_s: np.ndarray
    dec1_s: np.ndarray
    pre1_s: np.ndarray
    mem_bytes: np.ndarray
    mem1_bytes: np.ndarray
    memb_bytes: np.ndarray


def _times(prep: Prepared, chiplet, agg: np.ndarray, bw_gbps: float) -> tuple[np.ndarray, np.ndarray]:
    costs = cap.block_costs(prep.coeffs, agg)  # (..., nb, F)
    chip = cap.chiplet_arrays([chiplet])
    lat, mem = cap.block_times(costs, chip, np.array([bw_gbps]))
    return lat[..., 0], mem


def cycle_plan(prep: Prepared, batching: str, b: int, token_budget: float) -> dict:
    """Aggregates of one cycle of a circulating batch.

    Returns a dict with ``pre_agg`` (6,), ``dec_aggs`` (k, 6) with weights ``dec_w`` (k,) (passes of each kind
    per cycle), ``tokens`` (output tokens per cycle), ``admits`` (requests started per cycle), ``passes``.
    """
    st = prep.stats
    if batching == "static":
        ls = order_stats(prep, b)  # E[a-th largest steps]
        n_exact = ls - np.concatenate([ls[1:], [0.0]])  # passes with exactly a members, a=1..b
        a = np.arange(1, b + 1, dtype=np.float64)
        return dict(
            pre_agg=cap.prefill_agg(st, float(b)),
            dec_aggs=cap.decode_agg(st, a),
            dec_w=n_exact,
            tokens=b * st.output_mean_tok,
            admits=float(b),
            passes=1.0 + float(ls[0]),
        )
    if batching == "chunked":
        return _chunked_plan(st, b, token_budget)
    # Continuous: a full batch of b members; in steady state a request spends 1 pass in prefill and S̄ in decode,
    # so a pass carries b/(1+S̄) new prompts, capped by the token budget (Σq ≤ budget).
    k_p = b / (1.0 + st.decode_steps_mean)
    k_p = min(k_p, max(token_budget / max(st.prompt_mean_tok, 1.0), 1.0 / max(1.0, b)))
    k_p = min(k_p, float(b))
    k_d = max(float(b) - k_p, 0.0)
    return dict(
        pre_agg=cap.prefill_agg(st, k_p),
        dec_aggs=cap.decode_agg(st, np.array([k_d])),
        dec_w=np.array([1.0]),
        tokens=float(b) * 1.0 if k_d > 0 else k_p,
        admits=k_p,
        passes=1.0,
    )


def _chunked_plan(st, b: int, token_budget: float) -> dict:
    """Chunked prefill: one pass carries the batch's k_d decodes and k_p prompts' worth of prefill chunks, with
    ``k_d + k_p·P̄ ≤ budget`` (the decodes go first); a request spends n̄ (mean chunks) passes prefilling and S̄
    decoding, so k_p = b/(n̄ + S̄) at a full batch; each pass gives the prefill ``budget − k_d`` tokens."""
    n_ch = 1.0
    k_p = b / (1.0 + st.decode_steps_mean)
    for _ in range(4):  # the chunk size depends on k_d, the chunk count on the chunk size: a short fixed point
        k_d = max(float(b) - k_p * n_ch, 0.0)
        _, n_ch = cap.chunked_prefill_agg(st, 1.0, max(token_budget - k_d, 1.0))
        k_p = min(b / (n_ch + st.decode_steps_mean),
                  max((token_budget - k_d) / max(st.prompt_mean_tok, 1.0), 1.0 / max(1.0, b)), float(b))
    k_d = max(float(b) - k_p * n_ch, 0.0)
    pre_agg, n_ch = cap.chunked_prefill_agg(st, k_p, max(token_budget - k_d, 1.0))
    return dict(
        pre_agg=pre_agg,
        dec_aggs=cap.decode_agg(st, np.array([k_d])),
        dec_w=np.array([1.0]),
        tokens=k_d + k_p if k_d > 0 else k_p,
        admits=k_p,
        passes=1.0,
        chunk_passes=n_ch,
    )


def type_table(prep: Prepared, chiplet, batching: str, b: int, bw_gbps: float, token_budget: float) -> TypeTable:
    """Block times of one chiplet type (cached in ``prep.memo`` per chiplet, batching, batch, bandwidth)."""
    key = ("table", chiplet.name, chiplet.d2d_bw_gbps, batching, b, bw_gbps, token_budget)
    hit = prep.memo.get(key)
    if hit is not None:
        return hit
    plan = cycle_plan(prep, batching, b, token_budget)
    pre, mem_p = _times(prep, chiplet, plan["pre_agg"], bw_gbps)
    dec_all, mem_d = _times(prep, chiplet, plan["dec_aggs"], bw_gbps)  # (k, nb)
    w = plan["dec_w"][:, None]
    dec = (w * dec_all).sum(axis=0)
    mem = mem_p + (w * mem_d).sum(axis=0)
    pre_ref, _ = _times(prep, chiplet, cap.prefill_agg(prep.stats, float(b)), bw_gbps)
    dec_ref, memb = _times(prep, chiplet, cap.decode_agg(prep.stats, float(b)), bw_gbps)
    dec1, mem1 = _times(prep, chiplet, cap.decode_agg(prep.stats, 1.0), bw_gbps)
    pre1, _ = _times(prep, chiplet, cap.prefill_agg(prep.stats, 1.0), bw_gbps)
    t = TypeTable(pre, dec, pre_ref, dec_ref, dec1, pre1, mem, mem1, memb)
    prep.memo[key] = t
    return t


# ---------------------------------------------------------------------------------------------------------------
# Design-level inputs


def _library():
    from hydra_opt.hardware.chiplets import ChipletLibrary

    return ChipletLibrary.default()


@lru_cache(maxsize=64)
def _memory_link_reach(n_mem: int, grid_w: int, grid_h: int) -> tuple[float, ...]:
    """Effective outgoing links of each of the first ``n_mem`` ring memories under XY routing.

    A flow from memory ``(x0, y0)`` leaves along x first (+x or −x) when the destination is in another column, and
    along y only for destinations in its own column. With destinations spread over the free slots, the busiest
    outgoing link carries fraction ``φ`` of the memory's traffic, so the memory can push at most ``link_bw / φ``:
    the effective link count is ``1/φ`` (≈ 1.1 for a left/right-edge memory, ≈ 2 mid top/bottom edge).
    """
    from hydra_opt.system.placement import ring_order

    order = ring_order(grid_w, grid_h)[:n_mem]
    mem = set(order)
    dests = [(n // grid_h, n % grid_h) for n in range(grid_w * grid_h) if n not in mem]
    out = []
    for node in order:
        x0, y0 = node // grid_h, node % grid_h
        use: dict[tuple[int, int], int] = {}
        for x, y in dests:
            if x != x0:
                key = (1 if x > x0 else -1, 0)
            elif y != y0:
                key = (0, 1 if y > y0 else -1)
            else:
                continue
            use[key] = use.get(key, 0) + 1
        tot = sum(use.values())
        out.append(tot / max(use.values()) if use else 1.0)
    return tuple(out)


def hbm_port_cap_gbps(n_mem, mem_bw_gbps, d2d_bw_gbps, grid_w: int = 6, grid_h: int = 4):
    """Deliverable memory bandwidth of ``n_mem`` ring-placed memories, GB/s (numpy-broadcasting over designs).

    Each memory serves at most its interface bandwidth and what its busiest outgoing mesh link allows under XY
    routing (:func:`_memory_link_reach`).
    """
    n_arr = np.atleast_1d(np.asarray(n_mem, dtype=np.int64))
    bw = np.broadcast_to(np.asarray(mem_bw_gbps, dtype=np.float64), n_arr.shape)
    d2d = np.broadcast_to(np.asarray(d2d_bw_gbps, dtype=np.float64), n_arr.shape)
    out = np.empty(n_arr.shape)
    for i, (n, b, l) in enumerate(zip(n_arr, bw, d2d)):
        reach = np.array(_memory_link_reach(int(n), int(grid_w), int(grid_h)))
        out[i] = np.minimum(b, reach * l).sum()
    return out if np.ndim(n_mem) else float(out[0])


def _lending_gain(prep: Prepared, chips: list, counts: list, tables: list, opts: EstimatorOptions) -> float:
    """Elastic cross-phase lending: the allocation CTMC's expected cycle-rate gain (``markov.lending_gain``)."""
    fams = np.array(prep.families)
    fam_rows = []
    for f in sorted(set(prep.families)):
        rows = fams == f
        p_idx = [i for i, c in enumerate(chips) if c.can_run(f, "prefill")]
        d_idx = [i for i, c in enumerate(chips) if c.can_run(f, "decode")]
        if not p_idx or not d_idx:
            return 1.0
        n_p = sum(counts[i][1] for i in p_idx)
        n_d = sum(counts[i][1] for i in d_idx)
        tp, td = tables[p_idx[0]], tables[d_idx[0]]
        fam_rows.append((n_p, n_d, float(tp.pre_s[rows].sum()), float(td.pre_s[rows].sum()),
                         float(td.dec_s[rows].sum()), float(tp.dec_s[rows].sum())))
    gain, _ = markov.lending_gain(fam_rows, opts.lend_efficiency, max(prep.arrival_per_s, 1e-3))
    return max(gain, 1.0)


_WMAP_CACHE: dict = {}
_GROUP_CACHE: dict = {}


def _wmap_context(prep: Prepared, preset: str) -> int | None:
    """The context the placement prices the weight map at: the workload's mean (``clean``), else the model's."""
    return round(prep.context_mean_tok) if preset != "paper" and prep.context_mean_tok else None


def _wmap_key(design, prep: Prepared, n_mem: int, preset: str) -> tuple:
    """What decides the weight map: model, precision, memories, memory type, B, policy, preset, context, grid."""
    ctx = _wmap_context(prep, preset)
    prec = str(getattr(design, "precision", prep.precision))
    return (prep.model_name, prec, int(n_mem), str(getattr(design, "memory", "")), int(design.max_batch),
            str(design.placement), preset, ctx, int(design.grid_w), int(design.grid_h))


def _placement_model(prep: Prepared):
    """The model the placement reads (its blocks' weight and KV bytes): the prepared one, else loaded by name."""
    model = prep.model
    if model is None or not hasattr(model, "block_weight_bytes"):
        from hydra_opt.workload.models import load_model

        model = load_model(prep.model_name)
    return model


def _placement_memo(cache: dict, key, make):
    """``make()`` memoised in ``cache`` (None when the placement is unavailable for the design)."""
    if key in cache:
        return cache[key]
    try:
        hit = make()
    except Exception:  # noqa: BLE001 - placement unavailable for this design
        hit = None
    if len(cache) > 4096:
        cache.clear()
    cache[key] = hit
    return hit


def block_memory_map(design, prep: Prepared, n_mem: int, *, preset: str = "clean", library=None):
    """Memory index of each block's weights as the simulator's placement lays them out (``Placement.weight_map``,
    indices into the sorted memory slots), or None when the placement is unavailable for this design.

    ``hydra_opt.system.placement.memory_split`` called as the simulator calls ``place``: the ``clean`` preset at the
    workload's mean prompt + output context (traffic-balanced Mamba/attention split for ``cp``,
    docs/noi_placement.md), the ``paper`` preset at the model's ``max_position``; ``random`` uses the simulator's
    default placement seed 0. Cached by :func:`_wmap_key` (compute counts do not matter).
    """
    def make():
        from hydra_opt.system.placement import memory_split

        return tuple(memory_split(design, _placement_model(prep), library=library, preset=preset,
                                  context_tokens=_wmap_context(prep, preset)).weight_map)

    return _placement_memo(_WMAP_CACHE, _wmap_key(design, prep, n_mem, preset), make)


_PLACE_CACHE: dict = {}


def placed_package(design, prep: Prepared, *, preset: str = "clean", library=None):
    """Where the simulator's placement puts the package: ``(chiplet slots in chiplet-index order, memory slots,
    weight map)``, or None when the placement is unavailable for this design.

    ``hydra_opt.system.placement.place`` called as the simulator calls it (``simulator.build``) at the context of
    :func:`block_memory_map`; the ``random`` policy with seed 0 (the simulator draws it from the run's seed).
    Unlike the weight map the compute slots depend on the chiplet counts, so they are part of the cache key.
    """
    def make():
        from hydra_opt.system.placement import place

        ctx = _wmap_context(prep, preset)
        pl = place(design, _placement_model(prep), library=library, preset=preset,
                   **({"context_tokens": ctx} if ctx else {}))
        chips = sorted(pl.chiplets, key=lambda ch: ch.index)
        return (tuple(int(ch.slot) for ch in chips), tuple(int(s) for s in pl.mem_slots),
                tuple(int(j) for j in pl.weight_map))

    return _placement_memo(_PLACE_CACHE, _package_key(design, prep, preset, library), make)


def _package_key(design, prep: Prepared, preset: str, library) -> tuple:
    """What decides the placed package: the weight map's key, the chiplet counts, the slot area, the library."""
    c = design.counts
    counts = tuple((str(n), int(k)) for n, k in (c.items() if isinstance(c, dict) else c))
    return (_wmap_key(design, prep, int(design.n_mem), preset), counts, float(design.slot_area_mm2), id(library))


_OMEGA_CACHE: dict = {}


def prefill_omega(design, prep: Prepared, *, preset: str = "clean", library=None) -> tuple[int, ...] | None:
    """The simulator's prefill Ω of the design: each block's prefill chiplet (chiplet index), or None when the
    placement is unavailable.

    ``simulator.build.placed_system`` + ``design_omega`` on the prefill phase alone — the mapping the simulator
    runs (hop-aware bottleneck assignment, ``runtime.mapping``; phases are mapped independently, so the prefill
    part is the simulator's own), at the placement of :func:`placed_package`. The prefill pass hands its
    activation over at every block whose chiplet differs from the block before it (``single._handoff_s``).
    Cached with the placement; the bandwidth and the batch cap price Ω's tasks, so they join the key.
    """
    def make():
        from hydra_opt.evaluate.simulator.build import design_omega, placed_system
        from hydra_opt.evaluate.simulator.system import SimModel

        model = _placement_model(prep)
        sim_model = SimModel.from_model(model, prep.precision)
        system, _, _, _ = placed_system(design, model, sim_model, library=library, placement_preset=preset,
                                        context_tokens=_wmap_context(prep, preset))
        om = design_omega(system, sim_model, design, phases=("prefill",))
        return tuple(int(om[("prefill", b)]) for b in range(sim_model.n_blocks))

    key = (*_package_key(design, prep, preset, library), float(design.d2d_bw_gbps))
    return _placement_memo(_OMEGA_CACHE, key, make)


def family_memory_groups(design, prep: Prepared, n_mem: int, *, preset: str = "clean", library=None) -> dict[str, float]:
    """Memories each block family streams from, as the simulator's placement lays the weights out.

    All of them for a pure model. For a hybrid, the memories holding the family's blocks in the weight map
    (:func:`block_memory_map`); ``rr``/``random`` make no groups but may still leave a family on fewer memories
    (``rr`` with 2 memories puts every attention block of Nemotron-H on one). When the placement is unavailable:
    split evenly (``cp``) or shared. Cached with the weight map.
    """
    fams = sorted(set(prep.families))
    if len(fams) == 1 or n_mem < 2:
        return {f: float(max(n_mem, 1)) for f in fams}
    key = _wmap_key(design, prep, n_mem, preset)
    hit = _GROUP_CACHE.get(key)
    if hit is None:
        wmap = block_memory_map(design, prep, n_mem, preset=preset, library=library)
        if wmap is not None:
            hit = {f: float(len({m for m, g in zip(wmap, prep.families) if g == f})) for f in fams}
        else:
            cp = str(design.placement) == "cp"
            n_m = min(max(n_mem // 2, 1), n_mem - 1) if cp else n_mem
            hit = {"mamba": float(n_m), "attention": float(n_mem - n_m if cp else n_mem)}
        if len(_GROUP_CACHE) > 4096:
            _GROUP_CACHE.clear()
        _GROUP_CACHE[key] = hit
    return hit


def memory_concurrency(prep: Prepared, n_mem, capacity_bytes, batching: str, b) -> np.ndarray:
    """Requests the memories can hold at once (numpy-broadcasting over ``n_mem``/``capacity_bytes``).

    Blocks are spread over the memories (``ceil(n_blocks / n_mem)`` on the fullest one, which binds). Static
    batching reserves a request's whole KV (prompt + output) at admission; continuous batching holds the
    length-biased mean context of running requests (paged).
    """
    n = np.asarray(n_mem, dtype=np.float64)
    nb = prep.n_blocks
    per = np.ceil(nb / np.maximum(n, 1.0))
    w = prep.weight_bytes.mean() * per
    kv = prep.kv_bytes_per_token.mean() * per
    state = prep.state_bytes.mean() * per
    st = prep.stats
    if batching == "static":
        tokens = st.prompt_mean_tok + st.output_mean_tok
    else:
        tokens = st.decode_ctx_mean_tok
    free = np.maximum(np.asarray(capacity_bytes, dtype=np.float64) - w, 0.0)
    need = kv * tokens + state
    return np.where(need > 0, free / np.maximum(need, 1e-300), 1e9)


# ---------------------------------------------------------------------------------------------------------------
# Helpers of the solver


def _prompt_scv(prep: Prepared) -> float:
    """Squared coefficient of variation of the prompt length (prefill work of one request)."""
    p = prep.stats.prompt_tok
    mu = float(p.mean()) if p.size else 0.0
    return float(p.var() / mu**2) if mu > 0 else 0.0


def _service_scv(prep: Prepared) -> float:
    """Squared coefficient of variation of a request's work (prompt tokens + decode steps, equally weighted by
    their share of the mean): the variability the P–K factor needs."""
    st = prep.stats
    work = st.prompt_tok / max(st.prompt_mean_tok, 1e-9) + st.steps / max(st.decode_steps_mean, 1e-9)
    mu = work.mean()
    return float(work.var() / mu**2) if mu > 0 else 0.0


def resolve(design, model, workload):
    """Accept names/paths like ``simulate`` does: a design YAML path, a model name, a workload name or path."""
    import os

    if isinstance(design, (str, os.PathLike)):
        from hydra_opt.system.design import load_design

        design = load_design(design)
    if isinstance(model, (str, os.PathLike)):
        from hydra_opt.workload.models import load_model

        model = load_model(model)
    if isinstance(workload, (str, os.PathLike)):
        from hydra_opt.workload.workload import load_workload

        workload = load_workload(workload)
    return design, model, workload


