"""Models as ordered lists of blocks, loaded from YAML, with per-block linear cost coefficients.

A *block* is the scheduling unit: one mixer layer (attention or Mamba) plus the MLP/MoE/linear layers that follow
it up to the next mixer. Nemotron-H's pattern ``M-M-M-M*-…`` thus gives blocks "Mamba+MLP", "Mamba only" and
"attention+MLP", like the HYDRA artifact's 28 blocks. The token embedding belongs to the first block and the final
norm + LM head to the last block (so the block count equals the number of mixers, as in HYDRA; the last block
carries the head's vocab×d GEMM at the end of every pass).

Model YAML schema (``hydra_opt/data/models/*.yaml``; docs/workload.md)::

    name: llama-3-8b            # required
    display_name: Llama-3-8B
    hf_id: meta-llama/Meta-Llama-3-8B
    source: ["..."]             # required: where every number comes from
    hidden_size: 4096
    vocab_size: 128256
    max_position: 8192          # context cap of every block (tokens)
    tie_embeddings: false
    published_params: 8030261248
    published_params_source: "..."
    notes: ["..."]
    layer_types:                # one character per layer type
      "*": {kind: attention, heads: 32, kv_heads: 8, head_dim: 128}
      "-": {kind: mlp, intermediate: 14336, gated: true, activation: silu}
    pattern: "[*-]x32"          # characters, ``[...]xN`` repeats, whitespace ignored
    variants:
      hydra: {description: "...", max_position: 4096, layer_types: {"-": {gated: false}}}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from hydra_opt.config.errors import ConfigError
from hydra_opt.config.reader import Node, load_yaml
from hydra_opt.workload.cost import AGG_NAMES, COST_FIELDS, BlockCost, Gemm, batch_aggregates
from hydra_opt.workload.layers import (
    ACTIVATIONS,
    MIXER_KINDS,
    AttentionLayer,
    EmbeddingLayer,
    Layer,
    LinearLayer,
    LMHeadLayer,
    Mamba1Layer,
    Mamba2Layer,
    MLPLayer,
    MoELayer,
)
from hydra_opt.workload.precision import Precision, get_precision

__all__ = [
    "Block",
    "Model",
    "load_model",
    "list_models",
    "block_cost",
    "block_gemms",
    "prefill_cost",
    "decode_cost",
]

_IO = COST_FIELDS.index("io_bytes")
_Q = AGG_NAMES.index("sum_q")


@dataclass(frozen=True)
class Block:
    """One scheduling unit of a model.

    Attributes:
        index: Position in the model (0-based).
        family: ``"attention"`` or ``"mamba"`` (the mixer's family).
        layers: The layers in execution order (mixer first; the first block also starts with the embedding, the
            last block ends with the final norm + LM head).
        hidden_size: Model width d (elements).
        max_context: Context cap of this block in tokens (the model's ``max_position``); callers cap contexts
            with :meth:`Model.cap_context` before pricing (the coefficients are linear, a cap is not).
    """

    index: int
    family: str
    layers: tuple[Layer, ...]
    hidden_size: int
    max_context: int
    _cache: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def mixer(self) -> Layer:
        """The block's attention or Mamba layer."""
        return next(layer for layer in self.layers if layer.is_mixer)

    @property
    def kinds(self) -> tuple[str, ...]:
        """Layer kinds in order, e.g. ``("mamba2", "mlp")``."""
        return tuple(layer.kind for layer in self.layers)

    @property
    def param_count(self) -> int:
        """Weight elements read by one pass of this block (shared weights counted in full)."""
        return sum(layer.params() for layer in self.layers)

    def weight_bytes(self, precision: str | Precision) -> float:
        """Bytes of weights one pass reads (embedding rows excluded: they depend on the tokens)."""
        p = get_precision(precision)
        return float(sum(layer.params() for layer in self.layers if layer.kind != "embedding") * p.weight_bytes)

    @property
    def kv_elems_per_token(self) -> int:
        """KV-cache elements per token of context."""
        return sum(layer.kv_elems_per_token() for layer in self.layers)

    @property
    def state_elems(self) -> int:
        """SSM + conv state elements per sequence."""
        return sum(layer.state_elems() for layer in self.layers)

    def kv_bytes_per_token(self, precision: str | Precision) -> float:
        """KV-cache bytes per token of context."""
        return self.kv_elems_per_token * get_precision(precision).kv_bytes

    def state_bytes(self, precision: str | Precision) -> float:
        """SSM + conv state bytes per sequence."""
        return self.state_elems * get_precision(precision).kv_bytes

    def coeffs(self, precision: str | Precision) -> np.ndarray:
        """Linear coefficients ``(len(COST_FIELDS), len(AGG_NAMES))`` of one pass (cached; do not modify)."""
        p = get_precision(precision)
        m = self._cache.get(p)
        if m is None:
            m = sum(layer.coeffs(p) for layer in self.layers)
            first = next(layer for layer in self.layers if layer.kind != "embedding")
            # The hidden vector(s) entering the block and the hidden vector leaving it, per new token.
            m[_IO, _Q] += (first.in_width + self.hidden_size) * p.act_bytes
            m.setflags(write=False)
            self._cache[p] = m
        return m


def block_cost(block: Block, ctx: Any, new: Any, precision: str | Precision) -> BlockCost:
    """Cost of one pass of ``block`` over a batch (request i: ``ctx[i]`` prior tokens, ``new[i]`` new tokens)."""
    return BlockCost.from_array(block.coeffs(precision) @ batch_aggregates(ctx, new))


def block_gemms(block: Block, ctx: Any, new: Any) -> list[Gemm]:
    """The GEMMs of one pass: weight GEMMs with ``m = Σq``; attention score/value GEMMs per request (x heads).

    For a batch with different context lengths the per-request GEMMs differ in shape; they are all returned.
    Their MACs sum to :func:`block_cost`'s ``macs`` (MoE: exactly only with balanced routing).
    """
    c = np.atleast_1d(np.asarray(ctx, dtype=np.int64))
    q = np.atleast_1d(np.asarray(new, dtype=np.int64))
    out: list[Gemm] = []
    for layer in block.layers:
        out.extend(layer.gemms(c, q))
    return out


def prefill_cost(block: Block, prompt_tokens: int, precision: str | Precision, batch: int = 1) -> BlockCost:
    """Cost of prefilling ``batch`` prompts of ``prompt_tokens`` tokens each in one pass."""
    return block_cost(block, np.zeros(batch), np.full(batch, prompt_tokens), precision)


def decode_cost(block: Block, context_tokens: int, precision: str | Precision, batch: int = 1) -> BlockCost:
    """Cost of one decode step of ``batch`` requests at context ``context_tokens`` each."""
    return block_cost(block, np.full(batch, context_tokens), np.ones(batch), precision)


@dataclass(frozen=True)
class Model:
    """A served model.

    Attributes:
        name: Registry name, e.g. ``"nemotron-h-4b"``.
        blocks: The blocks in execution order.
        hidden_size: Model width d.
        vocab_size: Vocabulary size.
        max_position: Context cap (tokens) of every block.
        source: Where the shapes come from.
        display_name: Human name, e.g. ``"Nemotron-H-4B"``.
        hf_id: Hugging Face id of the checkpoint the shapes describe.
        variant: ``""`` for the real checkpoint, ``"hydra"`` for the HYDRA artifact's version.
        tie_embeddings: Whether the LM head shares the embedding matrix.
        published_params: The published parameter total, if known.
        published_params_source: Where that figure comes from.
        notes: Free-form notes (unverified fields, variant differences).
    """

    name: str
    blocks: tuple[Block, ...]
    hidden_size: int
    vocab_size: int
    max_position: int
    source: tuple[str, ...]
    display_name: str = ""
    hf_id: str = ""
    variant: str = ""
    tie_embeddings: bool = False
    published_params: int | None = None
    published_params_source: str = ""
    notes: tuple[str, ...] = ()
    _cache: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    # -- structure ------------------------------------------------------------------------------------------
    @property
    def n_blocks(self) -> int:
        return len(self.blocks)

    @property
    def families(self) -> tuple[str, ...]:
        """Family of every block."""
        return tuple(b.family for b in self.blocks)

    @property
    def family(self) -> str:
        """``"transformer"``, ``"mamba"`` or ``"hybrid"``."""
        fams = set(self.families)
        return "hybrid" if len(fams) > 1 else ("transformer" if fams == {"attention"} else "mamba")

    @property
    def param_count(self) -> int:
        """Stored parameters: every layer once, shared weights once, embeddings and (untied) LM head included."""
        total = 0
        seen: set[tuple[str, str, int]] = set()
        for b in self.blocks:
            for layer in b.layers:
                total += layer.stored_params()
                key = (layer.shared, layer.kind, layer.shared_params())
                if layer.shared and key not in seen:
                    seen.add(key)
                    total += layer.shared_params()
        return total

    def cap_context(self, ctx: Any) -> np.ndarray:
        """Contexts capped at :attr:`max_position` (HYDRA caps every block's context this way)."""
        return np.minimum(np.asarray(ctx), self.max_position)

    # -- sizes ----------------------------------------------------------------------------------------------
    def weight_bytes(self, precision: str | Precision) -> float:
        """Bytes of all stored weights (what must fit in memory)."""
        return self.param_count * get_precision(precision).weight_bytes

    def kv_bytes_per_token(self, precision: str | Precision) -> float:
        """KV-cache bytes per token of context, all blocks."""
        return sum(b.kv_elems_per_token for b in self.blocks) * get_precision(precision).kv_bytes

    def state_bytes_per_seq(self, precision: str | Precision) -> float:
        """SSM + conv state bytes per sequence, all blocks."""
        return sum(b.state_elems for b in self.blocks) * get_precision(precision).kv_bytes

    def block_weight_bytes(self, precision: str | Precision) -> np.ndarray:
        """Weight bytes read by one pass of each block, shape ``(n_blocks,)``."""
        return np.array([b.weight_bytes(precision) for b in self.blocks])

    def block_kv_bytes_per_token(self, precision: str | Precision) -> np.ndarray:
        """KV bytes per context token of each block, shape ``(n_blocks,)``."""
        return np.array([b.kv_bytes_per_token(precision) for b in self.blocks], dtype=np.float64)

    def block_state_bytes(self, precision: str | Precision) -> np.ndarray:
        """SSM + conv state bytes per sequence of each block, shape ``(n_blocks,)``."""
        return np.array([b.state_bytes(precision) for b in self.blocks], dtype=np.float64)

    # -- costs ----------------------------------------------------------------------------------------------
    def block_coeffs(self, precision: str | Precision) -> np.ndarray:
        """Coefficients ``(n_blocks, len(COST_FIELDS), len(AGG_NAMES))`` (cached, read-only)."""
        p = get_precision(precision)
        m = self._cache.get(p)
        if m is None:
            m = np.stack([b.coeffs(p) for b in self.blocks])
            m.setflags(write=False)
            self._cache[p] = m
        return m

    def pass_coeffs(self, precision: str | Precision) -> np.ndarray:
        """Coefficients of one pass through the whole model, ``(len(COST_FIELDS), len(AGG_NAMES))``."""
        p = get_precision(precision)
        key = ("pass", p)
        m = self._cache.get(key)
        if m is None:
            m = self.block_coeffs(p).sum(axis=0)
            m.setflags(write=False)
            self._cache[key] = m
        return m

    def pass_cost(self, ctx: Any, new: Any, precision: str | Precision) -> BlockCost:
        """Cost of one pass through all blocks."""
        return BlockCost.from_array(self.pass_coeffs(precision) @ batch_aggregates(ctx, new))

    def describe(self) -> str:
        """One line: name, parameters, blocks by family."""
        n_att = self.families.count("attention")
        return (
            f"{self.name}: {self.param_count / 1e9:.3f} B params, {self.n_blocks} blocks "
            f"({n_att} attention, {self.n_blocks - n_att} mamba)"
        )


# ---------------------------------------------------------------------------------------------------------------
# YAML loading
# ---------------------------------------------------------------------------------------------------------------

_KIND_CLASSES: dict[str, type[Layer]] = {
    "attention": AttentionLayer,
    "mlp": MLPLayer,
    "moe": MoELayer,
    "mamba2": Mamba2Layer,
    "mamba1": Mamba1Layer,
    "linear": LinearLayer,
}
#: Keys allowed per layer kind (besides ``kind``); ints unless listed in _BOOL/_STR.
_KIND_KEYS: dict[str, tuple[str, ...]] = {
    "attention": ("heads", "kv_heads", "head_dim", "input_width", "rope", "qkv_bias", "shared"),
    "mlp": ("intermediate", "gated", "activation", "lora_rank", "shared"),
    "moe": ("intermediate", "experts", "top_k", "gated", "activation", "shared"),
    "mamba2": (
        "num_heads",
        "head_dim",
        "d_state",
        "n_groups",
        "d_conv",
        "d_inner",
        "in_proj_dim",
        "conv_channels",
        "shared",
    ),
    "mamba1": ("d_inner", "d_state", "d_conv", "dt_rank", "shared"),
    "linear": ("in_features", "out_features", "shared"),
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "attention": ("heads", "kv_heads", "head_dim"),
    "mlp": ("intermediate",),
    "moe": ("intermediate", "experts", "top_k"),
    "mamba2": ("num_heads", "head_dim", "d_state"),
    "mamba1": ("d_inner",),
    "linear": (),
}
_BOOL = {"rope", "qkv_bias", "gated"}
_STR = {"shared", "activation"}
_TOP_KEYS = (
    "name",
    "display_name",
    "hf_id",
    "family",
    "source",
    "hidden_size",
    "vocab_size",
    "max_position",
    "tie_embeddings",
    "published_params",
    "published_params_source",
    "notes",
    "layer_types",
    "pattern",
    "variants",
)
_VARIANT_KEYS = ("description", "source", "max_position", "layer_types", "pattern", "notes")
_REPEAT = re.compile(r"\[([^\[\]]+)\]x(\d+)")
MAX_LAYERS = 10_000


def _expand_pattern(node: Node) -> str:
    text = re.sub(r"\s+", "", node.str(max_len=20_000))
    for _ in range(8):  # nested repeats, a few levels deep
        new = _REPEAT.sub(lambda m: m.group(1) * int(m.group(2)), text)
        if len(new) > MAX_LAYERS:
            raise node.error(f"expands to more than {MAX_LAYERS} layers")
        if new == text:
            break
        text = new
    if not text:
        raise node.error("is empty; expected layer-type characters")
    return text


def _layer_from(node: Node, hidden: int) -> Layer:
    node.mapping()
    kind = node.get("kind").str(choices=tuple(_KIND_CLASSES))
    allowed = _KIND_KEYS[kind]
    kwargs: dict[str, Any] = {}
    for key in allowed:
        if not node.has(key):
            if key in _REQUIRED[kind]:
                node.get(key)  # raises "is required"
            continue
        child = node.get(key)
        if key in _BOOL:
            kwargs[key] = child.bool()
        elif key == "activation":
            kwargs[key] = child.str(choices=ACTIVATIONS)
        elif key in _STR:
            kwargs[key] = child.str(max_len=64)
        else:
            kwargs[key] = child.int(minimum=1 if key != "lora_rank" else 0, maximum=10**7)
    node.done(("kind",) + allowed)
    if kind == "linear":
        kwargs.setdefault("in_features", hidden)
        kwargs.setdefault("out_features", hidden)
    else:
        kwargs["hidden"] = hidden
    if kind == "mamba1":
        kwargs.setdefault("d_state", 16)
    layer = _KIND_CLASSES[kind](**kwargs)
    if kind == "moe" and layer.top_k > layer.experts:  # type: ignore[attr-defined]
        raise node.error(f"top_k {layer.top_k} exceeds experts {layer.experts}", value=layer.top_k)  # type: ignore[attr-defined]
    if kind == "attention" and layer.heads % layer.kv_heads:  # type: ignore[attr-defined]
        raise ConfigError("must divide heads", file=node.file, key=f"{node.key}.kv_heads", value=layer.kv_heads)  # type: ignore[attr-defined]
    return layer


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _sources(node: Node) -> tuple[str, ...]:
    if isinstance(node.data, str):
        return (node.str(max_len=2000),)
    return tuple(item.str(max_len=2000) for item in node.list(min_len=1))


def model_from_node(root: Node, variant: str = "") -> Model:
    """Build a :class:`Model` from a parsed YAML mapping (see the module docstring for the schema)."""
    root.mapping()
    data = dict(root.data)
    variant_desc: list[str] = []
    variant_sources: tuple[str, ...] = ()
    if root.has("variants"):
        variants = root.get("variants").mapping()
        names = list(variants.data)
        for vname, vnode in variants.items():
            vnode.mapping()
            for key in vnode.data:
                if key not in _VARIANT_KEYS:
                    raise ConfigError(
                        f"is not a known key; allowed: {', '.join(_VARIANT_KEYS)}",
                        file=root.file,
                        key=f"variants.{vname}.{key}",
                    )
        if variant:
            if variant not in variants.data:
                raise ConfigError(
                    f"is not a variant of this model; allowed: {', '.join(names) or '(none)'}",
                    file=root.file,
                    key="variants",
                    value=variant,
                )
            over = dict(variants.data[variant])
            vnode = variants.get(variant)
            if "description" in over:
                variant_desc.append(vnode.get("description").str(max_len=4000))
            if "source" in over:
                variant_sources = _sources(vnode.get("source"))
            if "notes" in over:
                variant_desc.extend(n.str(max_len=4000) for n in vnode.get("notes").list())
            for key in ("description", "source", "notes"):
                over.pop(key, None)
            data = _merge(data, over)
    elif variant:
        raise ConfigError("has no variants", file=root.file, key="variants", value=variant)
    node = Node(data, file=root.file)
    name = node.get("name").str(max_len=64)
    hidden = node.get("hidden_size").int(minimum=1, maximum=10**6)
    vocab = node.get("vocab_size").int(minimum=1, maximum=10**8)
    max_pos = node.get("max_position").int(minimum=1, maximum=10**9)
    tied = node.get("tie_embeddings", False).bool()
    source = _sources(node.get("source"))
    display = node.get("display_name", name).str()
    hf_id = node.get("hf_id", "").str()
    node.get("family", "").str()
    pub = node.get("published_params", 0).int(minimum=0) or None
    pub_src = node.get("published_params_source", "").str(max_len=2000)
    notes = tuple(n.str(max_len=4000) for n in node.get("notes", []).list()) + tuple(variant_desc)
    node.has("variants")
    types_node = node.get("layer_types").mapping()
    types: dict[str, Layer] = {}
    for ch, tnode in types_node.items():
        if len(ch) != 1 or ch.isspace() or ch in "[]":
            raise ConfigError("must be one non-space character other than [ ]", file=root.file, key=tnode.key, value=ch)
        types[ch] = _layer_from(tnode, hidden)
    pnode = node.get("pattern")
    pattern = _expand_pattern(pnode)
    node.done(_TOP_KEYS)
    for ch in pattern:
        if ch not in types:
            raise pnode.error(f"uses layer type {ch!r} not defined in layer_types ({', '.join(types)})", value=ch)
    if not types[pattern[0]].is_mixer:
        raise pnode.error("must start with a mixer layer (attention or mamba)", value=pattern[:20])
    groups: list[list[Layer]] = []
    for ch in pattern:
        layer = types[ch]
        if layer.is_mixer:
            groups.append([])
        groups[-1].append(layer)
    groups[0].insert(0, EmbeddingLayer(vocab=vocab, hidden=hidden))
    groups[-1].append(LMHeadLayer(vocab=vocab, hidden=hidden, tied=tied))
    blocks = tuple(
        Block(i, MIXER_KINDS[next(x for x in g if x.is_mixer).kind], tuple(g), hidden, max_pos)
        for i, g in enumerate(groups)
    )
    return Model(
        name=name,
        blocks=blocks,
        hidden_size=hidden,
        vocab_size=vocab,
        max_position=max_pos,
        source=source + variant_sources,
        display_name=display,
        hf_id=hf_id,
        variant=variant,
        tie_embeddings=tied,
        published_params=pub,
        published_params_source=pub_src,
        notes=notes,
    )


def _data_dir() -> Path:
    return Path(str(resources.files("hydra_opt") / "data" / "models"))


def list_models() -> list[str]:
    """Names of the shipped models."""
    return sorted(p.stem for p in _data_dir().glob("*.yaml"))


_CACHE: dict[tuple[str, str], Model] = {}
#: Other names accepted by :func:`load_model`.
ALIASES: dict[str, str] = {"jamba-tiny-dev": "jamba-tiny", "mamba2-2.8b": "mamba2-2.7b", "llama3-8b": "llama-3-8b"}


def load_model(name_or_path: str | Path, variant: str = "") -> Model:
    """A shipped model by name (``"llama-3-8b"``; ``"nemotron-h-4b@hydra"`` = ``variant="hydra"``) or a YAML path.

    Models are cached per (name/path, variant) so their coefficient caches are shared.

    Raises:
        ConfigError: Unknown name, unreadable file or invalid schema (located at file and key).
    """
    text = str(name_or_path)
    if not variant and "@" in text and not Path(text).exists():
        text, variant = text.rsplit("@", 1)
    text = ALIASES.get(text, text)
    key = (text, variant)
    if key in _CACHE:
        return _CACHE[key]
    path = Path(text)
    if path.suffix in (".yaml", ".yml") or path.exists():
        root = load_yaml(path)
    else:
        shipped = _data_dir() / f"{text}.yaml"
        if not shipped.exists():
            raise ConfigError(
                f"is not a shipped model or a YAML file; shipped: {', '.join(list_models())}", key="model", value=text
            )
        root = load_yaml(shipped, display=f"hydra_opt/data/models/{text}.yaml")
    model = model_from_node(root, variant)
    _CACHE[key] = model
    return model


def with_max_position(model: Model, max_position: int) -> Model:
    """A copy of ``model`` with another context cap (e.g. HYDRA's per-block caps)."""
    blocks = tuple(replace(b, max_context=max_position, _cache={}) for b in model.blocks)
    return replace(model, blocks=blocks, max_position=max_position, _cache={})
