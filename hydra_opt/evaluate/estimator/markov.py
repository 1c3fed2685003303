"""The Markov (CTMC) and fluid parts of the estimator (HYDRA §V-A, §V-C, §V-D).

Two state spaces are used, each where it is the dominant runtime dynamic:

* **Occupancy chain** (:func:`occupancy_chain`): the state ``n`` is the number of requests in the system (waiting
  + admitted). Requests arrive at rate λ; with ``n`` present, ``min(n, N)`` are admitted (``N`` = concurrency the
  batch cap and the memory allow) and complete at the state-dependent rate ``μ(n)`` that the service capacities
  give (a partly filled pipeline serves fewer tokens per second than a full one — the batching dynamic). The
  stationary distribution π of this birth–death chain is its product form (detailed balance, in log space);
  throughput is ``T = Σ_n π_n·G_d(n)`` (Eq. 8) and the queue length gives the waiting time by Little's
  law, corrected from the exponential to the actual service variability (Pollaczek–Khinchine factor
  ``(1 + C_s²)/2``, exact for M/G/1).
* **Allocation chain** (:func:`allocation_chain`): under elastic scheduling with cross-phase lending, the state is
  the number of each family's chiplets assigned to prefill (product over families for hybrids, §V-D); the chain
  moves one chiplet toward the phase whose backlog drains slower, at the rate at which that phase's work arrives.

When the offered load exceeds the capacity (ρ ≥ 1, e.g. the paper's 100 req/s preset) no stationary distribution
exists; the **fluid model** (:func:`fluid_wait`) then gives the backlog's linear growth over the measurement
window and the mean waiting time of the requests that get their first token inside it.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from hydra_opt.evaluate.estimator import _kernels


__all__ = [
    "stationary",
    "birth_death_stationary",
    "occupancy_chain",
    "allocation_chain",
    "fluid_wait",
    "diffusion_queue_mean",
    "window_wait_s",
    "md1_wait",
    "lending_states",
    "lending_gain",
]


def stationary(q: sp.spmatrix) -> np.ndarray:
    """Stationary distribution of an irreducible CTMC generator ``q`` (rows sum to 0) by a sparse solve.

    One balance equation is replaced by the normalisation ``Σπ = 1``.
    """
    n = q.shape[0]
    if n == 1:
        return np.ones(1)
    a = sp.csr_matrix(q.T, dtype=np.float64).tolil()
    a[n - 1, :] = np.ones(n)
    b = np.zeros(n)
    b[n - 1] = 1.0
    pi = spla.spsolve(a.tocsc(), b)
    pi = np.maximum(np.asarray(pi, dtype=np.float64), 0.0)
    return pi / pi.sum()


#: Longest chain (transitions) that :func:`birth_death_stationary` solves with the compiled loop, not numpy.
SHORT_CHAIN = 64


def birth_death_stationary(birth: np.ndarray, death: np.ndarray) -> np.ndarray:
    """π of a birth–death chain on ``0..K``: the product form ``π_n ∝ Π_{i<n} b_i/d_i`` (detailed balance), in
    log space (no overflow however long the chain), numpy over a leading axis.

    O(K); a sparse LU solve of the generator gave the same π to 1e-13 absolute at 40–4,000× the cost (up to
    ~1 ms for the ~2,000-state chains of continuous batching near ρ = 1) and worse relative accuracy in the tail.

    Args:
        birth: ``(..., K)`` rate from state ``n`` to ``n+1``.
        death: ``(..., K)`` rate from state ``n+1`` to ``n``.
    """
    b = np.asarray(birth, dtype=np.float64)
    d = np.asarray(death, dtype=np.float64)
    if _kernels.COMPILED and b.ndim == 1 and b.size <= SHORT_CHAIN:  # a compiled loop beats numpy's call
        # overhead (8 vs 16 µs at 20 states; numpy wins from ~100 states: 36 vs 470 µs at 2,000)
        out = np.empty(b.size + 1)
        _kernels.birth_death_product(np.ascontiguousarray(b), np.ascontiguousarray(d), out)
        return out
    logr = np.log(np.maximum(b, 1e-300)) - np.log(np.maximum(d, 1e-300))
    logp = np.concatenate([np.zeros(b.shape[:-1] + (1,)), np.cumsum(logr, axis=-1)], axis=-1)
    logp -= logp.max(axis=-1, keepdims=True)
    p = np.exp(logp)
    return p / p.sum(axis=-1, keepdims=True)


def occupancy_chain(
    arrival_per_s: float, service_per_s: np.ndarray, n_admit: int, max_queue: int = 2000
) -> tuple[np.ndarray, int]:
    """States, rates and π of the occupancy chain.

    Args:
        arrival_per_s: λ, requests/s.
        service_per_s: ``(N,)`` completion rate μ(n) with ``n = 1..N`` requests admitted, requests/s.
        n_admit: N, the concurrency cap; states above N have N admitted and the rest waiting.
        max_queue: Largest waiting room kept (e.g. the arrivals a finite run can queue).

    Returns:
        ``pi`` over ``0..K`` and ``K`` (the truncation: deep enough that the tail mass is negligible, ρ < 1).
    """
    mu = np.asarray(service_per_s, dtype=np.float64)
    mu_max = float(mu[-1])
    rho = arrival_per_s / mu_max
    # Geometric tail beyond N with ratio ρ: keep states until ρ^j < 1e-9.
    k = n_admit + queue_room(rho, max_queue)
    death = np.concatenate([mu, np.full(k - n_admit, mu_max)])[:k]
    birth = np.full(k, arrival_per_s)
    return birth_death_stationary(birth, death), k


def queue_room(rho: float, max_queue: int) -> int:
    """Waiting-room states kept: until the geometric tail (ratio ρ) is below 1e-9, at most ``max_queue``."""
    if rho <= 0:
        return 1
    extra = np.ceil(np.log(1e-9) / np.log(max(min(rho, 0.999999), 1e-12)))
    return int(max(1, min(max_queue, extra)))


def allocation_chain(demand: np.ndarray, capacity_gap: np.ndarray) -> np.ndarray:
    """π over the allocation states of one family (§V-A): ``s`` = chiplets assigned to prefill, ``0..n``.

    The elastic scheduler moves a chiplet toward prefill when prefill work piles up faster than it drains and back
    when decode does. With ``capacity_gap[s]`` = (prefill backlog growth) − (decode backlog growth) in state ``s``
    (positive: prefill is the slower phase, so lend one more chiplet to prefill), the chain moves up at rate
    ``max(gap, 0)`` and down at rate ``max(−gap, 0)`` (plus a small symmetric jitter ``demand`` so the chain is
    irreducible), which concentrates π where the two phases drain equally fast.

    Args:
        demand: Rate scale (1/s), e.g. the request arrival rate; the jitter is 1e-3 of it.
        capacity_gap: ``(n+1,)`` signed *relative* gap per state, in [−1, 1].
    """
    g = np.asarray(capacity_gap, dtype=np.float64)
    rate = float(np.asarray(demand))
    eps = rate * 1e-3 + 1e-9
    up = rate * np.maximum(g[:-1], 0.0) + eps
    down = rate * np.maximum(-g[1:], 0.0) + eps
    return birth_death_stationary(up, down)


def fluid_wait(arrival_per_s, service_per_s, window_start_s, window_end_s):
    """Mean queueing delay of requests whose service starts in ``[start, end]`` when λ > μ (fluid, FCFS).

    With a backlog growing at ``λ − μ`` from t = 0, the request that starts service at ``t`` arrived at
    ``t·μ/λ`` and waited ``t·(1 − μ/λ)``; the mean over the window is that at its midpoint. Zero when λ ≤ μ.
    Numpy-broadcasting.
    """
    lam = np.asarray(arrival_per_s, dtype=np.float64)
    mu = np.asarray(service_per_s, dtype=np.float64)
    frac = np.clip(1.0 - mu / np.maximum(lam, 1e-300), 0.0, 1.0)
    return frac * 0.5 * (window_start_s + window_end_s)


def diffusion_queue_mean(drift_per_s: float, var_per_s: float, t_s: float) -> float:
    """Mean of a reflected Brownian motion started empty: ``E[R(t)]`` with drift ``m`` and variance ``σ²`` per s.

    ``R(t)`` has the law of ``sup_{s≤t} (m·s + σ·B(s))``, whose mean is (Harrison, *Brownian Motion and Stochastic
    Flow Systems*, §1.8) ``m·t·Φ(a) + σ√t·φ(a) + σ²/(2m)·(2Φ(a) − 1)`` with ``a = m√t/σ``; ``σ√(2t/π)`` at
    ``m = 0``. It rises from 0 to the stationary ``σ²/(2|m|)`` when ``m < 0`` and grows like ``m·t`` when ``m > 0``.
    """
    if t_s <= 0.0 or var_per_s <= 0.0:
        return max(drift_per_s, 0.0) * max(t_s, 0.0)
    sig = math.sqrt(var_per_s * t_s)
    a = drift_per_s * t_s / sig
    if abs(a) < 1e-6:  # m → 0: the three terms cancel to σ√(2t/π) (+ O(a))
        return sig * math.sqrt(2.0 / math.pi) + 0.5 * drift_per_s * t_s
    big_phi = 0.5 * math.erfc(-a / math.sqrt(2.0))
    small_phi = math.exp(-0.5 * a * a) / math.sqrt(2.0 * math.pi)
    return (drift_per_s * t_s * big_phi + sig * small_phi
            + var_per_s / (2.0 * drift_per_s) * (2.0 * big_phi - 1.0))


def window_wait_s(arrival_per_s: float, service_per_s: float, scv: float, t0_s: float, t1_s: float,
                  n_points: int = 8) -> float:
    """Mean queueing delay of arrivals at ``t ∈ [t0, t1]`` after an empty start, by the diffusion approximation.

    The queue beyond the admitted requests is a reflected Brownian motion (:func:`diffusion_queue_mean`) with
    drift ``λ − μ`` and variance ``λ + μ·C_s²`` per s (Poisson arrivals, departures of squared coefficient of
    variation ``C_s²``); an arrival at ``t`` waits ``E[R(t)]/μ``. A finite run never reaches the stationary queue
    near ``ρ = 1``: this is the delay of the requests a run measures (midpoint rule over ``n_points``).
    """
    if service_per_s <= 0.0 or arrival_per_s <= 0.0 or t1_s <= 0.0:
        return 0.0 if arrival_per_s <= 0.0 else math.inf
    lo, hi = max(t0_s, 0.0), max(t1_s, t0_s, 0.0)
    m = arrival_per_s - service_per_s
    var = arrival_per_s + service_per_s * max(scv, 0.0)
    step = (hi - lo) / n_points
    q = sum(diffusion_queue_mean(m, var, lo + (i + 0.5) * step) for i in range(n_points)) / n_points
    return q / service_per_s


def md1_wait(arrival_per_s, service_s):
    """Pollaczek–Khinchine mean wait of M/D/1: ``ρ·s / (2(1 − ρ))`` (inf when ρ ≥ 1)."""
    lam = np.asarray(arrival_per_s, dtype=np.float64)
    s = np.asarray(service_s, dtype=np.float64)
    rho = lam * s
    with np.errstate(divide="ignore"):
        return np.where(rho < 1.0, rho * s / (2.0 * (1.0 - rho)), np.inf)


def lending_states(n_p: int, n_d: int, t_pp: float, t_pd: float, t_dd: float, t_dp: float, efficiency: float):
    """Prefill/decode capacities of one family for every allocation ``k`` = its chiplets on prefill (Eqs. 6–7).

    ``k ≤ n_p``: ``k`` prefill-built chiplets do prefill, the other ``n_p − k`` are lent to decode; ``k > n_p``:
    all prefill-built chiplets do prefill and ``k − n_p`` decode-built ones are lent to prefill. A chiplet's rate
    for a phase is the inverse of its opcost time for the family's work of one cycle (``t_pp``: prefill work on a
    prefill-built chiplet, ``t_pd``: prefill work on a decode-built one, ``t_dd``, ``t_dp`` likewise for decode);
    lent chiplets realise ``efficiency`` of it (migration and queue-status lag).

    Returns:
        ``(g_p, g_d)`` arrays over ``k = 0..n_p+n_d`` (cycles of work per second).
    """
    k = np.arange(n_p + n_d + 1, dtype=np.float64)
    nat_p = np.minimum(k, n_p)
    lent_to_p = np.maximum(k - n_p, 0.0)
    lent_to_d = np.maximum(n_p - k, 0.0)
    nat_d = np.minimum(n_d, n_p + n_d - k)
    g_p = nat_p / t_pp + efficiency * lent_to_p / t_pd
    g_d = nat_d / t_dd + efficiency * lent_to_d / t_dp
    return g_p, g_d


def lending_gain(families: list[tuple[int, int, float, float, float, float]], efficiency: float, rate: float):
    """π over allocations (product over families, §V-D) and the elastic gain in cycle rate.

    Each family's allocation chain moves toward the phase that drains slower (:func:`allocation_chain` with gap
    ``1/G_p − 1/G_d``); families are independent chains, so the joint π is their product. The cycle rate of a state
    is limited by its slower phase and slowest family; the gain is ``E_π[rate] / rate(native allocation)``.

    Args:
        families: Per family ``(n_p, n_d, t_pp, t_pd, t_dd, t_dp)``.
        efficiency: Lent-chiplet efficiency.
        rate: Jitter rate of the chains (e.g. arrivals/s).

    Returns:
        ``(gain, pis)`` with one π per family.
    """
    pis, caps, native = [], [], []
    for n_p, n_d, t_pp, t_pd, t_dd, t_dp in families:
        g_p, g_d = lending_states(n_p, n_d, t_pp, t_pd, t_dd, t_dp, efficiency)
        with np.errstate(divide="ignore", invalid="ignore"):
            tp = np.where(g_p > 0, 1.0 / np.maximum(g_p, 1e-300), np.inf)
            td = np.where(g_d > 0, 1.0 / np.maximum(g_d, 1e-300), np.inf)
            gap = np.where(np.isinf(tp), 1.0, np.where(np.isinf(td), -1.0, (tp - td) / (tp + td)))
        pi = allocation_chain(rate, gap)
        pis.append(pi)
        caps.append(np.minimum(g_p, g_d))
        native.append(min(g_p[n_p], g_d[n_p]))
    # Joint state: the slowest family limits the cycle rate; expectation over the product distribution.
    exp_rate = 0.0
    grids = np.meshgrid(*[np.arange(p.size) for p in pis], indexing="ij")
    joint = np.ones_like(grids[0], dtype=np.float64)
    cap_joint = np.full(grids[0].shape, np.inf)
    for f, g in enumerate(grids):
        joint = joint * pis[f][g]
        cap_joint = np.minimum(cap_joint, caps[f][g])
    exp_rate = float((joint * cap_joint).sum())
    base = min(native) if native else 0.0
    return (exp_rate / base if base > 0 else 1.0), pis
