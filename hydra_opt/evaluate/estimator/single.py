"""The estimator's solver: one design → :class:`Estimate` (HYDRA §V), at chiplet-type level in Python floats.

The single implementation of the model: ``estimate()`` calls it for one design and the vectorised path
(``vectorised.space_arrays``) for every distinct design of a space. (Until issue 16 step 3 an array solver over
designs, ``core.solve``, was kept bit-equal to this one by a test; this is the arithmetic of that solver with
``D = 1``, so results are unchanged, see ``benchmarks/results/estimator_solver.md``.) How the work is organised:

* **Type level, not station level.** Every station of one chiplet type carries identical block times, so the
  per-type columns (priced once through ``opcost`` in ``core.type_table``) are cached per (prepared workload,
  chiplet types, batching, batch, bandwidth) and ``(blocks, stations)`` matrices are never built. The LPT mapping Ω
  (HYDRA Eqs. 4–5) picks the least-loaded station inside each type, with the first-index tie-breaking of
  ``capacities.assign_blocks``.
* **Scalars in Python floats**, with numpy's reductions reproduced exactly (:func:`pairwise_sum` is numpy's
  pairwise sum, :func:`interp_scalar` its ``interp`` formula), so the float path equals numpy's array arithmetic.
* **The static batch sequence** keeps its ``(time grid)`` vectors in numpy but finds each batch's free slot with a
  forward pointer (the expected live batches only grow during a sweep), and skips the vector work before a
  batch's prefill completes (its contribution is zero there).
"""

from __future__ import annotations

import bisect
import math
from array import array

import numpy as np

from hydra_opt.evaluate.estimator import core, fluid, links, markov, streams
from hydra_opt.evaluate.estimator.result import Estimate, EstimatorOptions
from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.system.materialise import materialise

try:  # numpy's compiled interp: np.interp minus its Python-level argument checks (same arithmetic)
    from numpy._core.multiarray import interp as _vinterp
except ImportError:  # pragma: no cover - older numpy layout
    _vinterp = np.interp

from hydra_opt.evaluate.estimator import _kernels  # noqa: E402
from hydra_opt.evaluate.estimator._kernels import interp_scalar, pairwise_sum  # noqa: E402
from hydra_opt.evaluate.estimator._kernels import lpt as _lpt, lpt_order as _lpt_order  # noqa: E402
from hydra_opt.evaluate.estimator._kernels import mva as _mva, station_loads as _station_loads  # noqa: E402

__all__ = ["estimate", "estimate_one", "pairwise_sum", "interp_scalar"]

#: The static-batching fluid runs as the compiled scalar kernels when ``_kernels`` is compiled (the same numbers
#: as the numpy code below, which pure Python runs; tests/test_estimator_speedpath.py checks both ways).
_FAST_FLUID = _kernels.COMPILED

_INF = float("inf")


_pw = pairwise_sum


_interp1 = interp_scalar


def _mn(a: float, b: float) -> float:
    """``np.minimum`` of two floats (NaN-propagating)."""
    return a if (a <= b or a != a) else b


def _mx(a: float, b: float) -> float:
    """``np.maximum`` of two floats (NaN-propagating)."""
    return a if (a >= b or a != a) else b


# ---------------------------------------------------------------------------------------------------------------
# Caches: what depends on a prepared workload lives in its ``memo`` (and dies with it); the rest in _MISC

_MISC: dict = {}


def _extras(prep: core.Prepared) -> dict:
    hit = prep.memo.get("extras")
    if hit is None:
        hit = dict(
            grid_k=prep.grid_k,
            grid_emin=prep.grid_emin,
            gk=prep.grid_k.tolist(),
            ge=prep.grid_emin.tolist(),
            prompt_scv=core._prompt_scv(prep),
            service_scv=core._service_scv(prep),
            fam_rows={f: np.nonzero(np.array(prep.families) == f)[0].tolist() for f in sorted(set(prep.families))},
        )
        prep.memo["extras"] = hit
    return hit


def _cached(key, make, owner=None):
    """Memoised ``make()``: in ``owner.memo`` (a prepared workload the value depends on), else in ``_MISC``."""
    store = _MISC if owner is None else owner.memo
    hit = store.get(key)
    if hit is None:
        if owner is None and len(_MISC) > 50000:
            _MISC.clear()
        hit = store[key] = (make(),)
    return hit[0]


def _type_columns(prep, ex: dict, chips: list, tables: list, keys: tuple) -> tuple[list, tuple[list, list]]:
    """Per chiplet type: (pre, dec, pre_ref, dec_ref, dec1, pre1) per block, inf where the type is ineligible;
    and the LPT block orders of the prefill and decode reference columns.

    The eligibility rule: a family's blocks run in a phase on the types built for it,
    else on the types of that family, else anywhere.
    """
    elig = []
    for f in ex["fam_rows"]:
        for phase in ("prefill", "decode"):
            native = [k for k, c in enumerate(chips) if c.can_run(f, phase)]
            if not native:
                native = [k for k, c in enumerate(chips) if f in c.families] or list(range(len(chips)))
            elig.append(tuple(native))
    key = ("cols", keys, tuple(elig))
    hit = prep.memo.get(key)
    if hit is not None:
        return hit
    nb = prep.n_blocks
    out = []
    for k, t in enumerate(tables):
        fields = [t.pre_s.tolist(), t.dec_s.tolist(), t.pre_ref_s.tolist(), t.dec_ref_s.tolist(), t.dec1_s.tolist(),
                  t.pre1_s.tolist()]
        cols = [[_INF] * nb for _ in range(6)]
        e = 0
        for f, rows in ex["fam_rows"].items():
            ok_p, ok_d = k in elig[e], k in elig[e + 1]
            e += 2
            for q, ok in ((0, ok_p), (1, ok_d), (2, ok_p), (3, ok_d), (4, ok_d), (5, ok_p)):
                if ok:
                    src, dst = fields[q], cols[q]
                    for r in rows:
                        dst[r] = src[r]
        out.append(tuple(cols))
    # The LPT block order depends on the columns only (Ω's greedy, capacities.assign_blocks).
    orders = (_lpt_order([c[2] for c in out], nb), _lpt_order([c[3] for c in out], nb))
    prep.memo[key] = (out, orders)
    return out, orders


def _family_sums(prep, ex: dict, table, tkey) -> dict:
    """Per-family memory bytes of one table (``per_block[fams == f].sum()``, numpy's sum)."""

    def make():
        fams = np.array(prep.families)
        return {
            name: {f: float(arr[fams == f].sum()) for f in ex["fam_rows"]}
            for name, arr in (("mem", table.mem_bytes), ("mem1", table.mem1_bytes), ("memb", table.memb_bytes))
        }

    return _cached(("famsum", tkey), make, prep)


# ---------------------------------------------------------------------------------------------------------------
# The design's inputs at chiplet-type level


def _concurrency(prep, ex: dict, n_mem: int, capacity_bytes: float, batching: str) -> float:
    """``core.memory_concurrency`` for one design, in floats (same operations)."""
    means = ex.get("means")
    if means is None:
        means = ex["means"] = (float(prep.weight_bytes.mean()), float(prep.kv_bytes_per_token.mean()),
                               float(prep.state_bytes.mean()))
    per = float(math.ceil(prep.n_blocks / _mx(float(n_mem), 1.0)))
    w, kv, state = means[0] * per, means[1] * per, means[2] * per
    st = prep.stats
    tokens = st.prompt_mean_tok + st.output_mean_tok if batching == "static" else st.decode_ctx_mean_tok
    free = _mx(capacity_bytes - w, 0.0)
    need = kv * tokens + state
    return free / _mx(need, 1e-300) if need > 0 else 1e9


class _Design:
    """One design's inputs at chiplet-type level (what the solver needs)."""

    __slots__ = ("counts", "names", "cols", "orders", "mem_bytes", "mem1", "memb", "hbm_bps", "batches", "batch",
                 "tokens", "admits", "chunk_extra", "static_sched", "static_batching", "chunked", "mem_limited", "feasible", "gain",
                 "mem_net", "mem_map", "d2d_gbps", "routes", "pre_omega")


def _type_part(design, prep: core.Prepared, lib, ex: dict, batching: str, b: int, budget: float):
    """What a design's chiplet *types* determine, whatever their counts: the built types and memory
    (``materialise``), block-time tables, type columns, LPT orders and family memory sums. Cached in ``prep.memo``
    per (library, chiplet names, D2D bandwidth, package, DynaCore settings, memory, batching, batch)."""
    c = design.counts
    items = c.items() if isinstance(c, dict) else c
    counts = [(str(n), int(k)) for n, k in items if int(k) > 0]  # materialise's counts
    key = ("types", id(lib), tuple(n for n, _ in counts), design.d2d_bw_gbps, design.grid_w, design.grid_h,
           design.slot_area_mm2, design.dynacore, design.memory, batching, b, budget)
    try:
        hit = prep.memo.get(key)
    except TypeError:  # unhashable settings: no sharing
        key, hit = None, None
    if hit is not None and hit[0] is lib:
        return counts, hit[1]
    hw = materialise(design, lib)
    if not hw.counts:
        return counts, None
    mem = hw.memory
    chips = list(hw.chiplets)
    task_bw = min(float(design.d2d_bw_gbps), float(mem.bw_gbps))
    tables = [core.type_table(prep, c, batching, b, task_bw, budget) for c in chips]
    tkeys = tuple((c.name, c.d2d_bw_gbps, batching, b, task_bw, budget) for c in chips)
    cols, orders = _type_columns(prep, ex, chips, tables, tkeys)
    part = (mem, chips, tables, cols, orders, _family_sums(prep, ex, tables[0], tkeys[0]))
    if key is not None:
        prep.memo[key] = (lib, part)
    return counts, part


def _design(design, prep: core.Prepared, opts: EstimatorOptions, lib) -> _Design | None:
    ex = _extras(prep)
    b = int(design.max_batch)
    batching = str(design.batching)
    budget = float(prep.scenario.token_budget)
    counts, part = _type_part(design, prep, lib, ex, batching, b, budget)
    if part is None:
        return None
    mem, chips, tables, cols, orders, sums = part
    d2d = float(design.d2d_bw_gbps)
    n_mem = int(design.n_mem)
    out = _Design()
    out.counts = [n for _, n in counts]
    out.names = [name for name, _ in counts]
    out.cols, out.orders = cols, orders
    groups = core.family_memory_groups(design, prep, n_mem, preset=prep.scenario.placement_preset, library=lib)

    def eff_bytes(kind: str) -> float:
        worst = 0.0
        per = sums[kind]
        for f, n_f in groups.items():
            b_f = per[f]
            if b_f > 0:
                worst = max(worst, b_f * n_mem / max(n_f, 1e-9))
        return worst

    out.mem_bytes, out.mem1, out.memb = eff_bytes("mem"), eff_bytes("mem1"), eff_bytes("memb")
    conc = _concurrency(prep, ex, n_mem, float(mem.capacity_bytes), batching)
    ns = sum(out.counts)
    max_batches = prep.scenario.max_batches or ns
    nbat = min(float(max_batches), math.floor(conc / b) if batching == "static" else conc / b)

    def plan_scalars():
        p = core.cycle_plan(prep, batching, b, budget)
        return float(p["tokens"]), float(p["admits"]), max(p.get("chunk_passes", 1.0) - 1.0, 0.0)

    out.tokens, out.admits, out.chunk_extra = _cached(("plan", batching, b, budget), plan_scalars,
                                                                  prep)
    gw, gh = int(design.grid_w), int(design.grid_h)
    mem_bw = float(mem.bw_gbps)
    # core.hbm_port_cap_gbps: Σ over the ring memories of min(interface, reach × link) (numpy's sum).
    out.hbm_bps = _cached(("hbm", n_mem, gw, gh, mem_bw, d2d),
                          lambda: _pw([_mn(mem_bw, r * d2d) for r in core._memory_link_reach(n_mem, gw, gh)]) * 1e9)
    gain = 1.0
    lend = prep.scenario.lend
    if lend and str(design.scheduler) == "elastic":
        gain = float(core._lending_gain(prep, chips, counts, tables, opts))
    out.gain = gain
    out.d2d_gbps = d2d
    out.batches = float(max(nbat, 0.0))
    out.batch = float(b)
    out.static_sched = str(design.scheduler) == "static"
    out.static_batching = batching == "static"
    out.chunked = batching == "chunked"
    out.mem_net, out.mem_map = ((None, ()) if batching == "static"
                                else _memory_network(design, prep, lib, tables, n_mem, d2d, mem))
    out.routes = (None if batching == "static" or out.static_sched
                  else _routes(design, prep, lib, tables, d2d, float(mem.bw_gbps)))
    # The simulator's own prefill Ω for the prefill pass's hand-offs (continuous/chunked under dynamic task
    # scheduling; static scheduling's tandem keeps the estimator's Ω for its stations and their hand-offs alike).
    om = (None if batching == "static" or out.static_sched
          else core.prefill_omega(design, prep, preset=prep.scenario.placement_preset, library=lib))
    out.pre_omega = om if om is not None and len(om) == prep.n_blocks else None
    out.mem_limited = bool(nbat < max_batches)
    out.feasible = bool(nbat >= (1.0 if batching == "static" else 1.0 / b) and ns > 0)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Solver


def _balance(loads: list[float], ranges: list[tuple[int, int, int]], eff: float) -> list[float]:
    """``capacities.balance_within_types`` for one design: a type's stations are the contiguous ``ranges``
    ``[s0, s1)``; its mean is numpy's sum of the zero-padded full vector (the reference's order of additions)."""
    out = list(loads)
    ns = len(out)
    keep = 1.0 - eff
    for s0, s1, _ in ranges:
        mean = _pw([0.0] * s0 + out[s0:s1] + [0.0] * (ns - s1)) / max(s1 - s0, 1)
        for s in range(s0, s1):
            out[s] = eff * mean + keep * out[s]
    return out


def _service_rates(curve: list[float], n_adm: int, u: float, bsz: float, m: float, x_hbm: float, admits: float,
                   mu_max: float) -> list[float]:
    """μ(n) of the occupancy chain, n = 1..N, in floats.

    ``n·u/B`` batches in flight run at the MVA curve (``np.interp`` for one state, else ``a + w(b − a)`` between the
    bracketing integers), below one batch at the one-batch rate scaled down; capped by
    the HBM rate, with the last state at the full capacity and μ made non-decreasing.
    """
    m_max = len(curve)
    xp = None
    out = []
    for k in range(1, n_adm + 1):
        nb = k * u / bsz
        if nb >= 1.0:
            v = nb if nb <= m or nb != nb else m  # np.minimum(nb, m)
            if n_adm == 1:
                if xp is None:
                    xp = [float(n) for n in range(1, m_max + 1)]
                xn = _interp1(v, xp, curve)
            else:
                v = 1.0 if v < 1.0 else (float(m_max) if v > m_max else v)  # np.clip(v, 1, m_max)
                lo = math.floor(v)
                hi = lo + 1 if lo + 1 < m_max else m_max
                w = v - lo
                a = curve[lo - 1]
                xn = a + w * (curve[hi - 1] - a)
        else:
            xn = nb * curve[0]
        out.append((xn if (xn <= x_hbm or xn != xn) else x_hbm) * admits / u)  # _mn inlined (hot)
    out[-1] = mu_max / u
    prev = out[0]
    for i in range(1, n_adm):  # np.maximum.accumulate (_mx inlined)
        v = out[i]
        if not (v >= prev or v != v):
            out[i] = v = prev
        prev = v
    return out


def _loads(di: _Design, opts: EstimatorOptions, nb: int):
    """Per-station demands (s) of the design's Ω: the cycle's prefill and decode parts, the reference passes
    (full batch) and the one-member ones, balanced inside a chiplet type by dynamic schedulers."""
    ranges = []
    st_type: list[int] = []
    s0 = 0
    for k, n in enumerate(di.counts):
        ranges.append((s0, s0 + n, k))
        st_type.extend([k] * n)
        s0 += n
    ns = s0
    cols = di.cols
    own_p = _lpt([c[2] for c in cols], ranges, nb, ns, di.orders[0])
    own_d = _lpt([c[3] for c in cols], ranges, nb, ns, di.orders[1])
    pre, pre_ref, pre1 = _station_loads(own_p, cols, (0, 2, 5), st_type, ns)
    dec, dec_ref, dec1 = _station_loads(own_d, cols, (1, 3, 4), st_type, ns)
    if not di.static_sched:
        eff = opts.balance_efficiency
        pre, dec, pre_ref, dec_ref, dec1, pre1 = (_balance(v, ranges, eff)
                                                  for v in (pre, dec, pre_ref, dec_ref, dec1, pre1))
    if di.gain != 1.0:
        g = di.gain
        pre, dec, pre_ref, dec_ref, dec1, pre1 = ([v / g for v in x] for x in (pre, dec, pre_ref, dec_ref, dec1, pre1))
    return dict(pre=pre, dec=dec, pre_ref=pre_ref, dec_ref=dec_ref, dec1=dec1, pre1=pre1, st_type=st_type, ns=ns,
                own_p=own_p, own_d=own_d)


def _solve(di: _Design, prep: core.Prepared, opts: EstimatorOptions):
    ex = _extras(prep)
    ld = _loads(di, opts, prep.n_blocks)
    demand = [p + d for p, d in zip(ld["pre"], ld["dec"])]
    m = _mx(di.batches, 1.0)
    m_max = int(math.ceil(m))
    lo_row, hi_row = int(math.floor(m - 1.0)), int(math.ceil(m - 1.0))
    (curve, curve_b, curve_1), qrows = _mva([demand, ld["dec_ref"], ld["dec1"]], m_max, (lo_row, hi_row))
    if not di.static_batching:  # continuous/chunked: the decode passes' own curves (see there)
        curve_b, curve_1 = (_pipeline_curves if di.routes else _decode_curves)(di, ld, m_max)
    xp = [float(n) for n in range(1, m_max + 1)]
    x_mva = _interp1(m, xp, curve)
    x_hbm = di.hbm_bps / _mx(di.mem_bytes, 1e-300)
    x = _mn(x_mva, x_hbm) if di.feasible else 0.0
    bsz = di.batch
    hb = di.hbm_bps / _mx(di.memb, 1e-300)
    h1 = di.hbm_bps / _mx(di.mem1, 1e-300)

    b1 = _mx(bsz - 1.0, 1e-9)

    def taus(dc: float) -> tuple[float, float]:  # _mn/_mx inlined: called ~5× per design
        xb = _interp1(dc, xp, curve_b)
        xb = xb if (xb <= hb or xb != xb) else hb
        x1 = _interp1(dc, xp, curve_1)
        x1 = x1 if (x1 <= h1 or x1 != x1) else h1
        tb = dc / (xb if (xb >= 1e-300 or xb != xb) else 1e-300)
        t1 = dc / (x1 if (x1 >= 1e-300 or x1 != x1) else 1e-300)
        if bsz > 1:
            d = tb - t1
            k1 = (d if (d >= 0.0 or d != d) else 0.0) / b1
        else:
            k1 = 0.0
        t0 = tb - k1 * bsz
        return (t0 if (t0 >= 0.0 or t0 != t0) else 0.0), k1

    tau_b, tau_1 = _pass_times(curve_b, hb), _pass_times(curve_1, h1)
    ctx = dict(ex=ex, ld=ld, m=m, m_max=m_max, curve=curve, xp=xp, x=x, x_hbm=x_hbm, taus=taus, tau_b=tau_b,
               tau_1=tau_1, qrows=(qrows[lo_row], qrows[hi_row]))
    run = _static_run(di, prep, ctx) if di.static_batching else _stream_run(di, prep, ctx)
    return _result(di, prep, ctx, run, demand, x_mva)


def _pass_times(curve: list[float], cap: float) -> list[float]:
    """``n / max(min(X(n), cap), 1e-300)``, n = 1.. (s per pass at n batches; ``_mn``/``_mx`` inlined: hot)."""
    out = []
    n = 0
    for c in curve:
        n += 1
        v = c if (c <= cap or c != c) else cap
        out.append(n / (v if (v >= 1e-300 or v != v) else 1e-300))
    return out


def _memory_network(design, prep: core.Prepared, lib, tables, n_mem: int, d2d: float, mem):
    """Per memory, its blocks' weight bytes over what its links deliver: a decode pass's demand there, s (full-batch
    and one-member passes); empty without a weight map.

    A block's weights stream from the memory the placement put them on (``core.block_memory_map``; index into the
    sorted memory slots) through the memory's outgoing mesh links (``core._memory_link_reach``, in ring order)."""
    wmap = core.block_memory_map(design, prep, n_mem, preset=prep.scenario.placement_preset, library=lib)
    if wmap is None or len(wmap) != prep.n_blocks:
        return ((), ()), ()
    from hydra_opt.system.placement import ring_order

    gw, gh = int(design.grid_w), int(design.grid_h)
    order = ring_order(gw, gh)[:n_mem]
    reach = dict(zip(order, core._memory_link_reach(n_mem, gw, gh)))
    mem_bw = float(mem.bw_gbps)
    caps = [_mn(mem_bw, reach[slot] * d2d) * 1e9 for slot in sorted(order)]
    memb, mem1 = tables[0].memb_bytes.tolist(), tables[0].mem1_bytes.tolist()  # bytes do not depend on the type
    d_ref, d_one = [0.0] * n_mem, [0.0] * n_mem
    for blk, j in enumerate(wmap):
        d_ref[j] += memb[blk] / caps[j]
        d_one[j] += mem1[blk] / caps[j]
    return (tuple(d_ref), tuple(d_one)), tuple(int(j) for j in wmap)


def _routes(design, prep: core.Prepared, lib, tables, d2d: float, mem_bw: float):
    """What the decode streams' link sharing needs (:func:`_sharing`): the placed chiplet and memory slots, the
    weight map, the mesh, every resource's capacity (links, then memory ports, bytes/s) and the full-batch and
    one-member weight bytes per block; None without a placement."""
    placed = core.placed_package(design, prep, preset=prep.scenario.placement_preset, library=lib)
    if placed is None or len(placed[2]) != prep.n_blocks:
        return None
    from hydra_opt.hardware.noi import Mesh

    gw, gh = int(design.grid_w), int(design.grid_h)
    mesh = _cached(("mesh", gw, gh), lambda: Mesh(gw, gh, 1.0))  # routes only: capacities are passed apart
    caps = [d2d * 1e9] * mesh.n_links + [mem_bw * 1e9] * len(placed[1])
    return (*placed, mesh, caps, (tables[0].memb_bytes.tolist(), tables[0].mem1_bytes.tolist()))


def _sharing(di: _Design, ld: dict) -> list[list[float]]:
    """Per station, the slowdown of its decode weight streams with every decode station streaming
    (:func:`links.stream_sharing`), for full-batch and one-member passes; the mean over the station's chiplet type
    (dynamic schedulers balance a type's stations), 1 where it streams nothing."""
    chips, mems, wmap, mesh, caps, byte_tables = di.routes
    own, st_type = ld["own_d"], ld["st_type"]
    routes = [(*mesh.route(mems[j], chips[s]), mesh.n_links + j) for j, s in zip(wmap, own)]
    out = []
    for nbytes in byte_tables:
        per: dict[int, list[float]] = {}
        for s, f in links.stream_sharing(own, routes, nbytes, caps).items():
            per.setdefault(st_type[s], []).append(f)
        mean = {k: _pw(v) / len(v) for k, v in per.items()}
        out.append([mean.get(k, 1.0) for k in st_type])
    return out


def _pipeline_curves(di: _Design, ld: dict, m_max: int) -> tuple[list[float], list[float]]:
    """Throughput X(n), n = 1..m_max, of the decode passes (full batch, one member) under dynamic task scheduling:
    a deterministic pipeline whose stations slow down as their weight streams meet.

    A pass's task at a station takes a fixed time for its block and batch, so ``n`` batches cycling through the
    decode stations do not queue behind each other until the slowest station is full: ``X(n) = min(n/ΣD, 1/max D)``
    (the cycle time of a deterministic cyclic tandem; an M/M-style queue at every station put five one-member
    Llama-3-8B passes on seven decode chiplets at 35.7 ms per pass against the 30.1 ms the simulator gives, as one
    pass alone). What does grow with load is each task: with the other decode stations busy its weight stream
    shares links and ports with theirs, ``D_s = D_s⁰·(1 + (f_s − 1)·U)`` (``f_s``: :func:`_sharing`; ``U``: the
    stations' mean utilisation with one batch fewer, as an arriving batch sees them). The memories bound the rate
    (their demand at full speed, :func:`_memory_network`).
    """
    d_ref, d_one = di.mem_net
    f_ref, f_one = _sharing(di, ld)
    out = []
    for base, dmem, fac in ((ld["dec_ref"], d_ref, f_ref), (ld["dec1"], d_one, f_one)):
        pairs = [(x, f) for x, f in zip(base, fac) if x > 0.0]
        k = _mx(float(len(pairs)), 1.0)
        d_mem_max = max(dmem, default=0.0)
        xs, u = [], 0.0
        for n in range(1, m_max + 1):
            dem = [x * (1.0 + (f - 1.0) * u) for x, f in pairs]
            tot = _pw(dem)
            x = _mn(n / _mx(tot, 1e-300), 1.0 / _mx(_mx(max(dem, default=0.0), d_mem_max), 1e-300))
            u = _mn(x * tot / k, 1.0)
            xs.append(x)
        out.append(xs)
    return out[0], out[1]


def _decode_curves(di: _Design, ld: dict, m_max: int) -> tuple[list[float], list[float]]:
    """Throughput X(n), n = 1..m_max, of the decode passes (full batch, one member) of continuous/chunked batching
    under static task scheduling, and under dynamic schedulers when the design has no placement (with one,
    :func:`_pipeline_curves`).

    Approximate MVA over the chiplets with *deterministic* service (a task's time is fixed by its block and
    batch): an arrival waits for the queued tasks and half of the one in service, ``R = D·(1 + Q − U/2)`` (exact
    MVA, ``D·(1 + Q)``, is the exponential case and over-queues a pipeline), and ``X`` never passes the slowest
    station's rate ``1/max D`` (the approximation alone would, at a saturated station). A task holds its chiplet while its
    weights stream, so a contended memory lengthens the chiplets' demands (surrogate delays): memory ``j``
    (demand ``D_j``, :func:`_memory_network`) delays a pass by ``D_j·(Q_j − U_j/2)`` beyond the lone pass, shared
    out to the chiplets by their demand.

    Measured (same simulations, before → after): dynamic benchmark mean Spearman over 120 cells 0.755 → 0.774,
    capacity 0.781 → 0.795 (|log est/sim| 0.16 → 0.09), TPOT at 50 % load 0.69 → 0.75; stream-model check TPOT
    Llama-3 chat 0.79 → 0.91–0.93, Llama-3 arXiv 0.83–0.86 → 0.97–0.98, Mamba-2 chat 0.74–0.77 → 0.91–0.95 (Nemotron-H
    chat 0.77–0.95 → 0.65–0.90). Deterministic chiplets alone: 0.766, capacity 0.821 but TPOT under-estimated
    (|log| 0.07 → 0.17); memory queues on exponential chiplets (an earlier attempt) over-penalised 8–12 memories.

    Static task scheduling keeps the memories out of the queues (they only bound the rate): every task of a block
    runs on its Ω chiplet, so that chiplet's queue already orders the streams it reads and a memory queue on top
    counts the wait twice. With it, Llama-3-8B chat on 8 + 8 chiplets, chunked, put a pass of 16 batches at 52 ms
    and the SLO capacity at 1.9 req/s (simulated: ~32 ms, 20.3 req/s; without: 21.0 req/s); elastic scheduling
    moves tasks off Ω under imbalance and there the memory queues stay (simulated 3.15 req/s, estimated 1.96).
    Continuous and chunked batching share the decode pipeline (a lone request decodes alike under both), so both
    drop them: static capacity Spearman 0.898 → 0.934 on 320 designs
    (`benchmarks/results/estimator_ranking_dynamic_static.md`), though continuous static capacities come out
    1.35× the simulated ones on Llama-3 (1.1× with the queues, which stood in for the longer static TTFT the
    model lacks).

    The same double count under dynamic schedulers: a memory whose demand is at most that of a chiplet reading it
    (``mem_map``: each block's memory; ``own_d``: its Ω chiplet) is no queue of its own — that reader is the slower
    station and its queue already orders the streams — so only a memory slower than every one of its readers, i.e.
    shared by several, queues. Measured on the 4,800 runs of the dynamic benchmark (cost-aware elastic steal): capacity
    Spearman ≥ 0.9 on 9 → 11 of 12 combinations (Llama-3-8B 0.86 / 0.88 / 0.89 / 0.91 → 0.90 / 0.89 / 0.92 / 0.93;
    Mamba-2 0.96–0.98 → 0.95–0.96, now optimistic by ~10 %).
    """
    d_ref, d_one = di.mem_net
    wmap, own = di.mem_map, ld.get("own_d")
    out = []
    for base, dmem in ((ld["dec_ref"], d_ref), (ld["dec1"], d_one)):
        if wmap and own and not di.static_sched:
            top = [0.0] * len(dmem)  # the largest demand among each memory's readers
            for j, s in zip(wmap, own):
                top[j] = _mx(top[j], base[s])
            dmem = [d if d > t else 0.0 for d, t in zip(dmem, top)]
        base = [x for x in base if x > 0.0]
        tot = _pw(base)
        w = [x / tot for x in base] if tot > 0.0 else [0.0] * len(base)
        d_mem_max = max(dmem, default=0.0)
        if di.static_sched:
            dmem = ()  # memories bound the rate only (docstring)
        q_s, u_s = [0.0] * len(base), [0.0] * len(base)
        q_m, u_m = [0.0] * len(dmem), [0.0] * len(dmem)
        xs = []
        for n in range(1, m_max + 1):
            extra = _pw([d * (qm - 0.5 * um) for d, qm, um in zip(dmem, q_m, u_m)])
            dem = [b + extra * wi for b, wi in zip(base, w)]
            r_s = [d * (1.0 + q - 0.5 * u) for d, q, u in zip(dem, q_s, u_s)]
            # The bound no pipeline passes: the slowest station (chiplet or memory) saturated.
            x = _mn(n / _mx(_pw(r_s), 1e-300), 1.0 / _mx(max(max(dem, default=0.0), d_mem_max), 1e-300))
            q_s, u_s = [x * r for r in r_s], [x * d for d in dem]
            r_m = [d * (1.0 + qm - 0.5 * um) for d, qm, um in zip(dmem, q_m, u_m)]
            q_m, u_m = [x * r for r in r_m], [x * d for d in dmem]
            xs.append(x)
        out.append(xs)
    return out[0], out[1]


def _replayed(prep: core.Prepared) -> float:
    """Requests the run replays (inf: an open stream)."""
    return float(prep.trace[0].size) if prep.trace is not None else math.inf


def _overlap(r: float, n_b: float) -> float:
    """Batches a static batch decodes beside (itself included), on average, when ``n_b`` batches form evenly over
    the run and each lives ``r`` formation gaps: Little's ``r`` for a long run, fewer when the run is not much
    longer than a life — batches then lack neighbours on one side — and at most ``n_b``. The mean over batches of
    the overlap ``(1 − |t_j − t_k|/L)⁺`` summed over ``k``: ``r·(1 − r/(3·n_b))`` for ``n_b ≥ r``, else
    ``n_b·(1 − n_b/(3·r))``."""
    if n_b == math.inf or r <= 0.0:
        return r
    return r * (1.0 - r / (3.0 * n_b)) if n_b >= r else n_b * (1.0 - n_b / (3.0 * r))


def _static_run(di: _Design, prep: core.Prepared, ctx: dict) -> dict:
    """Static batching: the fluid batch sequence, prefill-stage queueing and the batch occupancy chain."""
    ex, ld, m, x, taus = ctx["ex"], ctx["ld"], ctx["m"], ctx["x"], ctx["taus"]
    cap_tok = x * di.tokens
    mu_max = x * di.admits
    lam = prep.arrival_per_s
    bsz = di.batch
    l1 = float(core.order_stats(prep, int(bsz))[0])
    pre_ref = ld["pre_ref"]
    pre_sum = _pw(pre_ref)
    pre_max = max(pre_ref) if ld["ns"] else 0.0
    e_l1 = _interp1(l1, ex["gk"], ex["ge"])
    bb = _mx(bsz, 1.0)
    n_b = _replayed(prep) / bb  # static batches the replayed requests form
    conc = m
    for _ in range(4):
        tau0, tau1 = taus(conc)
        life = pre_sum + tau0 * l1 + tau1 * bsz * e_l1
        conc = _mn(_mx(_overlap(lam / bb * life, n_b), 1.0), m)
    tau0, tau1 = taus(conc)
    a_mean = bsz * e_l1 / _mx(l1, 1e-9)
    tpot = tau0 + tau1 * a_mean
    # The prefill pipeline residence at m batches in flight (MVA queue lengths between the bracketing rows).
    q_lo, q_hi = ctx["qrows"]
    wq = (m - 1.0) - math.floor(m - 1.0)
    prefill_lat = _pw([p * (1.0 + (a + wq * (b - a))) for p, a, b in zip(ld["pre"], q_lo, q_hi)])
    fl_m = math.floor(di.batches + 1e-9)
    fl_feasible = di.feasible and fl_m >= 1
    fl_m = float(fl_m) if di.feasible else 0.0
    out_tok = prep.stats.output_mean_tok
    r_tok = _mn(cap_tok, lam * out_tok)
    r_adm = _mn(mu_max, lam)
    t_end = float(prep.horizon_s if np.isfinite(prep.horizon_s) else 2.0 * prep.window_s[1])
    w0, w1 = prep.window_s
    a0 = prep.first_arrival_s
    seq = _batch_sequence(prep, ex, fl_m, bsz, a0, lam, pre_sum, pre_max, tau0, tau1, l1, e_l1, ctx["tau_b"], t_end)
    n0, n1 = _static_curves(ex, seq, bsz, r_tok, fl_feasible, w0, w1)
    n0, n1 = _mn(n0, prep.offered_tokens), _mn(n1, prep.offered_tokens)  # core.Prepared.offered_tokens
    thr = (n1 - n0) / max(w1 - w0, 1e-300)
    tt = _static_ttft(seq, bsz, a0, lam, r_adm, pre_sum, fl_feasible, w0, w1, prep.horizon_s, prep.scenario.ttft_from)
    rho_p = lam / bb * pre_max
    ca2 = 1.0 / bb
    cs2 = ex["prompt_scv"] / bb
    w_p = rho_p / (1.0 - rho_p) * (ca2 + cs2) / 2.0 * pre_max if rho_p < 1.0 else _INF
    n_win = lam * max(w1 - w0, 0.0) / bb
    w_p = _mn(w_p, 0.5 * pre_max * math.sqrt(n_win * (ca2 + cs2)))
    ttft = tt + w_p if math.isfinite(tt) else _INF
    rho = lam / _mx(mu_max, 1e-300) if mu_max > 0 else _INF
    over = rho >= 1.0 or not math.isfinite(rho)
    stat_thr, pi, wait = cap_tok if over else lam * out_tok, None, w_p
    if not over:
        n_adm = int(max(1, round(float(m))))
        mu_n = _service_rates(ctx["curve"], n_adm, bsz, bsz, m, ctx["x_hbm"], di.admits, mu_max)
        lam_u = lam / bsz
        pi, stat_thr, queue = _chain(lam_u, mu_n, n_adm, t_end, bsz, out_tok)
        wait = queue / lam_u * (1.0 + ex["service_scv"]) / 2.0 if lam > 0 else 0.0
    return dict(thr=thr, ttft=ttft, tpot=tpot, cap_tok=cap_tok, mu_max=mu_max, rho=rho, pi=pi, stat_thr=stat_thr,
                wait=wait, conc=conc, prefill_lat=prefill_lat)


def _chain(lam_u: float, mu_n: np.ndarray, n_adm: int, t_end: float, u: float, out_tok: float):
    """Occupancy CTMC (Eq. 8) of customers of ``u`` requests (a static batch, or one request): π, the stationary
    token rate and the mean number waiting."""
    room = int(min(2000, max(1.0, lam_u * t_end)))
    if _kernels.COMPILED:
        mu_l = mu_n if isinstance(mu_n, list) else mu_n.tolist()
        k = n_adm + markov.queue_room(lam_u / mu_l[-1], room)  # markov.occupancy_chain's truncation
        if k <= markov.SHORT_CHAIN:  # birth_death_stationary's compiled path, on lists (numpy calls cost more)
            return _chain_short(lam_u, mu_l, n_adm, k, u, out_tok)
    mu_n = np.asarray(mu_n, dtype=np.float64)
    pi, _ = markov.occupancy_chain(lam_u, mu_n, n_adm, room)
    nn = np.arange(pi.size)
    queue = np.maximum(nn - n_adm, 0)
    g_d = np.concatenate([[0.0], mu_n, np.full(pi.size - 1 - n_adm, mu_n[-1])])[: pi.size] * u * out_tok
    return pi, float((pi * g_d).sum()), float((pi * queue).sum())


def _chain_short(lam_u: float, mu: list[float], n_adm: int, k: int, u: float, out_tok: float):
    """``_chain`` of ``k + 1 <= 65`` states with the numpy steps done on lists: the same floats (the compiled
    product-form kernel, numpy's pairwise sums), ~10× fewer µs than the ~20 numpy calls on small arrays."""
    death = array("d", mu)
    death.extend([mu[-1]] * (k - n_adm))
    pi = np.empty(k + 1)
    _kernels.birth_death_product(array("d", [lam_u] * k), death, pi)
    pl = pi.tolist()
    g = [0.0]
    g.extend(mu)
    g.extend([mu[-1]] * (k - n_adm))
    thr = _pw([p * ((gi * u) * out_tok) for p, gi in zip(pl, g)])
    queue = _pw([p * float(i - n_adm if i > n_adm else 0) for i, p in enumerate(pl)])
    return pi, thr, queue


def _stream_model(di: _Design, prep: core.Prepared, ctx: dict) -> streams.StreamModel:
    """The two-stream model's inputs: the decode-only MVA (``tau_b``, HBM-capped) and a prefill-only MVA at
    ``k_max`` prompts per pass (the most ``max_batch`` and the token budget let one prefill pass admit)."""
    ld, m, m_max = ctx["ld"], ctx["m"], ctx["m_max"]
    st = prep.stats
    bsz = di.batch
    budget = float(prep.scenario.token_budget)
    k_max = _mn(bsz, _mx(1.0, math.floor(budget / _mx(st.prompt_mean_tok, 1.0))))
    w = (k_max - 1.0) / _mx(bsz - 1.0, 1.0)
    pre_k = [p1 + w * (pr - p1) for p1, pr in zip(ld["pre1"], ld["pre_ref"])]
    (curve_p, _, _), _ = _mva([pre_k, pre_k, pre_k], m_max, (0, 0))  # the kernel takes three demand vectors
    pre_rate = _interp1(m, ctx["xp"], curve_p) * k_max if di.feasible else 0.0
    tau0, tau1 = ctx["taus"](m)  # the decode-only MVA of _solve at m batches, linear in the members
    return streams.StreamModel(streams.StreamInputs(
        m=m, b=bsz, steps_mean=float(st.decode_steps_mean), tau_b_s=tuple(ctx["tau_b"]), tau0_s=tau0, tau1_s=tau1,
        tau_1_s=tuple(ctx["tau_1"]),
        pre1_s=tuple(x for x in ld["pre1"] if x > 0.0), pre_rate_req_s=pre_rate, chunked=di.chunked,
        chunks_mean=di.chunk_extra + 1.0, arrivals_s=_arrival_span(prep), prompt_scv=ctx["ex"]["prompt_scv"],
        prompts_per_pass=k_max, handoff_s=_handoff_s(prep, ld["own_p"], di.d2d_gbps, di.pre_omega),
        pools=() if di.static_sched else _prefill_pools(ld)))


def _prefill_pools(ld: dict) -> tuple[tuple[float, float], ...]:
    """Elastic scheduling's prefill pools (``streams.StreamInputs.pools``): per chiplet type that prefills, its
    chiplets and its share of a lone prompt's pass, s."""
    per: dict[int, list[float]] = {}
    for x, t in zip(ld["pre1"], ld["st_type"]):
        if x > 0.0:
            per.setdefault(t, []).append(x)
    return tuple((float(len(v)), _pw(v)) for v in per.values())


def _handoff_s(prep: core.Prepared, owner: list[int], d2d_gbps: float, omega=None) -> float:
    """A mean prompt's activation hand-offs between chiplets along its prefill pass, s.

    The simulator adds ``hops·hop_latency + ½·io_bytes/link_bw`` to a block's task whenever it runs on another
    chiplet than the block before it (``engine``; the 10 ns hops are left out here). With the simulator's prefill
    Ω (``omega``, :func:`core.prefill_omega`) that is each block whose chiplet differs from the previous block's.
    Without it, from the estimator's Ω ``owner``: a pass changes chiplet at every change of block family and, inside
    a family's run of blocks, about once per further station its blocks are spread over (Ω keeps a run contiguous
    where it can): ``changes + Σ_f max(0, s_f − r_f)`` hand-offs, ``s_f`` the stations owning family ``f``'s blocks,
    ``r_f`` its runs. Llama-3-8B arXiv, 3 vs 16 prefill chiplets: 1.7 ms of a 2.6 s TTFT p90 simulated — small, but
    it orders designs that otherwise tie. The simulator's hop-aware mapping does not keep runs contiguous, so the
    count differs from the estimate's by design: inside the 256 GB/s designs that tie at Llama-3-8B arXiv's 2.57 s
    TTFT p90 at half load, its hand-off count orders the simulated TTFTs with Spearman 0.85 (the estimator's own
    Ω: 0.23); 400-request re-score, Llama-3-8B TTFT p90 mean 0.894 → 0.916."""
    changes, runs, io_s = _cached(("handoff",), lambda: _handoff_parts(prep), prep)
    if omega is not None:
        return sum(1 for a, b in zip(omega, omega[1:]) if a != b) * io_s / (d2d_gbps * 1e9)
    if not changes and not runs:
        return 0.0
    if len(runs) == 1:  # one family in one run (a pure model): a hand-off per further station
        extra = len(set(owner)) - 1
    else:
        fams = prep.families
        owned: dict[str, set] = {}
        for blk, st in enumerate(owner):
            owned.setdefault(fams[blk], set()).add(st)
        extra = sum(_mx(len(owned.get(f, ())) - r, 0) for f, r in runs.items())
    return (changes + extra) * io_s / (d2d_gbps * 1e9)


def _handoff_parts(prep: core.Prepared) -> tuple[int, dict[str, int], float]:
    """(family changes along the blocks, runs per family, ½ × the mean block's io bytes of a mean prompt)."""
    from hydra_opt.workload.cost import COST_FIELDS

    fams = prep.families
    runs: dict[str, int] = {}
    for i, f in enumerate(fams):
        if i == 0 or fams[i - 1] != f:
            runs[f] = runs.get(f, 0) + 1
    changes = sum(runs.values()) - 1 if fams else 0
    io = core.cap.block_costs(prep.coeffs, core.cap.prefill_agg(prep.stats, 1.0))[..., COST_FIELDS.index("io_bytes")]
    return changes, runs, 0.5 * float(np.mean(io))


def _arrival_span(prep: core.Prepared) -> tuple[float, float]:
    """The measured arrivals' span after the run's first arrival, s (the window's, cut at the horizon)."""
    w0, w1 = prep.window_s
    a0 = prep.first_arrival_s
    end = min(prep.horizon_s, w1) if math.isfinite(prep.horizon_s) else w1
    return max(w0 - a0, 0.0), max(end - a0, 0.0)


def _window_wait(prep: core.Prepared, lam: float, mu: float, scv: float, fill_s: float = 0.0) -> float:
    """Queueing delay of the requests a finite run measures, beyond the fluid's (``markov.window_wait_s``).

    A run starts empty, so near ``ρ = 1`` its requests wait far less than the stationary chain says (whose
    waiting room is cut at ``λ·t_end``: almost uniform there, a mean wait of ``t_end/2``). Over capacity the fluid
    run already holds the linear backlog ``(λ − μ)·t``; only the diffusion's excess over it is returned (the caller
    applies it to the requests that queue for a slot in the fluid run: when the run admits every request on arrival
    and sheds load by preemption instead, nobody waits at admission).

    No request can queue before the run's slots fill (``fill_s`` after the first arrival, from the run fluid): the
    queue starts empty there. Measured: a one-decode-chiplet Mamba-2 chat design at 2.2 req/s (ρ = 0.96 against its
    slot capacity, but 28 requests in a 15 s window fill 11 of its 64 slots) got a 4.9 s TTFT p90 (0.06 s
    simulated) and 0.07 s at 2.9 req/s, where the overload branch already read the fluid.
    """
    t0, t1 = _arrival_span(prep)
    if fill_s > 0.0 and fill_s >= t1:
        return 0.0
    lo = _mx(t0, fill_s)
    frac = (t1 - lo) / _mx(t1 - t0, 1e-300) if t1 > t0 else 1.0
    fluid = _mx(lam - mu, 0.0) * frac * (0.5 * (lo + t1) - fill_s) / _mx(mu, 1e-300)
    return _mx(frac * markov.window_wait_s(lam, mu, scv, lo - fill_s, t1 - fill_s) - fluid, 0.0)


def _stream_run(di: _Design, prep: core.Prepared, ctx: dict) -> dict:
    """Continuous and chunked batching: the two-stream model (``streams``), its window and its queue."""
    sm = _stream_model(di, prep, ctx)
    lam = prep.arrival_per_s
    out_tok = prep.stats.output_mean_tok
    mu_max = sm.capacity_req_s() if di.feasible else 0.0
    n_run = sm.running(lam)
    tpot = sm.pass_s(n_run, lam)
    pre_s = sm.prefill_s(lam)
    cap_tok = mu_max * out_tok
    rho = lam / _mx(mu_max, 1e-300) if mu_max > 0 else _INF
    over = rho >= 1.0 or not math.isfinite(rho)
    t_end = float(prep.horizon_s if np.isfinite(prep.horizon_s) else 2.0 * prep.window_s[1])
    run = streams.window_run(prep, sm, lam, pre_s, mu_max, t_end, spread=not di.mem_limited) if di.feasible else None
    thr = run.throughput_tok_s if run else 0.0
    q_pool = sm.open_prefill_s(lam) - sm.service_s
    own = bool(run and run.own_batch >= 0.5)

    def prefill_at(sc):
        return sm.prefill_at_s(lam, sc, own)

    if run and run.shared_s:  # the pools shared prompt by prompt (streams.WindowRun.shared_s), as the quantiles
        ttft = float(np.mean(run.shared_ttft_s(q_pool, prefill_at)))
    else:
        ttft = float(np.mean(run.ttft_s)) if run and run.ttft_s else _INF
    if run and run.tpot_s:
        tpot = float(np.mean(run.tpot_s))
    stat_thr, pi, wait = cap_tok if over else lam * out_tok, None, 0.0
    if di.feasible and lam > 0:
        scv = _extras(prep)["service_scv"]
        w_run = _window_wait(prep, lam, mu_max, scv, run.fill_s if run else 0.0)
        if over:  # the fluid run holds the linear backlog: the diffusion's excess, for requests that queue there
            if run and run.ttft_s:
                queued = sum(1 for t in run.ttft_s if t > pre_s * 1.01 + 1e-6)
                wait = w_run * queued / len(run.ttft_s)
        else:
            n_adm = int(max(1, round(sm.n_max)))
            ns = np.arange(1.0, n_adm + 1.0)
            mu_n = ns / (pre_s + sm.si.steps_mean * sm.pass_curve_s(ns, lam))  # n / life(n), one numpy pass
            mu_n[-1] = _mx(mu_n[-1], mu_max)
            mu_n = np.maximum.accumulate(mu_n)
            pi, stat_thr, queue = _chain(lam, mu_n, n_adm, t_end, 1.0, out_tok)
            wait = _mn(queue / lam * (1.0 + scv) / 2.0, w_run)
        if prep.scenario.ttft_from == "arrival" and math.isfinite(ttft):
            ttft += wait
    station = (q_pool, sm.station_wait_prob(lam))
    quant = (streams.latency_quantiles(run, prep.stats.prompt_tok, prefill_at, wait, station=station)
             if run else ([], []))
    return dict(thr=thr, ttft=ttft, tpot=tpot, cap_tok=cap_tok, mu_max=mu_max, rho=rho, pi=pi, stat_thr=stat_thr,
                wait=wait, conc=n_run / _mx(di.batch, 1.0), prefill_lat=pre_s, quantiles=quant,
                prefill_rate=sm.si.pre_rate_req_s)


def _result(di: _Design, prep: core.Prepared, ctx: dict, run: dict, demand: list[float], x_mva: float) -> Estimate:
    x, ld = ctx["x"], ctx["ld"]
    thr, ttft = run["thr"], run["ttft"]
    if not di.feasible:
        ttft, thr = _INF, 0.0
    rho = run["rho"]
    util = [dm * x for dm in demand]
    if not di.feasible:
        bottleneck = "infeasible"
    elif rho < 1.0:
        bottleneck = "arrivals"
    elif ctx["x_hbm"] < x_mva:
        bottleneck = "hbm"
    elif di.mem_limited and di.batches < ld["ns"]:
        bottleneck = "memory_capacity"
    else:
        k = int(np.argmax(util))
        bottleneck = f"compute:{di.names[ld['st_type'][k]]}"
    pi = run["pi"]
    diag = dict(
        pi=None if pi is None else np.round(pi[: int(np.searchsorted(np.cumsum(pi), 1.0 - 1e-9)) + 1], 12),
        pi_states=0 if pi is None else int(pi.size),
        rho=float(rho),
        regime="overload" if (rho >= 1.0 or not math.isfinite(rho)) else "stationary",
        stationary_throughput_tok_s=float(run["stat_thr"]),
        decode_concurrency=float(run["conc"]),
        mu_max_req_s=float(run["mu_max"]),
        cycles_per_s_pipeline=float(x_mva),
        cycles_per_s_hbm_cap=float(ctx["x_hbm"]),
        batches_in_flight=float(di.batches),
        prefill_latency_s=float(run["prefill_lat"]),
        queue_wait_s=float(run["wait"]),
        arrival_per_s=prep.arrival_per_s,
        window_s=list(prep.window_s),
        max_utilisation=float(max(util)) if util else 0.0,
    )
    if "prefill_rate" in run:
        diag["prefill_rate_req_s"] = float(run["prefill_rate"])
    if run.get("quantiles") and run["quantiles"][0]:
        diag["ttft_quantiles_s"], diag["tpot_quantiles_s"] = run["quantiles"]
    return Estimate(
        throughput_tok_s=float(thr),
        ttft_mean_s=float(ttft),
        tpot_mean_s=float(run["tpot"]),
        capacity_tok_s=float(run["cap_tok"]),
        bottleneck=bottleneck,
        diagnostics=diag,
    )


# ---------------------------------------------------------------------------------------------------------------
# Static batching fluid (fluid.batch_sequence / static_curves / static_ttft with D = 1)


def _batch_sequence(prep, ex, m_fl, b, a0, lam, pre_sum, pre_max, tau0, tau1, l1, e_l1, tau_b, t_end,
                    k_cap: int = 64, n_iter: int = 2, n_t: int = 96) -> dict:
    if _FAST_FLUID:
        surv, tg = _fluid_grids(prep, b, t_end, n_t)
        return _kernels.batch_sequence(prep.grid_k, prep.grid_emin, surv, tg, m_fl, b, a0, lam, pre_sum, pre_max,
                                       tau0, tau1, tau_b, t_end, k_cap, n_iter)
    m = _mx(math.floor(m_fl), 1.0)
    lam = _mx(lam, 1e-300)
    k_need = _kernels.batches_followed(lam, t_end, a0, b, k_cap)
    k_max = k_need
    gk_a, ge_a = prep.grid_k, prep.grid_emin
    full = _mx(tau0 + tau1 * b, 1e-300)
    w_of_k = (tau0 * gk_a + tau1 * b * ge_a) / full
    surv, tg = _fluid_grids(prep, b, t_end, n_t)
    tg_l = _cached(("tgl", t_end, n_t), lambda: tg.tolist())
    dt = tg[1] - tg[0]
    m_max = len(tau_b)
    curve = np.array(tau_b)
    curve_m1 = np.concatenate([[np.nan], curve])  # curve_m1[d] = τ_B(d), d = 1..m_max
    tau_m = tau_b[min(max(int(m) - 1, 0), m_max - 1)]
    g_rate = 1.0 / tau_m
    g_t = tg / tau_m
    gform = [a0 + ((i + 1.0) * b - 1.0) / lam for i in range(k_max)]
    t_last = tg_l[-1]
    lim = m - 1.0 + 1e-6
    idx = _cached(("idx", n_t), lambda: np.arange(n_t))
    for _ in range(n_iter):
        alive = np.zeros(n_t)
        form = [0.0] * k_max
        first = [0.0] * k_max
        gt_l = g_t.tolist()
        c_prev = -_INF
        p = 0  # first slot-free grid index found so far: live batches only grow, so it never moves back
        jf_sorted: list[int] = []  # formation grid index of every batch so far
        pend: list[tuple[int, int, float]] = []  # batches not yet added to ``alive``
        done: list[tuple[int, int, float]] = []
        for i in range(k_max):
            g = gform[i]
            j0 = bisect.bisect_left(tg_l, g)
            f = max(g, t_last)
            if j0 < n_t:
                j = p if p > j0 else j0
                while j < n_t:
                    # Each batch adds at most 1 to ``alive`` from its formation index on: with at most m − 1
                    # batches formed by grid point j the slot is free whatever their survival.
                    if bisect.bisect_right(jf_sorted, j) <= m - 1.0:
                        break
                    if pend:
                        alive = _add_batches(alive, pend, g_t, w_of_k, gk_a, surv, idx, ones=True)
                        pend = []
                    if alive[j] <= lim:
                        break
                    j += 1
                p = j
                if j < n_t:
                    f = g if j == j0 else tg_l[j]
            f = max(f, g)
            c = max(f + pre_sum, c_prev + pre_max)
            if i < k_need:
                g_c = _interp1(c, tg_l, gt_l) + max(c - t_last, 0.0) * g_rate
                ic = bisect.bisect_left(tg_l, c)
                jf = bisect.bisect_left(tg_l, f)
                bisect.insort(jf_sorted, jf)
                pend.append((ic, jf, g_c))
                done.append((ic, jf, g_c))
            form[i], first[i] = f, c
            c_prev = c
        dec_rows = [b for b in done if b[0] < n_t]
        dec = _add_batches(None, dec_rows, g_t, w_of_k, gk_a, surv, idx, ones=False) if dec_rows else np.zeros(n_t)
        # τ_B at the expected decoding batches (fluid.batch_sequence's interpolation on d = 1..m_max), then the
        # decode clock G(t) = ∫ dt / τ_B. dd ≥ 1, so truncation is the floor; curve[hi − 1] = curve[min(lo, m_max − 1)].
        dd = np.minimum(np.maximum(dec, 1.0), m_max)
        lo = dd.astype(np.int64)
        wgt = dd - lo
        tau_t = curve_m1[lo] * (1 - wgt) + curve[np.minimum(lo, m_max - 1)] * wgt
        g_t = np.empty(n_t)
        g_t[0] = 0.0
        np.cumsum(dt / tau_t[:-1], out=g_t[1:])
    return dict(form=form, first=first, t=tg, G=g_t, g_rate_end=1.0 / tau_m, w_of_k=w_of_k, k_used=k_need, lam=lam)


def _fluid_grids(prep, b, t_end, n_t) -> tuple[np.ndarray, np.ndarray]:
    """P(batch alive after K passes) on the order-statistics grid (as fluid.batch_sequence computes it) and the
    time grid; cached."""
    surv = _cached(("surv", b), lambda: (1.0 - prep.grid_cdf[None, :] ** np.array([b])[:, None])[0],
                   prep)
    return surv, _cached(("tg", t_end, n_t), lambda: np.linspace(0.0, t_end, n_t))


def _add_batches(acc, batches, g_t, w_of_k, gk, surv, idx, *, ones: bool) -> np.ndarray:
    """Add the batches' expected-live curves to ``acc`` one after another, in batch order (as
    ``fluid._sweep_one`` does batch by batch): ``a_i(t) = P(alive)`` from the prefill completion index ``ic`` on,
    and (``ones``) 1 from the formation index ``jf`` up to ``ic``. ``acc=None`` starts from the first batch."""
    ic = np.array([b[0] for b in batches])[:, None]
    gc = np.array([b[2] for b in batches])[:, None]
    a = _vinterp(_vinterp(np.maximum(g_t[None, :] - gc, 0.0), w_of_k, gk), gk, surv)
    if ones:
        jf = np.array([b[1] for b in batches])[:, None]
        rows = np.where(idx >= ic, a, np.where(idx >= jf, 1.0, 0.0))
    else:
        rows = np.where(idx >= ic, a, 0.0)
    if acc is not None:
        rows = np.concatenate([acc[None, :], rows])
    return np.add.reduce(rows, axis=0)  # row after row (a reduction over the leading axis is sequential)


def _static_curves(ex, seq, b, r_tok, feasible, w0, w1) -> tuple[float, float]:
    """Cumulative tokens at ``w0`` and ``w1`` of a static-batching batch sequence."""
    if type(seq) is _kernels.StaticSeq:
        return _kernels.static_curves(seq, ex["grid_k"], ex["grid_emin"], b, r_tok, feasible, w0, w1)
    if not feasible:
        return 0.0, 0.0
    tt = np.array([w0, w1])
    tg, g = seq["t"], seq["G"]
    rate = seq["g_rate_end"]
    first = np.array(seq["first"])
    g_t = _vinterp(tt, tg, g) + np.maximum(tt - tg[-1], 0.0) * rate
    g_c = _vinterp(first, tg, g) + np.maximum(first - tg[-1], 0.0) * rate
    w = np.maximum(g_t[None, :] - g_c[:, None], 0.0)
    gk, ge = np.asarray(ex["grid_k"]), np.asarray(ex["grid_emin"])
    ku = int(seq["k_used"])
    kk = _vinterp(w[:ku], seq["w_of_k"], gk)
    out = (b * ((tt[None, :] >= first[:ku, None]) + _vinterp(kk, gk, ge))).sum(axis=0)
    out += r_tok * np.maximum(tt - first[ku - 1], 0.0)
    return float(out[0]), float(out[1])


def _static_ttft(seq, b_f, a0, lam_raw, r_adm, pre_sum, feasible, t0, t1, horizon, from_) -> float:
    """Mean TTFT of the requests arriving in the window ``[t0, t1]`` under a static-batching batch sequence."""
    if type(seq) is _kernels.StaticSeq:
        return _kernels.static_ttft(seq, b_f, a0, r_adm, pre_sum, feasible, t0, t1, horizon, from_ == "arrival")
    if not feasible:
        return float("nan")
    lam = seq["lam"]
    k = int(seq["k_used"])
    first = np.array(seq["first"][:k])
    form = np.array(seq["form"][:k])
    b = int(round(b_f))
    n = np.arange(k * b)
    arr = a0 + n / lam
    bi = n // b
    tf = first[bi]
    start = arr if from_ == "arrival" else form[bi]
    sel = (arr >= t0) & (arr <= t1) & (tf <= horizon)
    parts = [tf[sel] - start[sel]]
    n_last = k * b
    if r_adm > 0 and a0 + n_last / lam <= t1:
        n2 = np.arange(n_last, int(min(lam * (t1 - a0) + 1, n_last + 20000)))
        arr2 = a0 + n2 / lam
        tf2 = np.maximum(first[-1] + (n2 - n_last + 1) / r_adm, arr2 + pre_sum)
        start2 = arr2 if from_ == "arrival" else tf2 - pre_sum
        sel2 = (arr2 >= t0) & (tf2 <= horizon)
        parts.append(tf2[sel2] - start2[sel2])
    vals = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return float(np.mean(vals)) if vals.size else float("nan")


# ---------------------------------------------------------------------------------------------------------------


def estimate_one(design, prep: core.Prepared, opts: EstimatorOptions, library=None) -> Estimate:
    """The estimate of one design on a prepared workload."""
    di = _design(design, prep, opts, library or core._library())
    if di is None:
        raise ValueError("the design has no compute chiplet")
    return _solve(di, prep, opts)


def estimate(design, model, workload, *, scenario: Scenario | None = None,
             options: EstimatorOptions | None = None) -> Estimate:
    """Estimate throughput, TTFT and TPOT of one design serving ``workload`` with ``model`` (HYDRA §V).

    Args:
        design: A ``hydra_opt.system.design.DesignPoint`` (or a design YAML path).
        model: A ``hydra_opt.workload.models.Model`` (or a name/path).
        workload: A ``hydra_opt.workload.workload.Workload`` (or a name/path).
        scenario: The run (``hydra_opt.evaluate.scenario.Scenario``; the simulator reads the same one).
        options: :class:`EstimatorOptions` (model knobs).
    """
    opts = options or EstimatorOptions()
    scn = scenario or Scenario()
    design, model, workload = core.resolve(design, model, workload)
    prep = core.prepare(model, workload, scenario=scn, options=opts, precision=getattr(design, "precision", None))
    return estimate_one(design, prep, opts, library=scn.library())
