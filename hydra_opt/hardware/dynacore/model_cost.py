"""Model-level prefill and decode cost of a whole model on one architecture (DynaCore paper, Secs. 8.3-8.4).

A pass (one decode step of ``B`` requests at context ``L``, or the prefill of ``B`` prompts) is the GEMMs of every
block (``hydra_opt.workload.models.block_gemms``) run one after another:

* weight GEMMs (projections, MLP, LM head): the searched plan's ``max(compute, weight streaming)`` each;
* attention score/value products of one block: identical per-request GEMMs are merged (``count`` summed, so
  independent heads and requests spread over the cores); their compute is summed and overlapped with streaming
  the block's KV cache (``kv_elems_per_token · (c + q)`` per request at the activation precision — the GQA-shared
  K/V is read once, not once per query head).

Element-wise work (norms, softmax, activations) is not priced here: the DynaCore comparison is about the GEMM
engine (``docs/dynacore.md``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from hydra_opt.hardware.dynacore.precision import Datapath, PrecisionPolicy, get_datapath, get_policy
from hydra_opt.hardware.dynacore.search import ConfigTable
from hydra_opt.workload.cost import Gemm

__all__ = ["StepCost", "gemm_list_cost", "pass_cost", "decode_step", "prefill", "saturation_batch"]


@dataclass(frozen=True)
class StepCost:
    """Cost of one pass over a model (or a GEMM list).

    Attributes:
        latency_s: Wall time, s.
        compute_s: Sum of the compute times of all GEMMs, s.
        dram_s: Sum of the DRAM streaming times (weights + KV), s.
        dram_bytes: DRAM bytes.
        macs: Useful MACs.
        energy_j: Energy, J.
    """

    latency_s: float
    compute_s: float
    dram_s: float
    dram_bytes: float
    macs: float
    energy_j: float

    def __add__(self, other: StepCost) -> StepCost:
        return StepCost(*(a + b for a, b in zip(self._t(), other._t())))

    def _t(self) -> tuple[float, ...]:
        return (self.latency_s, self.compute_s, self.dram_s, self.dram_bytes, self.macs, self.energy_j)

    @property
    def utilization_bound(self) -> str:
        """``"memory"`` when streaming dominates the summed times, else ``"compute"``."""
        return "memory" if self.dram_s > self.compute_s else "compute"


ZERO = StepCost(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def _merge(gemms: list[Gemm]) -> list[Gemm]:
    """Identical shapes merged (counts summed), first-seen order kept."""
    acc: dict[tuple, int] = defaultdict(int)
    names: dict[tuple, str] = {}
    for g in gemms:
        key = (g.m, g.n, g.k, g.weight, getattr(g, "density", 1.0))
        acc[key] += g.count
        names.setdefault(key, g.name)
    return [Gemm(names[k], k[0], k[1], k[2], c, k[3], k[4]) for k, c in acc.items()]


def gemm_list_cost(
    table: ConfigTable,
    gemms: list[Gemm],
    datapath: str | Datapath,
    *,
    kv_bytes: float | None = None,
    dram_bw_bytes_per_s: float | None = None,
) -> StepCost:
    """Cost of a list of GEMMs executed in order on ``table.arch``.

    Args:
        table: Plan cache of the architecture.
        gemms: The GEMMs (weight and activation × activation).
        datapath: Datapath.
        kv_bytes: DRAM bytes of the activation × activation operands (KV cache); default: each such GEMM's right
            operand once (which over-counts GQA-shared K/V).
        dram_bw_bytes_per_s: Override of the DRAM bandwidth (e.g. the share a chiplet gets over the NoI).
    """
    arch = table.arch
    dp = get_datapath(datapath)
    bw = dram_bw_bytes_per_s or arch.device.dram_bytes_per_s
    e_dram = arch.energy.dram_pj_per_byte * 1e-12
    p_static = arch.static_power_w
    lat = comp = dram_s = dram_b = macs = energy = 0.0
    att_comp = att_dyn = att_macs = 0.0
    att_default_bytes = 0.0
    for g in _merge(gemms):
        c = table.lookup(g.m, g.n, g.k, g.count, g.weight, dp.name)
        dyn = c.energy_j - p_static * c.latency_s - c.dram_bytes * e_dram
        if g.weight:
            ds = c.dram_bytes / bw
            t = max(c.compute_s, ds)
            lat += t
            comp += c.compute_s
            dram_s += ds
            dram_b += c.dram_bytes
            macs += c.macs
            energy += dyn + c.dram_bytes * e_dram + p_static * t
        else:
            # Causal attention: tiles wholly above the diagonal are skipped, so compute, MACs and dynamic energy
            # scale with the GEMM's density (the fraction of query-key pairs that exist).
            d = g.density
            att_comp += c.compute_s * d
            att_dyn += dyn * d
            att_macs += c.macs * d
            att_default_bytes += c.dram_bytes
    if att_macs:
        kb = att_default_bytes if kv_bytes is None else kv_bytes
        ds = kb / bw
        t = max(att_comp, ds)
        lat += t
        comp += att_comp
        dram_s += ds
        dram_b += kb
        macs += att_macs
        energy += att_dyn + kb * e_dram + p_static * t
    return StepCost(lat, comp, dram_s, dram_b, macs, energy)


def _block_gemms(
    block: Any, c: np.ndarray, q: np.ndarray, pairs: np.ndarray, mult: np.ndarray, attention: bool
) -> list[Gemm]:
    """The block's GEMMs (as ``block_gemms``), pricing the per-request attention products once per distinct
    (context, new) pair with its multiplicity instead of once per request."""
    tokens = int(q.sum())
    out: list[Gemm] = []
    for layer in block.layers:
        if layer.kind != "attention":
            out.extend(layer.gemms(c, q))
            continue
        # Attention projections run over all Σq tokens; the score/value products are per request.
        out.extend(
            Gemm(g.name, tokens, g.n, g.k, g.count, True) for g in layer.gemms(pairs[:1, 0], pairs[:1, 1]) if g.weight
        )
        if attention:
            for (ci, qi), k in zip(pairs.tolist(), mult.tolist()):
                for g in layer.gemms(np.array([ci]), np.array([qi])):
                    if not g.weight:
                        out.append(Gemm(g.name, g.m, g.n, g.k, g.count * int(k), False, g.density))
    if not attention:
        out = [g for g in out if g.weight]
    return out


def pass_cost(
    table: ConfigTable, model: Any, ctx: Any, new: Any, datapath: str | Datapath, *, attention: bool = True
) -> StepCost:
    """Cost of one pass of ``model`` over a batch (request i: ``ctx[i]`` prior tokens, ``new[i]`` new tokens).

    Args:
        table: Plan cache of the architecture.
        model: A :class:`hydra_opt.workload.models.Model`.
        ctx, new: Per-request prior context and new tokens.
        datapath: Datapath of this phase.
        attention: Include the attention score/value products and KV streaming (False: weight GEMMs only, the
            setting of the Fig. 11 reproduction).
    """
    dp = get_datapath(datapath)
    c = np.atleast_1d(np.asarray(ctx, dtype=np.int64))
    q = np.atleast_1d(np.asarray(new, dtype=np.int64))
    keys = float(np.sum(c + q))
    # Requests with the same (context, new tokens) have identical attention GEMMs: price each distinct pair once
    # with its multiplicity (a batch of 256 decode requests at one context is one pair).
    pairs, mult = np.unique(np.stack([c, q], axis=1), axis=0, return_counts=True)
    total = ZERO
    memo: dict[tuple, StepCost] = {}
    for block in model.blocks:
        kv = block.kv_elems_per_token * keys * dp.act_bytes
        sig = (block.kinds, tuple(block.layers), kv)
        hit = memo.get(sig)
        if hit is None:
            hit = gemm_list_cost(
                table,
                _block_gemms(block, c, q, pairs, mult, attention),
                dp,
                kv_bytes=kv if block.kv_elems_per_token else None,
            )
            memo[sig] = hit
        total = total + hit
    return total


def decode_step(
    table: ConfigTable,
    model: Any,
    batch: int,
    context: int,
    policy: str | PrecisionPolicy = "disaggregated",
    *,
    attention: bool = True,
) -> StepCost:
    """One decode step of ``batch`` requests, each at ``context`` prior tokens, with the policy's decode datapath."""
    dp = get_policy(policy).datapath("decode")
    return pass_cost(table, model, np.full(batch, context), np.ones(batch, dtype=np.int64), dp, attention=attention)


def prefill(
    table: ConfigTable,
    model: Any,
    prompt_tokens: int,
    batch: int = 1,
    policy: str | PrecisionPolicy = "disaggregated",
    *,
    attention: bool = True,
) -> StepCost:
    """Prefill of ``batch`` prompts of ``prompt_tokens`` tokens with the policy's prefill datapath."""
    dp = get_policy(policy).datapath("prefill")
    return pass_cost(
        table, model, np.zeros(batch, dtype=np.int64), np.full(batch, prompt_tokens), dp, attention=attention
    )


def saturation_batch(latency_by_batch: dict[int, float], tolerance: float = 0.1) -> int:
    """The largest batch whose latency stays within ``(1 + tolerance)`` of the batch-1 latency (the knee of
    the paper's Fig. 11: latency is flat while the array is underutilised, then grows)."""
    bs = sorted(latency_by_batch)
    base = latency_by_batch[bs[0]]
    sat = bs[0]
    for b in bs:
        if latency_by_batch[b] <= (1.0 + tolerance) * base:
            sat = b
        else:
            break
    return sat
