"""State-dependent service capacities (HYDRA §V-A, §V-B), priced with THE cost model (``evaluate.opcost``).

Everything here is numpy-broadcasting over a leading *design* axis, so the scalar estimator (one design) and the
vectorised screening path (a whole enumerated space) run the same code.

Pieces, bottom up:

* :class:`LengthStats` — moments of the workload's length distribution that price *expected* batches exactly
  (block costs are linear in the batch aggregates ``[1, n, Σq, Σq·c, Σq², Σc]``, ``workload.cost``): a prefill batch
  of ``b`` prompts has ``E[agg] = [1, b, b·E[P], 0, b·E[P²], 0]``; a decode batch of ``b`` requests has
  ``[1, b, b, b·c̄, b, b·c̄]`` where ``c̄`` is the *length-biased* mean context of a decode slot (long outputs occupy
  slots longer): ``c̄ = (E[P·S] + E[S(S−1)/2]) / E[S]`` with ``S`` the number of decode steps of a request.
* :func:`block_times` — the latency of every block on every chiplet through :func:`opcost.roofline_s`.
* :func:`assign_blocks` — the initial spatial-pipeline mapping Ω (Eqs. 4–5: minimise the bottleneck stage) by the
  longest-processing-time greedy over eligible stations; dynamic schedulers balance load inside a chiplet type.
* :func:`mva_throughput` — exact mean-value analysis of the closed pipeline in which ``m`` batches circulate over
  the stations (pipeline fill: one batch in flight cannot use more than one stage at a time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hydra_opt.evaluate.opcost import roofline_s

__all__ = [
    "LengthStats",
    "length_stats",
    "prefill_agg",
    "decode_agg",
    "ChipletArrays",
    "chiplet_arrays",
    "block_times",
    "assign_blocks",
    "balance_within_types",
    "mva_throughput",
]

# Row indices of ``workload.cost.COST_FIELDS`` (asserted at import time of the glue module).
_MACS, _VEC, _SFU, _W, _ACT, _KVR, _KVW, _IO = range(8)


@dataclass(frozen=True)
class LengthStats:
    """Moments of a workload's request lengths used to price expected batches.

    Attributes:
        prompt_mean_tok: E[P], prompt tokens.
        prompt_sq_mean_tok2: E[P²], tokens².
        output_mean_tok: E[O], output tokens (the first one is emitted by the prefill pass).
        decode_steps_mean: E[S], decode passes per request (S = O − 1).
        decode_ctx_mean_tok: Length-biased mean context of a request in a decode pass, tokens.
        decode_ctx_sq_mean_tok2: Length-biased second moment of that context, tokens² (for dispersion).
        n_samples: Requests the moments come from.
        prompt_tok: The sampled prompt lengths (for service-time variability), tokens.
        steps: The sampled decode-step counts.
    """

    prompt_mean_tok: float
    prompt_sq_mean_tok2: float
    output_mean_tok: float
    decode_steps_mean: float
    decode_ctx_mean_tok: float
    decode_ctx_sq_mean_tok2: float
    n_samples: int
    prompt_tok: np.ndarray
    steps: np.ndarray


def length_stats(prompt_tokens: np.ndarray, output_tokens: np.ndarray, *, ctx_cap_tok: float | None = None) -> LengthStats:
    """Moments of paired (prompt, output) samples.

    Args:
        prompt_tokens: Prompt length of each sampled request, tokens (≥ 1).
        output_tokens: Output length of each sampled request, tokens (≥ 1).
        ctx_cap_tok: Optional cap of the context a block attends to (the model's maximum position), tokens.
    """
    p = np.asarray(prompt_tokens, dtype=np.float64)
    o = np.asarray(output_tokens, dtype=np.float64)
    s = np.maximum(o - 1.0, 0.0)
    # Σ_{i=0}^{S-1} (P + i) and Σ (P + i)² per request, closed forms (no loop over steps).
    sum_c = s * p + s * (s - 1.0) / 2.0
    sum_c2 = s * p * p + p * s * (s - 1.0) + (s - 1.0) * s * (2.0 * s - 1.0) / 6.0
    tot = max(float(s.sum()), 1.0)
    c_mean = float(sum_c.sum()) / tot if s.sum() > 0 else float(p.mean())
    c2_mean = float(sum_c2.sum()) / tot if s.sum() > 0 else float((p * p).mean())
    if ctx_cap_tok is not None:
        c_mean = min(c_mean, ctx_cap_tok)
        c2_mean = min(c2_mean, ctx_cap_tok**2)
    return LengthStats(
        prompt_mean_tok=float(p.mean()),
        prompt_sq_mean_tok2=float((p * p).mean()),
        output_mean_tok=float(o.mean()),
        decode_steps_mean=float(s.mean()),
        decode_ctx_mean_tok=c_mean,
        decode_ctx_sq_mean_tok2=c2_mean,
        n_samples=int(p.size),
        prompt_tok=p,
        steps=s,
    )


def prefill_agg(stats: LengthStats, batch) -> np.ndarray:
    """Expected aggregate vector of a prefill pass over ``batch`` prompts (``batch`` may be an array)."""
    b = np.asarray(batch, dtype=np.float64)
    z = np.zeros_like(b)
    return np.stack([np.ones_like(b), b, b * stats.prompt_mean_tok, z, b * stats.prompt_sq_mean_tok2, z], axis=-1)


def chunked_prefill_agg(stats: LengthStats, batch: float, chunk_tok: float) -> tuple[np.ndarray, float]:
    """Expected aggregates of the prefill chunks ``batch`` prompts contribute to passes when each pass has
    ``chunk_tok`` prefill tokens (chunked prefill), and the mean number of chunks (passes) per prompt.

    A prompt of P tokens is cut into ``n = ⌈P/C⌉`` chunks (``C`` tokens, the last the rest ``r``); chunk ``k``
    attends to the ``(k−1)·C`` tokens before it, so per prompt ``Σq = P``, ``Σq² = (n−1)C² + r²``,
    ``Σq·c = C²(n−1)(n−2)/2 + r(n−1)C``, ``Σc = C·n(n−1)/2`` and ``n`` rows — over the sampled prompts.
    """
    c = max(float(chunk_tok), 1.0)
    p = np.maximum(stats.prompt_tok.astype(np.float64), 1.0)
    n = np.ceil(p / c)
    r = p - (n - 1.0) * c
    sq = (n - 1.0) * c * c + r * r
    qc = c * c * (n - 1.0) * (n - 2.0) / 2.0 + r * (n - 1.0) * c
    sc = c * n * (n - 1.0) / 2.0
    b = float(batch)
    agg = np.array([1.0, b * n.mean(), b * p.mean(), b * qc.mean(), b * sq.mean(), b * sc.mean()])
    return agg, float(n.mean())


def decode_agg(stats: LengthStats, batch) -> np.ndarray:
    """Expected aggregate vector of one decode pass over ``batch`` requests (``batch`` may be an array)."""
    b = np.asarray(batch, dtype=np.float64)
    c = stats.decode_ctx_mean_tok
    return np.stack([np.ones_like(b), b, b, b * c, b, b * c], axis=-1)


@dataclass(frozen=True)
class ChipletArrays:
    """Chiplet parameters as arrays (any shape, broadcast together), the inputs of ``opcost.roofline_s``."""

    macs_per_s: np.ndarray
    elem_ops_per_s: np.ndarray
    sfu_ops_per_s: np.ndarray
    sram_gbps: np.ndarray


def chiplet_arrays(chiplets) -> ChipletArrays:
    """Stack the rate fields of a sequence of :class:`~hydra_opt.hardware.types.ChipletType`."""
    return ChipletArrays(
        macs_per_s=np.array([c.macs_per_s for c in chiplets], dtype=np.float64),
        elem_ops_per_s=np.array([c.elem_ops_per_s for c in chiplets], dtype=np.float64),
        sfu_ops_per_s=np.array([c.sfu_ops_per_s for c in chiplets], dtype=np.float64),
        sram_gbps=np.array([c.sram_gbps for c in chiplets], dtype=np.float64),
    )


def block_costs(coeffs: np.ndarray, agg: np.ndarray) -> np.ndarray:
    """Cost fields of every block for aggregate vector(s) ``agg``.

    Args:
        coeffs: ``(n_blocks, n_fields, 6)`` from ``Model.block_coeffs``.
        agg: ``(..., 6)`` aggregate vectors.

    Returns:
        ``(..., n_blocks, n_fields)``.
    """
    return np.einsum("bfk,...k->...bf", coeffs, agg)


def block_times(costs: np.ndarray, chip: ChipletArrays, mem_bw_gbps) -> tuple[np.ndarray, np.ndarray]:
    """Latency (s) and memory bytes of every block on every chiplet, via ``opcost.roofline_s``.

    Args:
        costs: ``(..., n_blocks, n_fields)`` block cost fields.
        chip: Chiplet rates with shape ``(..., n_stations)`` (broadcast against the leading axes of ``costs``).
        mem_bw_gbps: Memory bandwidth available to one task, GB/s, shape broadcastable to ``(..., n_stations)``.

    Returns:
        ``latency (..., n_blocks, n_stations)`` and ``mem_bytes (..., n_blocks)``.
    """
    c = costs[..., :, None, :]  # (..., nb, 1, F)
    mem = c[..., _W] + c[..., _KVR] + c[..., _KVW]
    lat, _, _, _ = roofline_s(
        c[..., _MACS],
        c[..., _VEC],
        c[..., _SFU],
        c[..., _ACT] + mem,
        mem,
        macs_per_s=np.asarray(chip.macs_per_s)[..., None, :],
        elem_ops_per_s=np.asarray(chip.elem_ops_per_s)[..., None, :],
        sfu_ops_per_s=np.asarray(chip.sfu_ops_per_s)[..., None, :],
        sram_gbps=np.asarray(chip.sram_gbps)[..., None, :],
        mem_bw_gbps=np.asarray(mem_bw_gbps, dtype=np.float64)[..., None, :],
    )
    return lat, mem[..., 0]


def assign_blocks(times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Initial spatial-pipeline mapping Ω (HYDRA Eqs. 4–5) by longest-processing-time greedy.

    Blocks are taken in decreasing order of their fastest eligible time and each goes to the station whose load
    after adding it is smallest (the classic 4/3-approximation of the min-max stage load).

    Args:
        times: ``(..., n_blocks, n_stations)`` latency of each block on each station; ``inf`` = ineligible.

    Returns:
        ``loads (..., n_stations)`` seconds per pass and ``owner (..., n_blocks)`` station index of each block.
    """
    t = np.asarray(times, dtype=np.float64)
    lead = t.shape[:-2]
    nb, ns = t.shape[-2:]
    if int(np.prod(lead)) == 1:
        return _assign_one(t.reshape(nb, ns), lead)
    loads = np.zeros(lead + (ns,))
    owner = np.zeros(lead + (nb,), dtype=np.int64)
    fastest = np.where(np.isfinite(t), t, np.inf).min(axis=-1)
    order = np.argsort(-np.where(np.isfinite(fastest), fastest, 0.0), axis=-1, kind="stable")
    flat_t = t.reshape((-1, nb, ns))
    flat_loads = loads.reshape((-1, ns))
    flat_owner = owner.reshape((-1, nb))
    flat_order = order.reshape((-1, nb))
    rows = np.arange(flat_t.shape[0])
    for j in range(nb):
        blk = flat_order[:, j]
        tb = flat_t[rows, blk, :]  # (R, ns)
        cand = flat_loads + tb
        best = np.argmin(cand, axis=-1)
        add = tb[rows, best]
        flat_loads[rows, best] += np.where(np.isfinite(add), add, 0.0)
        flat_owner[rows, blk] = best
    return flat_loads.reshape(lead + (ns,)), flat_owner.reshape(lead + (nb,))


def _assign_one(t: np.ndarray, lead: tuple) -> tuple[np.ndarray, np.ndarray]:
    """:func:`assign_blocks` for a single design in plain Python (the same greedy, same tie-breaking)."""
    nb, ns = t.shape
    rows = t.tolist()
    fastest = [min(r) for r in rows]
    key = [f if f != float("inf") else 0.0 for f in fastest]
    order = sorted(range(nb), key=lambda j: -key[j])  # stable, like argsort(kind="stable") on −key
    loads = [0.0] * ns
    owner = [0] * nb
    for blk in order:
        r = rows[blk]
        best, bv = 0, loads[0] + r[0]
        for i in range(1, ns):
            v = loads[i] + r[i]
            if v < bv:
                best, bv = i, v
        if r[best] != float("inf"):
            loads[best] += r[best]
        owner[blk] = best
    return np.array(loads).reshape(lead + (ns,)), np.array(owner, dtype=np.int64).reshape(lead + (nb,))


def balance_within_types(loads: np.ndarray, type_id: np.ndarray, efficiency: float = 1.0) -> np.ndarray:
    """Loads after a dynamic scheduler spreads work evenly over the chiplets of one type.

    Work-stealing/elastic scheduling moves ready tasks to idle chiplets of the same (eligible) type, so in the
    fluid limit every chiplet of a type carries the type's mean load; ``efficiency`` < 1 leaves part of the static
    imbalance (migration and queue-status lag).

    Args:
        loads: ``(..., n_stations)`` static loads, s per pass.
        type_id: ``(..., n_stations)`` integer chiplet-type id of each station (−1 = absent).
        efficiency: Fraction of the imbalance that is removed, in [0, 1].
    """
    out = np.array(loads, dtype=np.float64, copy=True)
    ids = np.unique(type_id[type_id >= 0])
    for k in ids:
        m = type_id == k
        cnt = m.sum(axis=-1, keepdims=True)
        mean = np.where(m, loads, 0.0).sum(axis=-1, keepdims=True) / np.maximum(cnt, 1)
        out = np.where(m, efficiency * mean + (1.0 - efficiency) * loads, out)
    return out


def mva_throughput(demands: np.ndarray, customers) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact MVA of a closed network of queueing stations (no think time).

    ``customers`` batches circulate over the pipeline's stations (chiplets), station ``s`` needing ``D_s``
    seconds per cycle. Throughput is ``X(m)``, bounded by ``m/ΣD`` (no overlap) and ``1/max D`` (the bottleneck
    stage, Eq. 5).

    Args:
        demands: ``(..., n_stations)`` service demand per cycle, s (0 for unused stations).
        customers: Batches in flight, ≥ 1, broadcastable to the leading shape (fractional values interpolate).

    Returns:
        ``X`` cycles per second, ``R`` mean cycle time (s) and ``Q (..., n_stations)`` the mean queue an arriving
        customer sees at each station (arrival theorem: the queue with ``m − 1`` customers).
    """
    d = np.asarray(demands, dtype=np.float64)
    m = np.broadcast_to(np.asarray(customers, dtype=np.float64), d.shape[:-1])
    m = np.maximum(m, 1.0)
    m_max = max(int(np.ceil(np.max(m))) if m.size else 1, 1)
    q = np.zeros_like(d)
    xs, rs, qs = [], [], [q]
    for n in range(1, m_max + 1):
        r_s = d * (1.0 + q)
        r = r_s.sum(axis=-1)
        x = n / np.maximum(r, 1e-300)
        q = x[..., None] * r_s
        xs.append(x)
        rs.append(r)
        qs.append(q)
    xs_a = np.stack(xs, axis=-1)
    rs_a = np.stack(rs, axis=-1)
    qs_a = np.stack(qs, axis=-2)  # (..., m_max+1, S): queue with 0..m_max customers
    lo = np.floor(m).astype(np.int64)
    hi = np.ceil(m).astype(np.int64)
    w = m - lo

    def pick(a, idx):
        return np.take_along_axis(a, idx[..., None], -1)[..., 0]

    x = pick(xs_a, lo - 1) * (1 - w) + pick(xs_a, hi - 1) * w
    r = pick(rs_a, lo - 1) * (1 - w) + pick(rs_a, hi - 1) * w
    q_lo = np.take_along_axis(qs_a, (lo - 1)[..., None, None], -2)[..., 0, :]
    q_hi = np.take_along_axis(qs_a, (hi - 1)[..., None, None], -2)[..., 0, :]
    return x, r, q_lo * (1 - w)[..., None] + q_hi * w[..., None]
