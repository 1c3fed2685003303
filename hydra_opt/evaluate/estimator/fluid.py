"""Fluid model of the batch slots over a finite run (HYDRA §V-C "fluid-queue model").

This module holds the length-distribution grids; the static-batching batch sequence, token curves and TTFT are in
the solver (``single.py``), continuous and chunked batching in ``streams.py``.

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
   ``T(K) = τ0·K + τ1·B·E[min(S, K)]`` seconds, until its longest member ends at ``E[max of B]`` passes.
4. **Renewal**: after its first cycle a slot continues at the steady-state (renewal-reward) rates of the closed
   pipeline (MVA over the whole cycle): tokens ``r_tok`` and first tokens ``r_adm`` per second.

Cumulative token and first-token curves follow; throughput is the token increase over the measurement window and
TTFT maps each FCFS request to the time the first-token curve reaches its index (only requests whose first token
comes before the horizon count, as in the simulator).
"""

from __future__ import annotations

import numpy as np

__all__ = ["cdf_on", "emin_curve"]


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
