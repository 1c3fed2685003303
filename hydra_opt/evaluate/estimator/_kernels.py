# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The estimator solver's scalar kernels, compiled with Cython when available (docs/estimator.md "Speed").

``single.py`` is the solver; this module holds the loops it spends its time in, written so that the same source
runs as pure Python (the fallback) and compiles, with the C types of ``_kernels.pxd``, to C doubles and integers
doing exactly the same IEEE-754 operations in the same order (the build passes ``-ffp-contract=off``: no fused
multiply-add). numpy's reductions and ``interp`` are reproduced exactly (``pairwise_sum``, ``interp_scalar``).

* **Always used**: the LPT mapping Ω (``lpt``), the per-station loads and the exact MVA (``mva``): pure-Python
  scalar code either way.
* **Used when compiled** (``COMPILED``): the static-batching fluid (``batch_sequence``, ``static_curves``,
  ``static_ttft``) as scalar loops over the time grid. Pure Python keeps ``single.py``'s numpy version of the same
  arithmetic (scalar loops are slower than numpy there); ``tests/test_estimator_speedpath.py`` checks the two
  agree bit for bit in either build.
"""

from __future__ import annotations

import math
from array import array

try:
    import cython

    COMPILED = bool(cython.compiled)
except ImportError:  # pragma: no cover - Cython is a build requirement only
    COMPILED = False

__all__ = ["COMPILED", "pairwise_sum", "interp_scalar", "lpt", "lpt_order", "station_loads", "mva",
           "StaticSeq", "batches_followed", "batch_sequence", "static_curves", "static_ttft", "birth_death_product"]

_INF = float("inf")


def _zeros(n: int) -> array:
    return array("d", [0.0]) * n


# ---------------------------------------------------------------------------------------------------------------
# numpy's reductions, reproduced exactly


def _pw_range(xs, lo: int, n: int) -> float:
    """numpy's pairwise sum (8 lanes, blocks of 128) of ``xs[lo:lo + n]``."""
    if n < 8:
        res = -0.0
        for i in range(lo, lo + n):
            res += xs[i]
        return res
    if n <= 128:
        r0 = xs[lo]
        r1 = xs[lo + 1]
        r2 = xs[lo + 2]
        r3 = xs[lo + 3]
        r4 = xs[lo + 4]
        r5 = xs[lo + 5]
        r6 = xs[lo + 6]
        r7 = xs[lo + 7]
        i = 8
        stop = n - n % 8
        while i < stop:
            p = lo + i
            r0 += xs[p]
            r1 += xs[p + 1]
            r2 += xs[p + 2]
            r3 += xs[p + 3]
            r4 += xs[p + 4]
            r5 += xs[p + 5]
            r6 += xs[p + 6]
            r7 += xs[p + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            res += xs[lo + i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_range(xs, lo, n2) + _pw_range(xs, lo + n2, n - n2)


def pairwise_sum(xs: list) -> float:
    """``np.sum`` of a contiguous float64 vector, reproduced exactly (numpy's pairwise summation, 8 lanes)."""
    return _pw_range(array("d", xs), 0, len(xs))


def interp_scalar(x: float, xp: list, fp: list) -> float:
    """``np.interp`` at one point, reproduced exactly (same bracketing, slope formula and NaN fallbacks)."""
    if x != x:
        return x
    if x < xp[0]:
        return fp[0]
    n = len(xp)
    if x >= xp[n - 1]:
        return fp[n - 1]
    lo, hi = 0, n  # bisect.bisect_right(xp, x) - 1: the last j with xp[j] <= x
    while lo < hi:
        mid = (lo + hi) // 2
        if x < xp[mid]:
            hi = mid
        else:
            lo = mid + 1
    j = lo - 1
    if x == xp[j]:
        return fp[j]
    return _lin(x, xp[j], xp[j + 1], fp[j], fp[j + 1], (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]))


def _lin(x: float, x0: float, x1: float, f0: float, f1: float, slope: float) -> float:
    """numpy ``interp``'s step inside a bracket ``[x0, x1)``: from the left end, else (NaN) from the right end,
    else (NaN with equal ends) the left value."""
    r = slope * (x - x0) + f0
    if r != r:
        r = slope * (x - x1) + f1
        if r != r and f0 == f1:
            r = f0
    return r


def _bracket(x: float, xp, n: int, j: int) -> int:
    """The last ``i`` with ``xp[i] ≤ x`` for ``xp[0] ≤ x < xp[n − 1]``, searched forward from ``j`` (inputs that
    grow along a time grid), else by bisection."""
    if j < 0 or j >= n - 1 or xp[j] > x:
        lo, hi = 0, n - 1  # xp[lo] ≤ x < xp[hi]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if xp[mid] <= x:
                lo = mid
            else:
                hi = mid
        return lo
    while xp[j + 1] <= x:
        j += 1
    return j


def _interp_at(x: float, xp, fp, n: int, j: int) -> float:
    """``np.interp(x, xp[:n], fp[:n])`` given ``j = _bracket(...)`` (valid only for ``xp[0] ≤ x < xp[n − 1]``)."""
    if x == xp[j]:
        return fp[j]
    return _lin(x, xp[j], xp[j + 1], fp[j], fp[j + 1], (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]))


def _outside(x: float, xp, fp, n: int) -> float:
    """``np.interp`` where ``x`` is not inside ``[xp[0], xp[n − 1])``: NaN passes, the tails are flat."""
    if x != x:
        return x
    return fp[0] if x < xp[0] else fp[n - 1]


def _interp(x: float, xp, fp, n: int) -> float:
    """``np.interp`` at one point on buffers of length ``n``."""
    if x == x and xp[0] <= x < xp[n - 1]:
        return _interp_at(x, xp, fp, n, _bracket(x, xp, n, -1))
    return _outside(x, xp, fp, n)


def _mn(a: float, b: float) -> float:
    """``np.minimum`` of two floats (NaN-propagating)."""
    return a if (a <= b or a != a) else b


def _mx(a: float, b: float) -> float:
    """``np.maximum`` of two floats (NaN-propagating)."""
    return a if (a >= b or a != a) else b


def _pymax(a: float, b: float) -> float:
    """Python's ``max(a, b)``: ``b`` only if it compares greater."""
    return b if b > a else a


# ---------------------------------------------------------------------------------------------------------------
# Ω (LPT), station loads, MVA


def lpt_order(ref: list, nb: int) -> list:
    """Blocks by decreasing fastest eligible time (ineligible everywhere counts as 0), stable."""
    key = []
    for blk in range(nb):
        f = _INF
        for col in ref:
            v = col[blk]
            if v < f:
                f = v
        key.append(f if f != _INF else 0.0)
    return sorted(range(nb), key=lambda j: -key[j])


def lpt(ref: list, ranges: list, nb: int, ns: int, order: list | None = None) -> list:
    """``capacities.assign_blocks`` for stations grouped by type (identical columns inside a type).

    Same greedy and tie-breaking: blocks by decreasing fastest eligible time (stable), each to the first station
    with the smallest ``load + time``. Inside a type that is the least-loaded station, unless an earlier one's load
    differs by less than the rounding of the sum (then the exact comparison decides, as the reference does).
    """
    if order is None:
        order = lpt_order([ref[k] for _, _, k in ranges], nb)
    loads = _zeros(ns)
    owner = [0] * nb
    ng = len(ranges)
    g0 = [rg[0] for rg in ranges]
    g1 = [rg[1] for rg in ranges]
    gcol = [ref[rg[2]] for rg in ranges]
    for blk in order:
        best, bv, br = -1, _INF, _INF
        for g in range(ng):
            s0 = g0[g]
            s1 = g1[g]
            r = gcol[g][blk]
            if r == _INF:
                i, v = s0, _INF
            else:
                lmin = loads[s0]
                i = s0
                for s in range(s0 + 1, s1):
                    if loads[s] < lmin:
                        lmin = loads[s]
                        i = s
                v = lmin + r
                if i > s0:
                    tol = lmin + 2.0 * math.ulp(v)
                    for s in range(s0, i):
                        if loads[s] <= tol:  # an earlier station within rounding: the exact sum decides
                            for s2 in range(s0, i):
                                if loads[s2] + r == v:
                                    i = s2
                                    break
                            break
            if best < 0 or v < bv:
                best, bv, br = i, v, r
        if br != _INF:
            loads[best] += br
        owner[blk] = best
    return owner


def station_loads(owner: list, cols: list, qs: tuple, st_type: list, ns: int):
    """Per-station sums of the owned blocks' (finite) times for three columns, in block order (the array path's
    sum over blocks is sequential, and adding its zeros changes nothing)."""
    qa = qs[0]
    qb = qs[1]
    qc = qs[2]
    out_a, out_b, out_c = _zeros(ns), _zeros(ns), _zeros(ns)
    a = out_a
    b = out_b
    c = out_c
    for blk in range(len(owner)):
        s = owner[blk]
        col = cols[st_type[s]]
        v = col[qa][blk]
        if v - v == 0.0:  # finite
            a[s] += v
        v = col[qb][blk]
        if v - v == 0.0:
            b[s] += v
        v = col[qc][blk]
        if v - v == 0.0:
            c[s] += v
    return out_a.tolist(), out_b.tolist(), out_c.tolist()


def mva(demands: list, m_max: int, rows_needed: tuple):
    """Exact MVA of three demand vectors: X(n) for n = 1..m_max per vector, and curve 0's queue rows.

    Same recursion and summation order as the array version (``R_s = D_s(1 + Q_s)``, ``X = n / ΣR_s`` with
    numpy's pairwise sum, ``Q_s = X·R_s``). Stations with the same demands (a type's chiplets that got the same
    blocks) have the same ``R_s`` and ``Q_s``, so they are computed once and only the sum runs over every station.
    """
    dl0, dl1, dl2 = demands
    ns = len(dl0)
    smap = array("q", [0]) * ns
    # Distinct (D0, D1, D2) rows in first-seen order (what a dict of the tuples gives).
    u0, u1, u2 = _zeros(ns), _zeros(ns), _zeros(ns)
    nu = 0
    for s in range(ns):
        a0 = dl0[s]
        a1 = dl1[s]
        a2 = dl2[s]
        k = 0
        while k < nu:
            if u0[k] == a0 and u1[k] == a1 and u2[k] == a2:
                break
            k += 1
        if k == nu:
            u0[k] = a0
            u1[k] = a1
            u2[k] = a2
            nu += 1
        smap[s] = k
    d = _zeros(nu)
    q = _zeros(nu)
    r = _zeros(nu)
    full = _zeros(ns)
    curves = []
    qrows: dict = {}
    r0 = rows_needed[0]
    r1 = rows_needed[1]
    for c in range(len(demands)):
        src = u0 if c == 0 else (u1 if c == 1 else u2)
        for k in range(nu):
            d[k] = src[k]
            q[k] = 0.0
        if c == 0:
            qrows[0] = [0.0] * ns
        xs = []
        for n in range(1, m_max + 1):
            for k in range(nu):
                r[k] = d[k] * (1.0 + q[k])
            for s in range(ns):
                full[s] = r[smap[s]]
            tot = _pw_range(full, 0, ns)
            x = n / (tot if tot >= 1e-300 or tot != tot else 1e-300)
            for k in range(nu):
                q[k] = x * r[k]
            xs.append(x)
            if c == 0 and (n == r0 or n == r1):
                qrows[n] = [q[smap[s]] for s in range(ns)]
        curves.append(xs)
    return curves, qrows


# ---------------------------------------------------------------------------------------------------------------
# Static-batching fluid as scalar loops (single._batch_sequence / _static_curves / _static_ttft, bit for bit)


class StaticSeq:
    """A static-batching batch sequence (``batch_sequence``): formation times ``form``, prefill completions
    ``first``, the decode clock ``g`` = G(t) on the time grid ``tg`` and its rate after the grid, ``w_of_k``, the
    batches followed ``k_used`` and the arrival rate ``lam``."""


def _slopes(xp, fp, n: int, out) -> None:
    """numpy ``interp``'s precomputed slopes ``(fp[j+1] − fp[j]) / (xp[j+1] − xp[j])`` (only brackets with
    ``xp[j] < xp[j+1]`` are ever used)."""
    for j in range(n - 1):
        dx = xp[j + 1] - xp[j]
        out[j] = (fp[j + 1] - fp[j]) / dx if dx > 0.0 else 0.0


def _interp_sl(x: float, xp, fp, sl, j: int) -> float:
    """``_interp_at`` with the slope taken from numpy's precomputed table (the same division)."""
    if x == xp[j]:
        return fp[j]
    return _lin(x, xp[j], xp[j + 1], fp[j], fp[j + 1], sl[j])


def _near(x: float, xp, n: int, j: int) -> int:
    """The bracket of ``x`` in ``xp`` from the hint ``j`` when ``x`` lies inside ``[xp[0], xp[n−1])``, else ``j``."""
    if x == x and xp[0] <= x < xp[n - 1]:
        return _bracket(x, xp, n, j)
    return j


def _tail_interp(x: float, xp, fp, sl, n: int, j: int) -> float:
    """``np.interp(x, xp, fp)`` with ``x``'s bracket ``j`` (from :func:`_near`) and the slopes ``sl``."""
    if x == x and xp[0] <= x < xp[n - 1]:
        return _interp_sl(x, xp, fp, sl, j)
    return _outside(x, xp, fp, n)


def _batch_curve(acc, acc2, g_t, gc: float, ic: int, n_t: int, w_of_k, gk, surv, sl1, sl2, ng: int) -> None:
    """Add one batch's expected-live curve ``P(alive)`` (from its prefill completion index ``ic`` on) to ``acc``
    and ``acc2``: ``interp(interp(max(G(t) − G(c), 0), w_of_k, gk), gk, surv)``."""
    j1 = -1
    j2 = -1
    for j in range(ic, n_t):
        x = _mx(g_t[j] - gc, 0.0)
        j1 = _near(x, w_of_k, ng, j1)
        k = _tail_interp(x, w_of_k, gk, sl1, ng, j1)
        j2 = _near(k, gk, ng, j2)
        a = _tail_interp(k, gk, surv, sl2, ng, j2)
        acc[j] += a
        acc2[j] += a


def batches_followed(lam: float, t_end: float, a0: float, b: float, k_cap: int) -> int:
    """Batches whose last member arrives within the grid (fluid.batch_sequence's ``k_need``; NaN only from
    degenerate input), at most ``k_cap``."""
    need = lam * _mx(t_end - a0, 0.0) / _mx(b, 1.0)
    if need != need:
        return 1
    if math.isinf(need):
        return k_cap
    return int(max(min(math.ceil(need) + 1, k_cap), 1))


def batch_sequence(gk, ge, surv, tg, m_fl: float, b: float, a0: float, lam: float, pre_sum: float,
                   pre_max: float, tau0: float, tau1: float, tau_b: list, t_end: float, k_cap: int = 64,
                   n_iter: int = 2) -> StaticSeq:
    """``single._batch_sequence`` (numpy over the time grid) as scalar loops; same operations, same order.

    ``gk``/``ge``/``surv`` are the order-statistics grid (``K``, ``E[min(S, K)]``, ``P(alive after K)``) and ``tg``
    the time grid, as float64 buffers. Every batch's live curve is added to the live count and the decode count as
    soon as the batch forms (the numpy version adds them in the same batch order, lazily; the sums are equal).
    """
    n_t = len(tg)
    ng = len(gk)
    m = _mx(float(math.floor(m_fl)), 1.0)
    lam = _mx(lam, 1e-300)
    k_need = batches_followed(lam, t_end, a0, b, k_cap)
    k_max = k_need
    m_max = len(tau_b)
    # One buffer for every vector (one allocation): w_of_k, the two slope tables, G, live and decoding batches,
    # formation and prefill-completion times, τ_B(d).
    buf = memoryview(_zeros(4 * ng + 3 * n_t + 2 * k_max + m_max))
    w_of_k = buf[0:ng]
    sl1 = buf[ng:2 * ng]
    sl2 = buf[2 * ng:3 * ng]
    g_t = buf[4 * ng:4 * ng + n_t]
    alive = buf[4 * ng + n_t:4 * ng + 2 * n_t]
    dec = buf[4 * ng + 2 * n_t:4 * ng + 3 * n_t]
    form = buf[4 * ng + 3 * n_t:4 * ng + 3 * n_t + k_max]
    first = buf[4 * ng + 3 * n_t + k_max:4 * ng + 3 * n_t + 2 * k_max]
    curve = buf[4 * ng + 3 * n_t + 2 * k_max:4 * ng + 3 * n_t + 2 * k_max + m_max]
    full = _mx(tau0 + tau1 * b, 1e-300)
    tb = tau1 * b
    for i in range(ng):
        w_of_k[i] = (tau0 * gk[i] + tb * ge[i]) / full
    _slopes(w_of_k, gk, ng, sl1)
    _slopes(gk, surv, ng, sl2)
    dt = tg[1] - tg[0]
    for i in range(m_max):
        curve[i] = tau_b[i]
    tau_m = curve[min(max(int(m) - 1, 0), m_max - 1)]
    g_rate = 1.0 / tau_m
    for j in range(n_t):
        g_t[j] = tg[j] / tau_m
    t_last = tg[n_t - 1]
    lim = m - 1.0 + 1e-6
    jfs = array("q", [0]) * k_max
    for _ in range(n_iter):
        for j in range(n_t):
            alive[j] = 0.0
            dec[j] = 0.0
        c_prev = -_INF
        p = 0  # first slot-free grid index found so far: live batches only grow, so it never moves back
        for i in range(k_max):
            g = a0 + ((i + 1.0) * b - 1.0) / lam
            j0 = _bisect_left(tg, n_t, g)
            f = _pymax(g, t_last)
            if j0 < n_t:
                j = p if p > j0 else j0
                while j < n_t:
                    # Each batch adds at most 1 from its formation index on: with at most m − 1 batches formed by
                    # grid point j the slot is free whatever their survival.
                    cnt = 0
                    for q in range(i):
                        if jfs[q] <= j:
                            cnt += 1
                    if cnt <= m - 1.0:
                        break
                    if alive[j] <= lim:
                        break
                    j += 1
                p = j
                if j < n_t:
                    f = g if j == j0 else tg[j]
            f = _pymax(f, g)
            c = _pymax(f + pre_sum, c_prev + pre_max)
            g_c = _interp(c, tg, g_t, n_t) + _pymax(c - t_last, 0.0) * g_rate
            ic = _bisect_left(tg, n_t, c)
            jf = _bisect_left(tg, n_t, f)
            jfs[i] = jf
            for jj in range(jf, ic if ic < n_t else n_t):
                alive[jj] += 1.0
            _batch_curve(alive, dec, g_t, g_c, ic, n_t, w_of_k, gk, surv, sl1, sl2, ng)
            form[i] = f
            first[i] = c
            c_prev = c
        # τ_B at the expected decoding batches (interpolated on d = 1..m_max), then G(t) = ∫ dt / τ_B (cumsum).
        acc = 0.0
        g_t[0] = 0.0
        for j in range(n_t - 1):
            dd = _mn(_mx(dec[j], 1.0), float(m_max))
            lo = int(dd)
            wgt = dd - lo
            hi = lo if lo < m_max - 1 else m_max - 1
            tau_t = curve[lo - 1] * (1 - wgt) + curve[hi] * wgt
            acc += dt / tau_t
            g_t[j + 1] = acc
    seq = StaticSeq.__new__(StaticSeq)
    seq.form = form
    seq.first = first
    seq.tg = tg
    seq.g = g_t
    seq.g_rate_end = 1.0 / tau_m
    seq.w_of_k = w_of_k
    seq.k_used = k_need
    seq.lam = lam
    seq.n_t = n_t
    return seq


def _bisect_left(xs, n: int, x: float) -> int:
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if xs[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def static_curves(seq: StaticSeq, gk, ge, b: float, r_tok: float, feasible: bool, w0: float, w1: float):
    """Cumulative tokens at ``w0`` and ``w1`` of a static-batching batch sequence (``single._static_curves``)."""
    if not feasible:
        return 0.0, 0.0
    n_t = seq.n_t
    ng = len(gk)
    tg = seq.tg
    g = seq.g
    first = seq.first
    w_of_k = seq.w_of_k
    rate = seq.g_rate_end
    ku = seq.k_used
    t_last = tg[n_t - 1]
    o0 = 0.0
    for x in range(2):
        tt = w0 if x == 0 else w1
        g_tt = _interp(tt, tg, g, n_t) + _mx(tt - t_last, 0.0) * rate
        acc = 0.0
        for i in range(ku):
            fi = first[i]
            g_c = _interp(fi, tg, g, n_t) + _mx(fi - t_last, 0.0) * rate
            kk = _interp(_mx(g_tt - g_c, 0.0), w_of_k, gk, ng)
            v = b * ((1.0 if tt >= fi else 0.0) + _interp(kk, gk, ge, ng))
            acc = v if i == 0 else acc + v
        acc = acc + r_tok * _mx(tt - first[ku - 1], 0.0)
        if x == 0:
            o0 = acc
    return o0, acc


def static_ttft(seq: StaticSeq, b_f: float, a0: float, r_adm: float, pre_sum: float, feasible: bool, t0: float,
                t1: float, horizon: float, from_arrival: bool) -> float:
    """Mean TTFT of the requests arriving in ``[t0, t1]`` under a static batch sequence (``single._static_ttft``)."""
    if not feasible:
        return float("nan")
    lam = seq.lam
    k = seq.k_used
    first = seq.first
    form = seq.form
    b = int(round(b_f))
    n_last = k * b
    n_hi = n_last
    extra = r_adm > 0 and a0 + n_last / lam <= t1
    if extra:
        n_hi = int(min(lam * (t1 - a0) + 1, n_last + 20000))
        if n_hi < n_last:
            n_hi = n_last
    vals = _zeros(n_hi if n_hi > 0 else 1)
    nv = 0
    for n in range(n_last):
        arr = a0 + n / lam
        bi = n // b
        tf = first[bi]
        if arr >= t0 and arr <= t1 and tf <= horizon:
            vals[nv] = tf - (arr if from_arrival else form[bi])
            nv += 1
    if extra:
        f_last = first[k - 1]
        for n in range(n_last, n_hi):
            arr = a0 + n / lam
            tf = _mx(f_last + (n - n_last + 1) / r_adm, arr + pre_sum)
            if arr >= t0 and tf <= horizon:
                vals[nv] = tf - (arr if from_arrival else tf - pre_sum)
                nv += 1
    if nv == 0:
        return float("nan")
    return _pw_range(vals, 0, nv) / nv


# ---------------------------------------------------------------------------------------------------------------
# The occupancy chain's stationary distribution (markov.birth_death_stationary, compiled builds)


def birth_death_product(b, d, out) -> None:
    """``π_n ∝ Π_{i<n} b_i/d_i`` into ``out`` (``len(b) + 1`` states), normalised, in log space (detailed balance
    of a birth–death chain; the same arithmetic as ``markov.birth_death_stationary``'s numpy path up to the
    library's ``exp``/``log`` last bits)."""
    n = len(b)
    acc = 0.0
    top = 0.0
    out[0] = 0.0
    for i in range(n):
        acc += math.log(_mx(b[i], 1e-300)) - math.log(_mx(d[i], 1e-300))
        out[i + 1] = acc
        if acc > top:
            top = acc
    for i in range(n + 1):
        out[i] = math.exp(out[i] - top)
    tot = _pw_range(out, 0, n + 1)
    for i in range(n + 1):
        out[i] = out[i] / tot
