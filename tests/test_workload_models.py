"""Models: parameter totals vs published sizes, KV/state sizes vs the shared YAML derivations, block structure,
linear op counts vs direct per-request counts, prefill/decode consistency, precisions, YAML errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from hydra_opt.config import ConfigError
from hydra_opt.config.reader import Node
from hydra_opt.workload.cost import AGG_NAMES, COST_FIELDS, batch_aggregates
from hydra_opt.workload.layers import AttentionLayer, Mamba1Layer, Mamba2Layer, MoELayer
from hydra_opt.workload.models import (
    Block,
    block_cost,
    block_gemms,
    decode_cost,
    list_models,
    load_model,
    model_from_node,
    prefill_cost,
)
from hydra_opt.workload.precision import PRECISIONS, get_precision

ROOT = Path(__file__).resolve().parents[1]
SHARED_MODELS = ROOT.parent / "shared" / "data" / "models"
F = {name: i for i, name in enumerate(COST_FIELDS)}

#: our model name -> file in shared/data/models
SHARED_FILE = {
    "llama-3-8b": "llama-3-8b",
    "llama-3.1-8b": "llama-3.1-8b",
    "llama-2-7b": "llama-2-7b",
    "llama-2-13b": "llama-2-13b",
    "mamba2-2.7b": "mamba2-2.7b",
    "nemotron-h-4b": "nemotron-h-4b",
    "nemotron-h-8b": "nemotron-h-8b",
    "jamba-tiny": "jamba-tiny-dev",
    "zamba2-7b": "zamba2-7b",
}


def _shared(name: str) -> dict:
    path = SHARED_MODELS / f"{SHARED_FILE[name]}.yaml"
    if not path.exists():
        pytest.skip(f"{path} absent: clone with ../shared beside the repository to check against the sources")
    return yaml.safe_load(path.read_text())


def test_all_nine_models_ship() -> None:
    assert set(SHARED_FILE) == set(list_models())


@pytest.mark.parametrize("name", sorted(SHARED_FILE))
def test_param_total_matches_published(name: str) -> None:
    m = load_model(name)
    if m.published_params is None:
        pytest.skip(f"{name}: no published total (shapes unverified; see the model's notes)")
    assert abs(m.param_count / m.published_params - 1) <= 0.01, (m.param_count, m.published_params)


@pytest.mark.parametrize("name", sorted(SHARED_FILE))
def test_param_total_matches_shared_derivation(name: str) -> None:
    derived = _shared(name).get("derived", {})
    ref = derived.get("params_total") or derived.get("params_total_approx")
    if ref is None:
        pytest.skip(f"{name}: shared YAML has no parameter derivation")
    assert abs(load_model(name).param_count / ref - 1) <= 0.01


@pytest.mark.parametrize("name", sorted(SHARED_FILE))
def test_kv_and_state_sizes_match_shared_derivation(name: str) -> None:
    d = _shared(name).get("derived", {})
    m = load_model(name)
    checked = 0
    if "kv_cache_bytes_per_token_all_layers_bf16" in d:
        assert m.kv_bytes_per_token("bf16") == d["kv_cache_bytes_per_token_all_layers_bf16"]
        checked += 1
    if "kv_cache_bytes_per_token_all_invocations_bf16" in d:
        assert m.kv_bytes_per_token("bf16") == d["kv_cache_bytes_per_token_all_invocations_bf16"]
        checked += 1
    mixers = [b.mixer for b in m.blocks if b.family == "mamba"]
    for key in ("ssm_state_elements_per_layer", "ssm_state_elements_per_mamba_layer"):
        if key in d:
            for mx in mixers:
                assert (
                    mx.state_elems() - (mx.d_conv - 1) * (mx.conv if isinstance(mx, Mamba2Layer) else mx.d_inner)
                    == d[key]
                )
            checked += 1
    for key in ("conv_state_elements_per_layer", "conv_state_elements_per_mamba_layer"):
        if key in d:
            for mx in mixers:
                conv = mx.conv if isinstance(mx, Mamba2Layer) else mx.d_inner
                assert (mx.d_conv - 1) * conv == d[key]
            checked += 1
    if "ssm_state_bytes_per_sequence_all_layers_fp16" in d:
        assert m.state_bytes_per_seq("fp16") == d["ssm_state_bytes_per_sequence_all_layers_fp16"]
        checked += 1
    assert checked >= 1


def test_kv_closed_form_llama3() -> None:
    # 2 (K,V) x 8 kv heads x 128 x 32 layers, 1 byte at int8
    m = load_model("llama-3-8b")
    assert m.kv_bytes_per_token("int8") == 2 * 8 * 128 * 32
    assert np.all(m.block_kv_bytes_per_token("fp16") == 2 * 8 * 128 * 2)
    assert m.state_bytes_per_seq("int8") == 0


def test_nemotron_blocks_match_hydra_sequence() -> None:
    # HYDRA artifact: 0 = Mamba+MLP, 1 = Mamba only, 2 = attention+MLP (METHODS.md 2c)
    hydra = [0, 0, 0, 1, 2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0]
    code = {("mamba2", "mlp"): 0, ("mamba2",): 1, ("attention", "mlp"): 2}
    m = load_model("nemotron-h-4b")
    kinds = [tuple(k for k in b.kinds if k not in ("embedding", "lm_head")) for b in m.blocks]
    assert [code[k] for k in kinds] == hydra
    assert m.blocks[0].kinds[0] == "embedding" and m.blocks[-1].kinds[-1] == "lm_head"


@pytest.mark.parametrize(
    ("name", "n_blocks", "n_attention"),
    [
        ("llama-3-8b", 32, 32),
        ("mamba2-2.7b", 64, 0),
        ("nemotron-h-4b", 28, 4),
        ("jamba-tiny", 16, 2),
        ("zamba2-7b", 94, 13),
    ],
)
def test_block_counts_match_hydra(name: str, n_blocks: int, n_attention: int) -> None:
    m = load_model(name)
    assert m.n_blocks == n_blocks and m.families.count("attention") == n_attention


def test_zamba_shared_weights_stored_once_but_read_per_use() -> None:
    m = load_model("zamba2-7b")
    per_block_sum = sum(b.param_count for b in m.blocks)
    assert per_block_sum > m.param_count  # 13 invocations read 2 stored weight sets
    att = [b for b in m.blocks if b.family == "attention"]
    assert len({b.param_count for b in att}) == 1


def test_hydra_variants_differ_as_documented() -> None:
    real, hy = load_model("llama-3-8b"), load_model("llama-3-8b", variant="hydra")
    # one up-projection: 4096 x 14336 fewer weights per block
    assert real.param_count - hy.param_count == 32 * 4096 * 14336
    assert hy.max_position == 4096
    mb = load_model("mamba2-2.7b@hydra").blocks[0].mixer
    assert isinstance(mb, Mamba2Layer) and mb.d_state == 16 and mb.proj == 10448
    nh = load_model("nemotron-h-4b", variant="hydra")
    assert nh.block_kv_bytes_per_token("int8").max() == 1536  # the artifact's KV per token per attention block
    assert {b.state_elems - 3 * 9216 for b in nh.blocks if b.family == "mamba"} == {6144 * 128}
    with pytest.raises(ConfigError, match="variant"):
        load_model("llama-2-7b", variant="hydra")


# -- op counts --------------------------------------------------------------------------------------------------


def _direct(block: Block, ctx: np.ndarray, new: np.ndarray, prec: str) -> dict[str, float]:
    """Independent per-request count of MACs, KV/state bytes and weight bytes (loops, no aggregates)."""
    p = get_precision(prec)
    macs = kv_r = kv_w = 0.0
    for layer in block.layers:
        if isinstance(layer, AttentionLayer):
            kvt = 2 * layer.kv_heads * layer.head_dim * p.kv_bytes
            for c, q in zip(ctx.tolist(), new.tolist(), strict=True):
                macs += q * (layer.in_width * layer.qkv_width + layer.heads * layer.head_dim * layer.hidden)
                for j in range(q):  # new token j sees c + j + 1 keys; scores and values
                    macs += 2 * layer.heads * layer.head_dim * (c + j + 1)
                kv_r += (c + q) * kvt
                kv_w += q * kvt
        elif isinstance(layer, (Mamba2Layer, Mamba1Layer)):
            st = layer.state_elems() * p.kv_bytes
            kv_r += st * len(ctx)
            kv_w += st * len(ctx)
            macs += sum(g.macs for g in layer.gemms(ctx, new))
        elif layer.kind == "lm_head":
            macs += len(ctx) * layer.hidden * layer.vocab
        else:
            macs += sum(g.macs for g in layer.gemms(ctx, new))
    w = sum(layer.params() for layer in block.layers if layer.kind != "embedding") * p.weight_bytes
    emb = sum(layer.hidden for layer in block.layers if layer.kind == "embedding") * new.sum() * p.weight_bytes
    return {"macs": macs, "kv_read_bytes": kv_r, "kv_write_bytes": kv_w, "weight_bytes": w + emb}


@pytest.mark.parametrize("name", ["llama-3-8b", "nemotron-h-4b", "jamba-tiny", "zamba2-7b"])
@pytest.mark.parametrize("prec", ["int8", "bf16", "w4a16"])
def test_coeffs_equal_direct_count_on_random_batches(name: str, prec: str) -> None:
    m = load_model(name)
    rng = np.random.default_rng(7)
    coeffs = m.block_coeffs(prec)
    for _ in range(3):
        n = int(rng.integers(1, 6))
        ctx = rng.integers(0, 3000, n)
        new = np.where(rng.random(n) < 0.5, 1, rng.integers(1, 60, n))
        agg = batch_aggregates(ctx, new)
        for b in (m.blocks[0], m.blocks[len(m.blocks) // 2], m.blocks[-1]):
            got = coeffs[b.index] @ agg
            ref = _direct(b, ctx, new, prec)
            for field, value in ref.items():
                assert got[F[field]] == pytest.approx(value, rel=1e-12), (b.index, field)
            assert block_cost(b, ctx, new, prec).as_array() == pytest.approx(got, rel=1e-12)


@pytest.mark.parametrize("name", ["llama-3-8b", "mamba2-2.7b", "nemotron-h-4b", "zamba2-7b", "jamba-tiny"])
def test_gemm_macs_sum_to_block_macs(name: str) -> None:
    m = load_model(name)
    ctx, new = np.array([0, 100, 2000]), np.array([37, 1, 1])
    for b in m.blocks[:3] + m.blocks[-1:]:
        gem = block_gemms(b, ctx, new)
        assert sum(g.macs for g in gem) == pytest.approx(block_cost(b, ctx, new, "int8").macs, rel=1e-12)
        per_request = [g for g in gem if not g.weight]
        if b.family == "attention":
            assert len(per_request) == 2 * len(ctx)  # scores + values for each request
            assert {g.n for g in per_request if g.name == "attn_scores"} == {37, 101, 2001}


@pytest.mark.parametrize("name", ["llama-3-8b", "nemotron-h-4b", "mamba2-2.7b"])
def test_prefill_equals_sum_of_decode_steps(name: str) -> None:
    """Causal attention: prefill of L tokens does exactly the work of L single-token steps at contexts 0..L-1
    (weight GEMMs, score/value products, scan ops, KV written), except per-pass terms (weights, state, LM head)."""
    m = load_model(name)
    L = 257
    for b in m.blocks[1:3]:
        pre = prefill_cost(b, L, "int8")
        dec = [decode_cost(b, j, "int8") for j in range(L)]
        fields = ["macs", "vec_ops", "sfu_ops", "act_bytes", "io_bytes"]
        if b.family == "attention":
            fields.append("kv_write_bytes")  # SSM state is written once per pass, not per token
        for field in fields:
            assert getattr(pre, field) == pytest.approx(sum(getattr(d, field) for d in dec), rel=1e-12), field
        # chunked prefill: two chunks do the same arithmetic as one pass
        a, c = block_cost(b, [0], [100], "int8"), block_cost(b, [100], [L - 100], "int8")
        assert a.macs + c.macs == pytest.approx(pre.macs, rel=1e-12)


def test_decode_attention_reads_whole_context_once() -> None:
    b = load_model("llama-3-8b").blocks[5]
    kvt = 2 * 8 * 128
    cost = block_cost(b, [1000, 3000], [1, 1], "int8")
    assert cost.kv_read_bytes == kvt * (1001 + 3001)
    assert cost.kv_write_bytes == 2 * kvt
    assert cost.weight_bytes == b.param_count  # 1 byte per weight, read once for the batch


def test_mamba_decode_cost_independent_of_context() -> None:
    b = load_model("mamba2-2.7b").blocks[3]
    assert decode_cost(b, 10, "int8") == decode_cost(b, 100_000, "int8")
    st = b.state_bytes("int8")
    assert decode_cost(b, 10, "int8", batch=4).kv_read_bytes == 4 * st


def test_weight_bytes_scale_with_precision() -> None:
    m = load_model("nemotron-h-4b")
    assert m.weight_bytes("fp16") == 2 * m.param_count
    assert m.weight_bytes("w4a16") == 0.5 * m.param_count
    assert m.weight_bytes("int8") == m.weight_bytes("fp8") == m.param_count
    # per-pass reads cover every stored weight except the embedding table (gathered row by row); no sharing here
    assert m.block_weight_bytes("int8").sum() + 131072 * 3072 == m.param_count


def test_coefficients_cached_and_read_only() -> None:
    m = load_model("nemotron-h-4b")
    k1, k2 = m.block_coeffs("int8"), m.block_coeffs(get_precision("int8"))
    assert k1 is k2 and k1.shape == (28, len(COST_FIELDS), len(AGG_NAMES))
    with pytest.raises(ValueError):
        k1[0, 0, 0] = 1.0


def test_precisions() -> None:
    assert set(PRECISIONS) == {"fp16", "bf16", "int8", "fp8", "w8a8", "w4a16", "w4a8"}
    p = get_precision("int8")
    assert (p.weight_bytes, p.act_bytes, p.kv_bytes) == (1, 1, 1)
    assert get_precision("w4a16").weight_bytes == 0.5
    with pytest.raises(ConfigError, match="allowed: fp16, bf16"):
        get_precision("int3")


def test_moe_layer_counts() -> None:
    moe = MoELayer(hidden=64, intermediate=128, experts=8, top_k=2)
    k = moe.coeffs(get_precision("int8"))
    q_col = AGG_NAMES.index("sum_q")
    assert k[F["macs"], q_col] == 64 * 8 + 2 * (64 * 256 + 128 * 64)
    assert k[F["weight_bytes"], 0] == moe.params()
    g = moe.gemms(np.array([0]), np.array([16]))
    assert sum(x.macs for x in g) == pytest.approx(16 * k[F["macs"], q_col])  # balanced routing is exact here


# -- YAML errors ------------------------------------------------------------------------------------------------

BASE = {
    "name": "toy",
    "source": ["made up for a test"],
    "hidden_size": 64,
    "vocab_size": 100,
    "max_position": 1024,
    "layer_types": {
        "*": {"kind": "attention", "heads": 4, "kv_heads": 2, "head_dim": 16},
        "-": {"kind": "mlp", "intermediate": 128},
    },
    "pattern": "[*-]x2",
}


def _model(tmp_path: Path, **changes):
    data = {**BASE, **changes}
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_model(path)


def test_toy_model_loads(tmp_path: Path) -> None:
    m = _model(tmp_path)
    assert m.n_blocks == 2 and m.param_count == 2 * (64 + 64 * 16 * 8 + 64 * 64 + 64 + 3 * 64 * 128) + 2 * 100 * 64 + 64


@pytest.mark.parametrize(
    ("changes", "key", "words"),
    [
        ({"pattern": "-*"}, "pattern", "must start with a mixer"),
        ({"pattern": "*X"}, "pattern", "not defined"),
        ({"hidden_size": -3}, "hidden_size", ">= 1"),
        (
            {"layer_types": {"*": {"kind": "attention", "heads": 4, "kv_heads": 3, "head_dim": 16}}},
            "kv_heads",
            "divide",
        ),
        ({"layer_types": {"*": {"kind": "attn", "heads": 4}}}, "layer_types.*.kind", "is not one of"),
        (
            {"layer_types": {"*": {"kind": "attention", "heads": 4, "kv_heads": 2, "head_dim": 16, "bias": True}}},
            "layer_types.*.bias",
            "not a known key",
        ),
        (
            {"layer_types": {"*": {"kind": "mlp", "intermediate": 128, "activation": "tanh"}}},
            "activation",
            "is not one of",
        ),
        ({"colour": "red"}, "colour", "not a known key"),
        ({"source": []}, "source", "at least 1"),
    ],
)
def test_bad_model_yaml_names_file_and_key(tmp_path: Path, changes: dict, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as ei:
        _model(tmp_path, **changes)
    msg = str(ei.value)
    assert "toy.yaml" in msg and key in msg and words in msg


def test_unknown_model_lists_shipped() -> None:
    with pytest.raises(ConfigError, match="llama-3-8b"):
        load_model("gpt-5")


def test_variant_keys_validated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="variants.x.foo"):
        _model(tmp_path, variants={"x": {"foo": 1}})
    node = Node({**BASE, "variants": {"small": {"max_position": 128}}}, file="mem.yaml")
    assert model_from_node(node, "small").max_position == 128


def test_tied_head_stored_once_read_every_pass() -> None:
    m = load_model("mamba2-2.7b")
    last = m.blocks[-1]
    head = 50288 * 2560
    # the last block reads the (tied) head matrix + final norm every pass, the others do not
    assert last.weight_bytes("int8") - m.blocks[-2].weight_bytes("int8") == head + 2560
    assert m.block_weight_bytes("int8").sum() == m.param_count  # embedding table stored once, read as the head
    assert decode_cost(last, 10, "int8", batch=3).macs - decode_cost(m.blocks[-2], 10, "int8", batch=3).macs == (
        3 * head
    )


def test_io_bytes_hidden_in_and_out_per_new_token() -> None:
    z = load_model("zamba2-7b")
    att = next(b for b in z.blocks if b.family == "attention")
    mam = z.blocks[1]
    # Zamba2's shared block takes concat(hidden, embedding): 2d in, d out; a Mamba block d in, d out
    assert block_cost(att, [5, 9], [3, 1], "bf16").io_bytes == 4 * (2 * 3584 + 3584) * 2
    assert block_cost(mam, [5, 9], [3, 1], "bf16").io_bytes == 4 * (3584 + 3584) * 2
