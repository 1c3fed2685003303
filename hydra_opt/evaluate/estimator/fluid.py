"""Fluid model of the batch slots over a finite run (HYDRA §V-C "fluid-queue model"), numpy over designs.

When requests arrive faster than the system serves them (the paper's 100 req/s replay), no stationary regime
exists within a run: what the measurement window sees is the *transient* of the ``m`` batch slots the pipeline
holds. Each slot is followed as a fluid (expected values), with slot ``i``'s life:

1. **Formation**: its ``B``-th member arrives at ``f_i = a0 + i·B/λ`` (FCFS; continuous batching starts a batch
   with whatever is waiting, the same in overload).
2. **Prefill**: the slots' prefill passes go through the prefill pipeline as a flow shop of identical jobs:
   ``C_i = max(f_i + ΣD_P, C_{i−1} + max D_P)`` (one pass alone takes the sum of its stage loads ``ΣD_P``; the
   pipeline releases one every bottleneck-stage time ``max D_P``). ``B`` first tokens are emitted at ``C_i``.
3. **Decode**: all slots decode concurrently; with ``m`` batches sharing the decode stations one pass of a batch
   takes ``τ(a) = m / X_MVA(m)`` at ``a`` members, linear in ``a`` (``τ0 + τ1·a``). Static batching loses members
   as they finish: after ``K`` passes the batch has emitted ``B·E[min(S, K)]`` tokens and spent
   ``T(K) = τ0·K + τ1·B·E[min(S, K)]`` seconds, until its longest member ends at ``E[max of B]`` passes. Continuous
   batching refills, so a slot emits ``B`` tokens per pass at the steady-state pass rate.
4. **Renewal**: after its first cycle a slot continues at the steady-state (renewal-reward) rates of the closed
   pipeline (MVA over the whole cycle): tokens ``r_tok`` and first tokens ``r_adm`` per second.

Cumulative token and first-token curves follow; throughput is the token increase over the measurement window and
TTFT maps each FCFS request to the time the first-token curve reaches its index (only requests whose first token
comes before the horizon count, as in the simulator).
"""

from __future__ import annotations

import numpy as np

__all__ = ["FluidInputs", "slot_curves", "window_throughput", "fcfs_ttft", "emin_curve"]


def cdf_on(steps: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Empirical ``P(S ≤ K)`` at the grid points."""
    s = np.sort(np.asarray(steps, dtype=np.float64))
    return np.searchsorted(s, grid, side="right") / max(s.size, 1)


def emin_curve(steps: np.ndarray, n_points: int = 96) -> tuple[np.ndarray, np.ndarray]:
    """Grid ``K`` and ``E[min(S, K)]`` of the decode-step distribution (exact at the grid points).

    The grid holds 0, quantiles of ``S`` and its maximum; ``E[min(S, K)]`` is piecewise linear between support
    points, so linear interpolation on the grid is exact at the nodes and close elsewhere.
    """
    s = np.sort(np.asarray(steps, dtype=np.float64))
    grid = np.unique(np.concatenate([[0.0], np.quantile(s, np.linspace(0, 1, n_points)), [s[-1]]]))
    csum = np.concatenate([[0.0], np.cumsum(s)])
    idx = np.searchsorted(s, grid, side="right")  # number of samples ≤ K
    below = csum[idx]
    emin = (below + grid * (s.size - idx)) / s.size
    return grid, emin


class FluidInputs:
    """Per-design scalars the fluid needs (each an array over designs)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def slot_curves(fi: FluidInputs, t: np.ndarray, *, admissions: bool = False):
    """Cumulative tokens ``N(t)`` and first tokens ``F(t)`` of all slots at times ``t`` (designs × times).

    With ``admissions=True`` also the cumulative admissions ``A(t)`` (requests whose batch has started): the
    first cohort is admitted at formation, later ones one prefill latency before their first token.

    Args:
        fi: Fields (arrays over designs ``D``): ``m`` (slots, ≥ 0), ``B`` (members), ``a0``, ``lam``,
            ``pre_sum``, ``pre_max`` (s), ``tau0``, ``tau1`` (s per pass, s per pass per member), ``static``
            (bool), ``l1`` (E[max steps of B]), ``r_tok``, ``r_adm`` (steady-state rates, per second, all slots),
            ``grid_k``, ``grid_emin`` (1-D, shared), ``feasible``.
        t: ``(T,)`` or ``(D, T)`` times, s.
    """
    m_max = int(np.ceil(np.max(fi.m))) if np.size(fi.m) else 0
    m_max = max(m_max, 1)
    d = np.size(fi.m)
    i = np.arange(1, m_max + 1, dtype=np.float64)[None, :]  # (1, M)
    live = i <= np.floor(fi.m)[:, None] + 1e-9  # (D, M)
    b = fi.B[:, None]
    form = fi.a0[:, None] + i * b / np.maximum(fi.lam, 1e-300)  # f_i
    # Flow shop: C_i = i·pmax + max_{j≤i}(f_j + psum − j·pmax).
    pmax = fi.pre_max[:, None]
    c = i * pmax + np.maximum.accumulate(form + fi.pre_sum[:, None] - i * pmax, axis=1)
    tt = np.broadcast_to(np.asarray(t, dtype=np.float64), (d, np.shape(t)[-1]))[:, None, :]  # (D,1,T)
    since = np.maximum(tt - c[:, :, None], 0.0)  # decode time since prefill completion (D,M,T)
    started = tt >= c[:, :, None]
    # Static: invert T(K) = τ0·K + τ1·B·E[min(S,K)] on the shared K grid, per design.
    gk, ge = fi.grid_k, fi.grid_emin
    t_of_k = fi.tau0[:, None] * gk[None, :] + fi.tau1[:, None] * fi.B[:, None] * ge[None, :]  # (D, G)
    l1 = fi.l1
    t_cycle = fi.tau0 * l1 + fi.tau1 * fi.B * np.interp(l1, gk, ge)  # decode time of the first cycle
    n_first = np.empty_like(since)
    for k in range(d):  # small loop over designs; inner interpolation vectorised over slots × times
        kk = np.interp(np.minimum(since[k], t_cycle[k]), t_of_k[k], gk)
        n_first[k] = np.interp(kk, gk, ge)
    per_slot_rate_tok = (fi.r_tok / np.maximum(fi.m, 1e-300))[:, None, None]
    per_slot_rate_adm = (fi.r_adm / np.maximum(fi.m, 1e-300))[:, None, None]
    after = np.maximum(since - t_cycle[:, None, None], 0.0)
    static = fi.static[:, None, None]
    bb = b[:, :, None]
    tok_static = bb * started + bb * n_first + per_slot_rate_tok * after
    adm_static = bb * started + per_slot_rate_adm * after
    tok_cont = bb * started + per_slot_rate_tok * since
    adm_cont = bb * started + per_slot_rate_adm * since
    tok = np.where(static, tok_static, tok_cont) * live[:, :, None]
    adm = np.where(static, adm_static, adm_cont) * live[:, :, None]
    ok = fi.feasible[:, None]
    n_out = np.where(ok, tok.sum(axis=1), 0.0)
    f_out = np.where(ok, adm.sum(axis=1), 0.0)
    if not admissions:
        return n_out, f_out
    formed = tt >= form[:, :, None]
    lead = fi.pre_sum[:, None, None]
    since_a = np.maximum(tt + lead - c[:, :, None], 0.0)
    after_a = np.maximum(since_a - t_cycle[:, None, None], 0.0)
    a_static = bb * formed + per_slot_rate_adm * after_a
    a_cont = bb * formed + per_slot_rate_adm * since_a
    a = np.where(static, a_static, a_cont) * live[:, :, None]
    return n_out, f_out, np.where(ok, a.sum(axis=1), 0.0)


def window_throughput(fi: FluidInputs, t0: float, t1: float) -> np.ndarray:
    """Tokens emitted in ``(t0, t1]`` per second of the window, per design."""
    n, _ = slot_curves(fi, np.array([t0, t1]))
    return (n[:, 1] - n[:, 0]) / max(t1 - t0, 1e-300)


def fcfs_ttft(
    fi: FluidInputs, t0: float, t1: float, horizon: float, n_grid: int = 128, *, from_: str = "arrival"
) -> np.ndarray:
    """Mean TTFT (s) of requests arriving in ``[t0, t1]`` whose first token comes by ``horizon`` (FCFS fluid).

    Request ``n`` (arrival ``a0 + n/λ``) gets its first token when the first-token curve ``F`` reaches ``n``
    (``from_="arrival"``: TTFT from its arrival; ``"batch_start"``: from when the admission curve reached ``n``).
    NaN when no such request exists (the simulator then reports no TTFT either).
    """
    lam = np.asarray(fi.lam, dtype=np.float64)
    d = lam.size
    h = horizon if np.isfinite(horizon) else None
    t_end = h if h is not None else t1 + 50.0 * max(t1, 1.0)
    tg = np.linspace(0.0, t_end, n_grid * 4)
    _, f, adm = slot_curves(fi, tg, admissions=True)  # (D, T) non-decreasing
    out = np.full(d, np.nan)
    for k in range(d):
        n_lo = lam[k] * (t0 - fi.a0[k])
        n_hi = lam[k] * (t1 - fi.a0[k])
        if not np.isfinite(n_lo) or n_hi <= n_lo:
            continue
        n = np.linspace(n_lo, n_hi, n_grid) + 1.0
        fk = np.maximum.accumulate(f[k])
        served = n <= fk[-1] + 1e-9
        if not served.any():
            continue
        eps = np.arange(fk.size) * 1e-9
        tn = np.interp(n[served], fk + eps, tg)
        if from_ == "batch_start":
            ak = np.maximum.accumulate(adm[k])
            start = np.interp(n[served], ak + eps, tg)
        else:
            start = fi.a0[k] + (n[served] - 1.0) / lam[k]
        out[k] = float(np.mean(np.maximum(tn - start, 0.0)))
    return out


def batch_sequence(fi: FluidInputs, k_max: int = 64, n_iter: int = 2, n_t: int = 96) -> dict:
    """Static batching as a sequence of batches (fluid, expected values), numpy over designs.

    Batch ``i`` (1-based) needs its ``B``-th member (arrival ``g_i = a0 + (iB − 1)/λ``) and a free slot: it forms
    at ``f_i``, the first time ≥ ``g_i`` at which the expected number of live earlier batches is below ``m``. Its
    prefill leaves the pipeline at ``C_i = max(f_i + ΣD_P, C_{i−1} + max D_P)`` (flow shop of identical jobs),
    emitting ``B`` first tokens. It then decodes; it is still alive after ``K`` passes with probability
    ``1 − F_S(K)^B`` (some member has more than ``K`` decode steps) — the *distribution* of batch lifetimes, not
    its mean, decides how fast slots free up (heavy-tailed outputs hold a few slots and free the rest early).

    Decode speed depends on how many batches decode at once, ``d(t)`` (expected live batches past prefill): a
    full pass takes ``τ_B(d) = d / X_MVA(d)``. Fewer members make passes cheaper: in full-pass units the first ``K``
    passes are ``W(K) = (τ0·K + τ1·B·E[min(S, K)]) / (τ0 + τ1·B)``. With ``G(t) = ∫ dt / τ_B(d(t))`` batch ``i``
    has done ``W = G(t) − G(C_i)``. The sequence and ``d(t)`` are solved by two Gauss–Seidel sweeps.

    Args:
        fi: As :func:`slot_curves`, plus ``tauB_curve`` ``(D, m_max)`` (``τ_B(d)`` for d = 1..m_max), ``t_end``
            (end of the time grid, s) and ``grid_cdf`` (``P(S ≤ K)`` on ``grid_k``).
        k_max: Batches followed explicitly (later ones at the steady-state rates).

    Returns:
        dict with ``(D, K)`` arrays ``form``, ``first``, ``end`` (expected end of the longest member), the grid
        ``t``, ``G`` ``(D, T)``, ``full``, ``g_rate_end``.
    """
    d = np.size(fi.m)
    m = np.maximum(np.floor(fi.m), 1.0)
    b = fi.B
    lam = np.maximum(fi.lam, 1e-300)
    # Only batches whose last member arrives within the grid can matter: follow at most that many.
    k_need_d = np.minimum(np.ceil(lam * np.maximum(fi.t_end - fi.a0, 0.0) / np.maximum(b, 1.0)) + 1, k_max)
    k_need_d = np.maximum(k_need_d, 1).astype(np.int64)
    k_max = int(k_need_d.max()) if d else 1
    gk, ge, gc = fi.grid_k, fi.grid_emin, fi.grid_cdf
    full = np.maximum(fi.tau0 + fi.tau1 * b, 1e-300)
    w_of_k = (fi.tau0[:, None] * gk[None, :] + fi.tau1[:, None] * b[:, None] * ge[None, :]) / full[:, None]
    surv = 1.0 - gc[None, :] ** b[:, None]  # P(batch alive after K passes), (D, G)
    w_l1 = (fi.tau0 * fi.l1 + fi.tau1 * b * np.interp(fi.l1, gk, ge)) / full
    tg = np.linspace(0.0, fi.t_end, n_t)
    dt = tg[1] - tg[0]
    curve = fi.tauB_curve
    m_max = curve.shape[-1]
    rows = np.arange(d)
    tau_m = curve[rows, np.clip(m.astype(np.int64) - 1, 0, m_max - 1)]
    g_rate = 1.0 / tau_m
    g_t = tg[None, :] / tau_m[:, None]  # first sweep: all slots decoding
    idx = np.arange(k_max, dtype=np.float64)
    gform = fi.a0[:, None] + ((idx[None, :] + 1.0) * b[:, None] - 1.0) / lam[:, None]  # B-th member arrives
    gk_rows = np.broadcast_to(gk, w_of_k.shape)
    # Gauss–Seidel sweeps: batches in order (numpy over designs × time), then the decode clock G from the
    # expected number of decoding batches; a few sweeps reach the fixed point.
    for _ in range(n_iter):
        form = np.zeros((d, k_max))
        first = np.zeros((d, k_max))
        alive = np.zeros((d, n_t))  # expected live batches (forming, prefilling or decoding)
        dec = np.zeros((d, n_t))  # expected decoding batches
        c_prev = np.full(d, -np.inf)
        if d == 1:  # one design: the same sweep with scalars in plain Python (no per-step array overhead)
            _sweep_one(fi, tg, g_t[0], float(g_rate[0]), gform[0], w_of_k[0], gk, surv[0], float(m[0]),
                       int(k_need_d[0]), k_max, alive[0], dec[0], form[0], first[0])
        for i in range(k_max if d > 1 else 0):
            g = gform[:, i]
            ok = (tg[None, :] >= g[:, None]) & (alive <= m[:, None] - 1.0 + 1e-6)
            has = ok.any(axis=1)
            j_ok = np.argmax(ok, axis=1)
            # A slot already free when the B-th member arrives: form exactly then (not at the next grid point).
            free_now = j_ok == np.searchsorted(tg, g)
            f = np.where(has & free_now, g, np.where(has, tg[j_ok], np.maximum(g, tg[-1])))
            f = np.maximum(f, g)
            c = np.maximum(f + fi.pre_sum, c_prev + fi.pre_max)
            g_c = (np.interp(c[0], tg, g_t[0]) + max(c[0] - tg[-1], 0.0) * g_rate[0]) * np.ones(1) if d == 1 \
                else _interp_rows2(c[:, None], tg, g_t, g_rate)[:, 0]
            w = np.maximum(g_t - g_c[:, None], 0.0)  # (D, T) full-pass units done since C_i
            a_i = interp_rows(interp_rows(w, w_of_k, gk_rows), gk_rows, surv)
            use = (i < k_need_d)[:, None]
            after = (tg[None, :] >= c[:, None]) & use
            during = (tg[None, :] >= f[:, None]) & ~after & use
            live_dec = np.where(after, a_i, 0.0)
            alive += live_dec + during
            dec += live_dec
            form[:, i], first[:, i] = f, c
            c_prev = c
        dd = np.clip(dec, 1.0, m_max)
        lo = np.floor(dd).astype(np.int64)
        hi = np.minimum(lo + 1, m_max)
        wgt = dd - lo
        tau_t = np.take_along_axis(curve, lo - 1, axis=1) * (1 - wgt) + np.take_along_axis(curve, hi - 1, axis=1) * wgt
        g_t = np.concatenate([np.zeros((d, 1)), np.cumsum(dt / tau_t[:, :-1], axis=1)], axis=1)
    g_c = _interp_rows2(first, tg, g_t, g_rate)
    end = _inv_rows2(g_c + w_l1[:, None], tg, g_t, g_rate)
    return dict(form=form, first=first, end=end, t=tg, G=g_t, g_rate_end=1.0 / tau_m, w_l1=w_l1, full=full,
                w_of_k=w_of_k, dec=dec, k_used=k_need_d)


def _sweep_one(fi, tg, gt, g_rate, gform, w_of_k, gk, surv, m, k_need, k_max, alive, dec, form, first) -> None:
    """One Gauss–Seidel sweep of :func:`batch_sequence` for a single design (in place; same arithmetic)."""
    n_t = tg.size
    t_last = float(tg[-1])
    lim = m - 1.0 + 1e-6
    ps, pm = float(fi.pre_sum[0]), float(fi.pre_max[0])
    c_prev = -np.inf
    for i in range(k_max):
        g = float(gform[i])
        j0 = int(np.searchsorted(tg, g))
        f = max(g, t_last)
        if j0 < n_t:
            idx = np.flatnonzero(alive[j0:] <= lim)
            if idx.size:
                f = g if idx[0] == 0 else float(tg[j0 + idx[0]])
        f = max(f, g)
        c = max(f + ps, c_prev + pm)
        if i < k_need:
            g_c = float(np.interp(c, tg, gt)) + max(c - t_last, 0.0) * g_rate
            w = np.maximum(gt - g_c, 0.0)
            a = np.interp(np.interp(w, w_of_k, gk), gk, surv)
            ic = int(np.searchsorted(tg, c))
            jf = int(np.searchsorted(tg, f))
            alive[ic:] += a[ic:]
            dec[ic:] += a[ic:]
            if jf < ic:
                alive[jf:ic] += 1.0
        form[i], first[i] = f, c
        c_prev = c


def interp_rows(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """``np.interp`` row by row in one call: ``x (D, ...)`` against per-row tables ``xp, fp (D, G)``.

    Rows are shifted apart by a constant larger than any row's span, so one monotone table serves all rows
    (values outside a row's table clamp to its end values, as ``np.interp`` does).
    """
    d = xp.shape[0]
    if d == 1:
        return np.interp(x[0], xp[0], np.broadcast_to(fp, xp.shape)[0])[None]
    fp = np.broadcast_to(np.asarray(fp, dtype=np.float64), xp.shape)
    lo = np.minimum(xp[:, 0], x.reshape(d, -1).min(axis=1))
    hi = np.maximum(xp[:, -1], x.reshape(d, -1).max(axis=1))
    span = float(np.max(hi - lo)) + 1.0
    base = np.arange(d) * 2.0 * span
    off = base - lo  # row r's values land in [2·span·r, 2·span·r + span)
    shape = (d,) + (1,) * (x.ndim - 1)
    xs = (x + off.reshape(shape)).ravel()
    # Sentinels outside each row's band keep np.interp's end clamping per row.
    xps = np.concatenate([(base - 0.25 * span)[:, None], xp + off[:, None], (base + 1.5 * span)[:, None]], axis=1)
    fps = np.concatenate([fp[:, :1], fp, fp[:, -1:]], axis=1)
    out = np.interp(xs, xps.ravel(), fps.ravel())
    return out.reshape(x.shape)


def _interp_rows2(x: np.ndarray, tg: np.ndarray, g: np.ndarray, rate_end: np.ndarray) -> np.ndarray:
    """Row-wise G_r(x_r[...]) for ``x`` of shape (D, K); linear beyond the grid."""
    out = interp_rows(np.asarray(x, dtype=np.float64), np.broadcast_to(tg, g.shape), g)
    return out + np.maximum(x - tg[-1], 0.0) * rate_end[:, None]


def _inv_rows2(y: np.ndarray, tg: np.ndarray, g: np.ndarray, rate_end: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_interp_rows2` (G non-decreasing)."""
    out = np.empty_like(y, dtype=np.float64)
    for r in range(y.shape[0]):
        gr = g[r]
        inside = np.interp(y[r], gr + np.arange(gr.size) * 1e-12, tg)
        out[r] = np.where(y[r] > gr[-1], tg[-1] + (y[r] - gr[-1]) / max(rate_end[r], 1e-300), inside)
    return out


def _interp_rows(x: np.ndarray, tg: np.ndarray, g: np.ndarray, rate_end: np.ndarray) -> np.ndarray:
    """G_r(x_r) per row, linear beyond the grid (slope ``rate_end``), 0 before it."""
    t_end = tg[-1]
    out = np.empty_like(x, dtype=np.float64)
    for r in range(x.shape[0]):
        out[r] = np.interp(x[r], tg, g[r])
    return out + np.maximum(x - t_end, 0.0) * rate_end


def _inv_rows(y: np.ndarray, tg: np.ndarray, g: np.ndarray, rate_end: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_interp_rows` (G is non-decreasing)."""
    out = np.empty_like(y, dtype=np.float64)
    for r in range(y.shape[0]):
        gr = g[r]
        if y[r] > gr[-1]:
            out[r] = tg[-1] + (y[r] - gr[-1]) / max(rate_end[r], 1e-300)
        else:
            out[r] = np.interp(y[r], gr + np.arange(gr.size) * 1e-12, tg)
    return out


def static_curves(fi: FluidInputs, seq: dict, t: np.ndarray) -> np.ndarray:
    """Cumulative output tokens at times ``t`` (``(T,)``) of the batch sequence, ``(D, T)``."""
    gk, ge = fi.grid_k, fi.grid_emin
    w_of_k = seq["w_of_k"]
    first, form = seq["first"], seq["form"]
    d, k = first.shape
    tt = np.asarray(t, dtype=np.float64)
    out = np.zeros((d, tt.size))
    for r in range(d):
        g_t = np.interp(tt, seq["t"], seq["G"][r]) + np.maximum(tt - seq["t"][-1], 0.0) * seq["g_rate_end"][r]
        g_c = np.interp(first[r], seq["t"], seq["G"][r]) + np.maximum(first[r] - seq["t"][-1], 0.0) * seq["g_rate_end"][r]
        w = np.maximum(g_t[None, :] - g_c[:, None], 0.0)
        kk = np.interp(w, w_of_k[r], gk)
        ku = int(seq["k_used"][r])
        out[r] = (fi.B[r] * ((tt[None, :] >= first[r][:ku, None]) + np.interp(kk[:ku], gk, ge))).sum(axis=0)
    # Beyond the explicit batches: the steady-state token rate once the last explicit batch has formed.
    tail_start = first[np.arange(d), seq["k_used"] - 1]
    out += fi.r_tok[:, None] * np.maximum(tt[None, :] - tail_start[:, None], 0.0)
    return np.where(fi.feasible[:, None], out, 0.0)


def static_ttft(fi: FluidInputs, seq: dict, t0: float, t1: float, horizon: float, from_: str = "arrival") -> np.ndarray:
    """Mean TTFT of the requests arriving in ``[t0, t1]`` whose batch's prefill ends by ``horizon``."""
    lam = np.maximum(fi.lam, 1e-300)
    d = seq["first"].shape[0]
    out = np.full(d, np.nan)
    for r in range(d):
        if not fi.feasible[r]:
            continue
        k = int(seq["k_used"][r])
        first, form = seq["first"][:, :k], seq["form"][:, :k]
        b = int(round(fi.B[r]))
        n = np.arange(k * b)  # request index (0-based) of the explicit batches
        arr = fi.a0[r] + n / lam[r]
        bi = n // b
        tf = first[r][bi]
        start = arr if from_ == "arrival" else form[r][bi]
        sel = (arr >= t0) & (arr <= t1) & (tf <= horizon)
        # Requests beyond the explicit batches: first tokens at the steady admission rate after the last one.
        vals = list(tf[sel] - start[sel])
        n_last = k * b
        if fi.r_adm[r] > 0 and fi.a0[r] + n_last / lam[r] <= t1:
            n2 = np.arange(n_last, int(min(lam[r] * (t1 - fi.a0[r]) + 1, n_last + 20000)))
            arr2 = fi.a0[r] + n2 / lam[r]
            tf2 = np.maximum(first[r][-1] + (n2 - n_last + 1) / fi.r_adm[r], arr2 + fi.pre_sum[r])
            start2 = arr2 if from_ == "arrival" else tf2 - fi.pre_sum[r]
            sel2 = (arr2 >= t0) & (tf2 <= horizon)
            vals += list(tf2[sel2] - start2[sel2])
        if vals:
            out[r] = float(np.mean(vals))
    return out


def continuous_requests(fi: FluidInputs, t0: float, t1: float, horizon: float, from_: str = "arrival"):
    """Continuous batching as a request-level fluid: throughput in ``(t0, t1]`` and mean TTFT, per design.

    The simulator starts a new batch for waiting requests whenever fewer than ``m`` batches run and refills
    batches at pass boundaries, so a request is admitted on arrival unless ``m·B`` requests are already running;
    beyond that, admissions follow the steady-state admission capacity ``r_adm`` (FCFS). Its first token comes one
    prefill pass later (a pass with ``k`` new prompts: one at light load, the steady-state mix at full load), then
    one token per decode pass of its batch. With ``N`` requests running (Little's law, solved as a fixed point),
    ``d = min(m, N)`` batches of ``a = max(1, N/m)`` members share the decode stations, and a pass takes
    ``τ_B(d)·(τ0 + τ1·a)/(τ0 + τ1·B)``. Expected tokens of a request inside the window follow from
    ``E[min(S, K)]``.

    Returns:
        ``(throughput_tok_s, ttft_mean_s)`` arrays over designs (TTFT NaN when no request of the window has its
        first token before the horizon).
    """
    d = np.size(fi.m)
    thr = np.zeros(d)
    ttft = np.full(d, np.nan)
    gk, ge = fi.grid_k, fi.grid_emin
    s_mean = float(np.mean(fi.steps)) if np.size(fi.steps) else 0.0
    for r in range(d):
        if not fi.feasible[r]:
            continue
        m, b, lam = float(fi.m[r]), float(fi.B[r]), float(fi.lam[r])
        r_adm = max(float(fi.r_adm[r]), 1e-300)
        curve = fi.tauB_curve[r]
        full = max(fi.tau0[r] + fi.tau1[r] * b, 1e-300)
        rho = min(lam / r_adm, 1.0)
        k_new = 1.0 + (max(float(fi.admits_cycle[r]), 1.0) - 1.0) * rho
        l_pre = fi.pre1_sum[r] + (k_new - 1.0) / max(b - 1.0, 1.0) * (fi.pre_sum[r] - fi.pre1_sum[r])
        lam_eff = min(lam, r_adm)
        n_run = min(m * b, max(1.0, lam_eff * l_pre))
        for _ in range(8):  # Little's law fixed point for the running requests
            # Running requests share batches (refills at pass boundaries fill existing batches): ceil(N/B)
            # batches of N/d members, at most m.
            dd = float(np.clip(np.ceil(n_run / b), 1.0, min(m, curve.size)))
            a = max(1.0, n_run / dd)
            tau = float(np.interp(dd, np.arange(1, curve.size + 1), curve)) * (fi.tau0[r] + fi.tau1[r] * a) / full
            # Passes also carry the new members' prefill: the token rate cannot exceed the cycle capacity.
            tau = max(tau, n_run / max(float(fi.cap_tok[r]), 1e-300))
            n_run = min(m * b, max(1.0, lam_eff * (l_pre + s_mean * tau)))
        t_end = horizon if np.isfinite(horizon) else t1
        n_req = int(max(0, np.floor(lam * (t_end - fi.a0[r]))) + 1)
        n = np.arange(n_req, dtype=np.float64)
        arr = fi.a0[r] + n / lam
        # Admission: on arrival while fewer than m·B run; otherwise when request n − m·B completes (first token,
        # then E[S] passes), FCFS — computed block by block of m·B requests.
        cap_n = max(int(m * b), 1)
        adm = arr.copy()
        life = l_pre + s_mean * tau
        for lo_i in range(cap_n, n_req, cap_n):
            hi_i = min(lo_i + cap_n, n_req)
            adm[lo_i:hi_i] = np.maximum(arr[lo_i:hi_i], adm[lo_i - cap_n : hi_i - cap_n] + life)
        first = adm + l_pre
        k0 = np.maximum(t0 - first, 0.0) / max(tau, 1e-300)
        k1 = np.maximum(t1 - first, 0.0) / max(tau, 1e-300)
        tok = ((first > t0) & (first <= t1)) + np.interp(k1, gk, ge) - np.interp(k0, gk, ge)
        # Admissions beyond the first m·B only replace completed requests, so the running set never exceeds m·B:
        # the window's token rate is bounded by the pipeline's cycle capacity.
        thr[r] = min(float(tok.sum()) / max(t1 - t0, 1e-300), float(fi.cap_tok[r]))
        sel = (arr >= t0) & (arr <= t1) & (first <= horizon)
        if sel.any():
            start = arr if from_ == "arrival" else adm
            ttft[r] = float(np.mean((first - start)[sel]))
    return thr, ttft
