"""Fluid model of the batch slots over a finite run (HYDRA §V-C "fluid-queue model").

This module holds the length-distribution grids and the continuous-batching fluid (``continuous_requests``); the
static-batching batch sequence, token curves and TTFT are in the solver (``single.py``).

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

__all__ = ["FluidInputs", "cdf_on", "continuous_requests", "emin_curve"]


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
