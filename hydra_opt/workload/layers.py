"""Layer specifications and their operation counts, as linear coefficients in the batch aggregates.

Every layer turns into a ``(len(COST_FIELDS), len(AGG_NAMES))`` matrix ``K`` such that, for a batch with prior
contexts ``c_i`` and new tokens ``q_i``, ``K @ [1, n, Σq, Σq·c, Σq², Σc]`` is the layer's :class:`BlockCost`
vector (see :mod:`hydra_opt.workload.cost`). Counting conventions (docs/workload.md has the full list):

* one MAC = one multiply-accumulate in a GEMM/GEMV (weight GEMMs run over Σq tokens; attention score and value
  products are causal: new token ``j`` of a request with context ``c`` attends to ``c + j + 1`` keys, so a request
  costs ``q·c + q(q+1)/2`` score MACs per head and unit of head dimension);
* vector ops: one per element operation on the vector unit (a depthwise-convolution tap or an SSM-state
  multiply-add counts once); SFU ops: one per transcendental/activation element (exp, SiLU, softplus, squared
  ReLU, GELU, rsqrt);
* every layer is pre-norm with a residual add (RMSNorm = 4 vector ops per element + 1 rsqrt per token);
* activation bytes: inputs + outputs of every operator of the layer (score matrices of attention are fused and do
  not leave the operator);
* KV bytes read: attention reads the K and V of all ``c + q`` positions once per pass (decode: the whole context;
  prefill: the new tokens' KV is written to the cache and streamed back by the tiled attention kernel); KV bytes
  written: ``q`` new positions; SSM + conv state: read once and written once per pass per sequence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hydra_opt.workload.cost import AGG_NAMES, COST_FIELDS, Gemm
from hydra_opt.workload.precision import Precision

__all__ = [
    "Layer",
    "AttentionLayer",
    "MLPLayer",
    "MoELayer",
    "Mamba2Layer",
    "Mamba1Layer",
    "LinearLayer",
    "EmbeddingLayer",
    "LMHeadLayer",
    "MIXER_KINDS",
    "ACTIVATIONS",
    "causal_pairs",
]

# Aggregate indices: [1, n, Σq, Σq·c, Σq², Σc].
ONE, N, Q, QC, Q2, C = range(len(AGG_NAMES))
_F = {name: i for i, name in enumerate(COST_FIELDS)}

#: Layer kinds that are mixers (start a block) and the block family each gives.
MIXER_KINDS: dict[str, str] = {"attention": "attention", "mamba2": "mamba", "mamba1": "mamba"}

# RMSNorm per element: square, accumulate, scale by the rsqrt, multiply by the weight.
_NORM_VEC = 4


def causal_pairs(ctx: np.ndarray, new: np.ndarray) -> np.ndarray:
    """(query, key) pairs per request of causal attention: ``q·c + q(q+1)/2`` (new token j sees c+j+1 keys)."""
    c = np.asarray(ctx, dtype=np.float64)
    q = np.asarray(new, dtype=np.float64)
    return q * c + q * (q + 1.0) / 2.0


class _Coeffs:
    """Accumulates a coefficient matrix field by field."""

    def __init__(self) -> None:
        self.m = np.zeros((len(COST_FIELDS), len(AGG_NAMES)), dtype=np.float64)

    def add(self, field: str, agg: int, value: float) -> None:
        self.m[_F[field], agg] += value


@dataclass(frozen=True)
class Layer:
    """Base class of layer specs.

    Attributes:
        shared: Weight-sharing group: layers of one model with the same non-empty ``shared`` name use one copy of
            their shareable weights (Zamba2's shared transformer blocks). Weights are still *read* by every use.
    """

    shared: str = ""

    kind = "layer"

    @property
    def is_mixer(self) -> bool:
        """Whether the layer starts a block (attention or Mamba mixer)."""
        return self.kind in MIXER_KINDS

    @property
    def in_width(self) -> int:
        """Width of the layer's input vector per token (elements)."""
        raise NotImplementedError

    def params(self) -> int:
        """Weight elements the layer reads in one pass (all of them, shared or not)."""
        raise NotImplementedError

    def shared_params(self) -> int:
        """The part of :meth:`params` that is stored once per ``shared`` group (0 for unshared layers)."""
        return self.params() if self.shared else 0

    def stored_params(self) -> int:
        """Parameters this use of the layer stores on its own (the shared part is counted once per model)."""
        return self.params() - self.shared_params()

    def kv_elems_per_token(self) -> int:
        """KV-cache elements appended per token of context (attention only)."""
        return 0

    def state_elems(self) -> int:
        """Recurrent (SSM + conv) state elements per sequence (Mamba only)."""
        return 0

    def coeffs(self, precision: Precision) -> np.ndarray:
        """Linear coefficients ``(len(COST_FIELDS), len(AGG_NAMES))`` of one pass (see module docstring)."""
        raise NotImplementedError

    def _weight_read(self, precision: Precision) -> _Coeffs:
        """A coefficient accumulator holding the pass's weight read: every pass reads all :meth:`params`."""
        k = _Coeffs()
        k.add("weight_bytes", ONE, self.params() * precision.weight_bytes)
        return k

    def gemms(self, ctx: np.ndarray, new: np.ndarray) -> list[Gemm]:
        """GEMMs of one pass over the batch (weight GEMMs with ``m = Σq``)."""
        return []


def _norm_residual(k: _Coeffs, width: int, out: int, ab: float) -> None:
    """Pre-norm over ``width`` and the residual add over ``out``, per new token."""
    k.add("vec_ops", Q, _NORM_VEC * width + out)
    k.add("sfu_ops", Q, 1)
    k.add("act_bytes", Q, ab * (2 * width + 3 * out))


@dataclass(frozen=True)
class AttentionLayer(Layer):
    """Self-attention with grouped-query heads (MHA when ``kv_heads == heads``).

    Attributes:
        hidden: Model width d (output width of the layer).
        heads: Query heads.
        kv_heads: Key/value heads (GQA groups).
        head_dim: Dimension per head.
        input_width: Width of the input if not ``hidden`` (Zamba2 attends over concat(hidden, embedding)).
        rope: Rotary position embedding applied to queries and keys.
        qkv_bias: Bias on the Q/K/V projections.
    """

    hidden: int = 0
    heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    input_width: int = 0
    rope: bool = True
    qkv_bias: bool = False

    kind = "attention"

    @property
    def in_width(self) -> int:
        return self.input_width or self.hidden

    @property
    def qkv_width(self) -> int:
        return self.head_dim * (self.heads + 2 * self.kv_heads)

    def params(self) -> int:
        bias = self.qkv_width if self.qkv_bias else 0
        return self.in_width + self.in_width * self.qkv_width + bias + self.heads * self.head_dim * self.hidden

    def kv_elems_per_token(self) -> int:
        return 2 * self.kv_heads * self.head_dim

    def coeffs(self, precision: Precision) -> np.ndarray:
        ab, kb = precision.act_bytes, precision.kv_bytes
        k = self._weight_read(precision)
        w, d, h, dh = self.in_width, self.hidden, self.heads, self.head_dim
        qkv, attn_out = self.qkv_width, h * dh
        # Projections (per token) and the causal score/value products (per query-key pair and head).
        k.add("macs", Q, w * qkv + attn_out * d)
        for agg, factor in ((QC, 1.0), (Q2, 0.5), (Q, 0.5)):
            k.add("macs", agg, 2 * h * dh * factor)
            # softmax per score: scale, running max, subtract, accumulate; exp on the SFU.
            k.add("vec_ops", agg, 4 * h * factor)
            k.add("sfu_ops", agg, h * factor)
        _norm_residual(k, w, d, ab)
        rope = 3 * (h + self.kv_heads) * dh if self.rope else 0
        bias = qkv if self.qkv_bias else 0
        k.add("vec_ops", Q, rope + bias + attn_out)  # + normalising the output by the softmax sum
        k.add("act_bytes", Q, ab * ((w + qkv) + (qkv + attn_out) + (attn_out + d)))
        kv = self.kv_elems_per_token() * kb
        k.add("kv_read_bytes", C, kv)
        k.add("kv_read_bytes", Q, kv)
        k.add("kv_write_bytes", Q, kv)
        return k.m

    def gemms(self, ctx: np.ndarray, new: np.ndarray) -> list[Gemm]:
        tokens = int(np.sum(new))
        out = [
            Gemm("qkv_proj", tokens, self.qkv_width, self.in_width),
            Gemm("o_proj", tokens, self.hidden, self.heads * self.head_dim),
        ]
        for c, q in zip(np.asarray(ctx).tolist(), np.asarray(new).tolist(), strict=True):
            if q <= 0:
                continue
            keys = int(c) + int(q)
            density = float(causal_pairs(c, q)) / (q * keys)
            out.append(Gemm("attn_scores", int(q), keys, self.head_dim, self.heads, False, density))
            out.append(Gemm("attn_values", int(q), self.head_dim, keys, self.heads, False, density))
        return out


#: Activation functions of MLP/MoE layers; each costs one SFU operation per activated element.
ACTIVATIONS: tuple[str, ...] = ("silu", "relu2", "gelu", "relu")


@dataclass(frozen=True)
class MLPLayer(Layer):
    """Feed-forward layer: gated (SwiGLU-style: gate, up, down) or ungated (up, activation, down).

    Attributes:
        hidden: Model width d.
        intermediate: Intermediate width I.
        gated: Whether there is a gate projection.
        activation: ``silu``, ``relu2`` (squared ReLU), ``gelu``, ``relu``.
        lora_rank: Rank of a per-use LoRA adapter on the up (gate+up) projection (Zamba2), 0 for none; its
            weights are never shared.
    """

    hidden: int = 0
    intermediate: int = 0
    gated: bool = True
    activation: str = "silu"
    lora_rank: int = 0

    kind = "mlp"

    @property
    def in_width(self) -> int:
        return self.hidden

    @property
    def _up(self) -> int:
        return (2 if self.gated else 1) * self.intermediate

    def _lora(self) -> int:
        return self.lora_rank * (self.hidden + self._up)

    def params(self) -> int:
        return self.hidden + self.hidden * self._up + self.intermediate * self.hidden + self._lora()

    def shared_params(self) -> int:
        return self.params() - self._lora() if self.shared else 0

    def coeffs(self, precision: Precision) -> np.ndarray:
        ab = precision.act_bytes
        k = self._weight_read(precision)
        d, i, up = self.hidden, self.intermediate, self._up
        k.add("macs", Q, d * up + i * d + self._lora())
        _norm_residual(k, d, d, ab)
        k.add("vec_ops", Q, (i if self.gated else 0) + (up if self.lora_rank else 0))
        k.add("sfu_ops", Q, i)
        k.add("act_bytes", Q, ab * ((d + up) + (up + i) + (i + d)))
        return k.m

    def gemms(self, ctx: np.ndarray, new: np.ndarray) -> list[Gemm]:
        t = int(np.sum(new))
        out = [Gemm("mlp_up", t, self._up, self.hidden), Gemm("mlp_down", t, self.hidden, self.intermediate)]
        if self.lora_rank:
            out += [Gemm("lora_a", t, self.lora_rank, self.hidden), Gemm("lora_b", t, self._up, self.lora_rank)]
        return out


@dataclass(frozen=True)
class MoELayer(Layer):
    """Mixture-of-experts feed-forward layer (router + ``experts`` gated/ungated MLPs, ``top_k`` per token).

    All experts' weights are counted as read once per pass (a batch of more than a few tokens touches most
    experts; conservative for tiny batches). Expert MACs assume exactly ``top_k`` experts per token.
    """

    hidden: int = 0
    intermediate: int = 0
    experts: int = 0
    top_k: int = 0
    gated: bool = True
    activation: str = "silu"

    kind = "moe"

    @property
    def in_width(self) -> int:
        return self.hidden

    @property
    def _up(self) -> int:
        return (2 if self.gated else 1) * self.intermediate

    def _expert_params(self) -> int:
        return self.hidden * self._up + self.intermediate * self.hidden

    def params(self) -> int:
        return self.hidden + self.hidden * self.experts + self.experts * self._expert_params()

    def coeffs(self, precision: Precision) -> np.ndarray:
        ab = precision.act_bytes
        k = self._weight_read(precision)
        d, i, e, tk, up = self.hidden, self.intermediate, self.experts, self.top_k, self._up
        k.add("macs", Q, d * e + tk * self._expert_params())
        _norm_residual(k, d, d, ab)
        # router softmax (per expert), gate multiply, weighted combination of the top-k outputs
        k.add("vec_ops", Q, 3 * e + tk * ((i if self.gated else 0) + d))
        k.add("sfu_ops", Q, e + tk * i)
        k.add("act_bytes", Q, ab * ((d + e) + tk * ((d + up) + (up + i) + (i + d))))
        return k.m

    def gemms(self, ctx: np.ndarray, new: np.ndarray) -> list[Gemm]:
        t = int(np.sum(new))
        # Balanced routing: each expert gets t·top_k/experts tokens (rounded up).
        per = -(-t * self.top_k // self.experts) if self.experts else 0
        return [
            Gemm("router", t, self.experts, self.hidden),
            Gemm("expert_up", per, self._up, self.hidden, self.experts),
            Gemm("expert_down", per, self.hidden, self.intermediate, self.experts),
        ]


@dataclass(frozen=True)
class Mamba2Layer(Layer):
    """Mamba-2 mixer (SSD): in_proj → depthwise causal conv + SiLU → selective scan → gated RMSNorm → out_proj.

    Attributes:
        hidden: Model width d.
        num_heads: SSM heads.
        head_dim: Channels per head.
        d_state: State size N per channel.
        n_groups: B/C groups.
        d_conv: Convolution width.
        d_inner: Scan/out-projection width (default ``num_heads·head_dim``).
        in_proj_dim: in_proj output width (default ``2·d_inner + 2·n_groups·d_state + num_heads``).
        conv_channels: Convolved channels (default ``d_inner + 2·n_groups·d_state``).
    """

    hidden: int = 0
    num_heads: int = 0
    head_dim: int = 0
    d_state: int = 0
    n_groups: int = 1
    d_conv: int = 4
    d_inner: int = 0
    in_proj_dim: int = 0
    conv_channels: int = 0

    kind = "mamba2"

    @property
    def in_width(self) -> int:
        return self.hidden

    @property
    def di(self) -> int:
        return self.d_inner or self.num_heads * self.head_dim

    @property
    def proj(self) -> int:
        return self.in_proj_dim or 2 * self.di + 2 * self.n_groups * self.d_state + self.num_heads

    @property
    def conv(self) -> int:
        return self.conv_channels or self.di + 2 * self.n_groups * self.d_state

    def params(self) -> int:
        d, di, nh = self.hidden, self.di, self.num_heads
        # pre-norm, in_proj, conv weight + bias, dt_bias/A_log/D, gated norm, out_proj
        return d + d * self.proj + self.conv * (self.d_conv + 1) + 3 * nh + di + di * d

    def state_elems(self) -> int:
        return self.di * self.d_state + (self.d_conv - 1) * self.conv

    def coeffs(self, precision: Precision) -> np.ndarray:
        ab = precision.act_bytes
        k = self._weight_read(precision)
        d, di, nh, n, cv = self.hidden, self.di, self.num_heads, self.d_state, self.conv
        k.add("macs", Q, d * self.proj + di * d)
        _norm_residual(k, d, d, ab)
        scan = 4 * di * n  # state: dA·h + (dt·x)·B (3 ops), output C·h (1 op) per channel and state element
        vec = cv * self.d_conv + cv + 2 * nh + scan + 3 * di + _NORM_VEC * di
        k.add("vec_ops", Q, vec)  # conv taps + bias, dt+bias and dt·A, scan, dt·x / D-skip / gate, gated norm
        k.add("sfu_ops", Q, cv + 2 * nh + di + self.n_groups)  # SiLU(conv), softplus+exp per head, SiLU(z), rsqrt
        k.add("act_bytes", Q, ab * ((d + self.proj) + 2 * cv + (cv + nh + di) + 3 * di + 2 * di + (di + d)))
        st = self.state_elems() * precision.kv_bytes
        k.add("kv_read_bytes", N, st)
        k.add("kv_write_bytes", N, st)
        return k.m

    def gemms(self, ctx: np.ndarray, new: np.ndarray) -> list[Gemm]:
        t = int(np.sum(new))
        return [Gemm("in_proj", t, self.proj, self.hidden), Gemm("out_proj", t, self.hidden, self.di)]


@dataclass(frozen=True)
class Mamba1Layer(Layer):
    """Mamba-1 mixer (Jamba): in_proj → conv + SiLU → x_proj/dt_proj → selective scan → gate → out_proj."""

    hidden: int = 0
    d_inner: int = 0
    d_state: int = 16
    d_conv: int = 4
    dt_rank: int = 0

    kind = "mamba1"

    @property
    def in_width(self) -> int:
        return self.hidden

    @property
    def rank(self) -> int:
        return self.dt_rank or math.ceil(self.hidden / 16)

    def params(self) -> int:
        d, di, n, r = self.hidden, self.d_inner, self.d_state, self.rank
        # norm, in_proj (x,z), conv w+b, x_proj (dt,B,C), dt_proj w+b, A, D, out_proj
        return d + d * 2 * di + di * (self.d_conv + 1) + di * (r + 2 * n) + r * di + di + di * n + di + di * d

    def state_elems(self) -> int:
        return self.d_inner * self.d_state + (self.d_conv - 1) * self.d_inner

    def coeffs(self, precision: Precision) -> np.ndarray:
        ab = precision.act_bytes
        k = self._weight_read(precision)
        d, di, n, r = self.hidden, self.d_inner, self.d_state, self.rank
        k.add("macs", Q, d * 2 * di + di * (r + 2 * n) + r * di + di * d)
        _norm_residual(k, d, d, ab)
        k.add("vec_ops", Q, di * self.d_conv + di + di + di * n + 4 * di * n + 3 * di)
        k.add("sfu_ops", Q, di + di + di * n + di)  # SiLU(conv), softplus(dt), exp(dt·A), SiLU(z)
        k.add("act_bytes", Q, ab * ((d + 2 * di) + 2 * di + (di + r + 2 * n) + (r + di) + 3 * di + 3 * di + (di + d)))
        st = self.state_elems() * precision.kv_bytes
        k.add("kv_read_bytes", N, st)
        k.add("kv_write_bytes", N, st)
        return k.m

    def gemms(self, ctx: np.ndarray, new: np.ndarray) -> list[Gemm]:
        t = int(np.sum(new))
        di, r, n = self.d_inner, self.rank, self.d_state
        return [
            Gemm("in_proj", t, 2 * di, self.hidden),
            Gemm("x_proj", t, r + 2 * n, di),
            Gemm("dt_proj", t, di, r),
            Gemm("out_proj", t, self.hidden, di),
        ]


@dataclass(frozen=True)
class LinearLayer(Layer):
    """A plain projection ``in_features → out_features`` (Zamba2's per-use linear after a shared block)."""

    in_features: int = 0
    out_features: int = 0

    kind = "linear"

    @property
    def in_width(self) -> int:
        return self.in_features

    def params(self) -> int:
        return self.in_features * self.out_features

    def coeffs(self, precision: Precision) -> np.ndarray:
        k = self._weight_read(precision)
        k.add("macs", Q, self.params())
        k.add("act_bytes", Q, precision.act_bytes * (self.in_features + self.out_features))
        return k.m

    def gemms(self, ctx: np.ndarray, new: np.ndarray) -> list[Gemm]:
        return [Gemm("linear", int(np.sum(new)), self.out_features, self.in_features)]


@dataclass(frozen=True)
class EmbeddingLayer(Layer):
    """Token embedding lookup (part of the first block): reads one row per new token."""

    vocab: int = 0
    hidden: int = 0

    kind = "embedding"

    @property
    def in_width(self) -> int:
        return 0

    def params(self) -> int:
        return self.vocab * self.hidden

    def coeffs(self, precision: Precision) -> np.ndarray:
        k = _Coeffs()
        # A gather: only the rows of the new tokens are read.
        k.add("weight_bytes", Q, self.hidden * precision.weight_bytes)
        k.add("act_bytes", Q, self.hidden * precision.act_bytes)
        return k.m


@dataclass(frozen=True)
class LMHeadLayer(Layer):
    """Final norm + LM head (part of the last block): logits for the last new token of every request.

    With ``tied`` weights the head re-uses the embedding matrix (no extra stored parameters, but the matrix is
    still read in every pass).
    """

    vocab: int = 0
    hidden: int = 0
    tied: bool = False

    kind = "lm_head"

    @property
    def in_width(self) -> int:
        return self.hidden

    def params(self) -> int:
        return self.hidden + self.vocab * self.hidden

    def stored_params(self) -> int:
        """Parameters stored for this layer (the final norm only when tied to the embedding)."""
        return self.hidden if self.tied else self.params()

    def coeffs(self, precision: Precision) -> np.ndarray:
        ab = precision.act_bytes
        k = self._weight_read(precision)
        d, v = self.hidden, self.vocab
        k.add("macs", N, d * v)  # one sampled position per request and pass
        k.add("vec_ops", N, _NORM_VEC * d + v)  # final norm + arg-max/sampling scan over the logits
        k.add("sfu_ops", N, 1)
        k.add("act_bytes", N, ab * (2 * d + d + v))
        return k.m

    def gemms(self, ctx: np.ndarray, new: np.ndarray) -> list[Gemm]:
        return [Gemm("lm_head", int(np.asarray(new).size), self.vocab, self.hidden)]
