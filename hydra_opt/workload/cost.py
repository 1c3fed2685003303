"""Cost records of one block (or one GEMM) for one pass over a batch of requests.

This is the contract between the workload layer (which counts operations and bytes) and everything that prices
them (``hydra_opt.evaluate.opcost``, the DynaCore core model, the estimator).

Costs are *linear in batch aggregates*. For a batch in which request ``i`` has ``c_i`` tokens of prior context and
processes ``q_i`` new tokens in this pass (prefill of a prompt of L tokens: ``c=0, q=L``; one decode step at
context L: ``c=L, q=1``; a chunked-prefill chunk: anything in between), every field of :class:`BlockCost` is
``coeffs @ agg`` with the aggregate vector

    agg = [1, n, Σq, Σq·c, Σq², Σc]          (see :data:`AGG_NAMES`)

so a block is summarised once by a ``(len(COST_FIELDS), len(AGG_NAMES))`` matrix and any batch is priced with one
small dot product — in the simulator per task, and in the estimator over length distributions (moments) and over
whole design spaces (numpy broadcasting).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

__all__ = ["AGG_NAMES", "COST_FIELDS", "BlockCost", "Gemm", "batch_aggregates"]

#: Names of the batch aggregates, in order: passes (1), requests, Σ new tokens, Σ new×context, Σ new², Σ context.
AGG_NAMES: tuple[str, ...] = ("one", "n", "sum_q", "sum_qc", "sum_q2", "sum_c")


def batch_aggregates(ctx_tokens: np.ndarray, new_tokens: np.ndarray) -> np.ndarray:
    """The aggregate vector ``[1, n, Σq, Σq·c, Σq², Σc]`` of a batch (float64, shape ``(6,)``).

    Args:
        ctx_tokens: Prior context length of each request in the batch (tokens already in its KV cache).
        new_tokens: Tokens each request processes in this pass.
    """
    c = np.asarray(ctx_tokens, dtype=np.float64)
    q = np.asarray(new_tokens, dtype=np.float64)
    return np.array([1.0, float(q.size), q.sum(), (q * c).sum(), (q * q).sum(), c.sum()])


@dataclass(frozen=True)
class BlockCost:
    """Work and traffic of one block for one pass over a batch.

    Attributes:
        macs: Multiply-accumulate operations (1 MAC = 2 FLOPs) in GEMM/GEMV-like operators.
        vec_ops: Element-wise arithmetic on the vector units (residual adds, scaling, SSM scan updates,
            depthwise-convolution multiply-adds, norm arithmetic), counted per element operation.
        sfu_ops: Special-function operations (exp of softmax, SiLU/softplus/squared-ReLU activations, rsqrt of
            norms), counted per element.
        weight_bytes: Weight bytes read for this pass (once per pass: weights are shared by the batch).
        act_bytes: Activation bytes in + out of the block (inputs, outputs, inter-operator intermediates that
            leave the operator).
        kv_read_bytes: KV-cache bytes read (attention) plus SSM/conv state bytes read.
        kv_write_bytes: KV-cache bytes appended plus SSM/conv state bytes written back.
        io_bytes: Bytes of the block's input + output activation that cross the network between blocks
            (hidden-size vectors per new token).
    """

    macs: float = 0.0
    vec_ops: float = 0.0
    sfu_ops: float = 0.0
    weight_bytes: float = 0.0
    act_bytes: float = 0.0
    kv_read_bytes: float = 0.0
    kv_write_bytes: float = 0.0
    io_bytes: float = 0.0

    @property
    def mem_bytes(self) -> float:
        """Bytes that must come from or go to memory (HBM): weights + KV/state read + KV/state write."""
        return self.weight_bytes + self.kv_read_bytes + self.kv_write_bytes

    def __add__(self, other: BlockCost) -> BlockCost:
        return BlockCost(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(BlockCost)))

    def as_array(self) -> np.ndarray:
        """The fields as a float64 vector in :data:`COST_FIELDS` order."""
        return np.array([getattr(self, f) for f in COST_FIELDS], dtype=np.float64)

    @classmethod
    def from_array(cls, values: np.ndarray) -> BlockCost:
        """Inverse of :meth:`as_array`."""
        return cls(*(float(v) for v in values))


#: Field names of :class:`BlockCost`, the row order of coefficient matrices.
COST_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(BlockCost))


@dataclass(frozen=True)
class Gemm:
    """One matrix multiply ``(m × k) @ (k × n)``, repeated ``count`` times.

    Attributes:
        name: Operator name (e.g. ``"qkv_proj"``, ``"attn_scores"``).
        m: Rows of the left operand (tokens).
        n: Columns of the right operand (output features).
        k: Reduction dimension.
        count: Independent repetitions (heads, requests).
        weight: True when the right operand is a weight matrix (streamed from memory, shareable across the
            batch); False for activation×activation products (attention scores and values).
        density: Fraction of the ``m·n·k`` products actually performed (1.0 for a dense GEMM; causal attention
            over new tokens skips the masked upper triangle, see ``hydra_opt.workload.layers``).
    """

    name: str
    m: int
    n: int
    k: int
    count: int = 1
    weight: bool = True
    density: float = 1.0

    @property
    def macs(self) -> float:
        """Multiply-accumulates of all repetitions (masked products excluded)."""
        dense = self.m * self.n * self.k * self.count
        return dense if self.density == 1.0 else dense * self.density
