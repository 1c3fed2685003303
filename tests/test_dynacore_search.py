"""Configuration search (Alg. 1), its lookup table, and the baselines' MEU limits."""

from __future__ import annotations

import itertools

import pytest

from hydra_opt.config import ConfigError
from hydra_opt.hardware.dynacore import (
    MEU,
    ConfigTable,
    Part,
    bitfusion,
    dynacore,
    figlut,
    get_architecture,
    get_datapath,
    planaria,
    sara,
    search_gemm,
    simd,
    systolic,
)
from hydra_opt.hardware.dynacore.core import gemm_cost
from hydra_opt.hardware.dynacore.packing import pyramid_pack


def test_search_is_exhaustive_over_part_choices() -> None:
    # Brute force every (n, t) combination of every pyramid part: the search's latency is the minimum (λ = 0).
    arch = dynacore(8, 2)
    dp = get_datapath("w4a16")
    m, n, k = 13, 96, 200
    found = search_gemm(arch, m, n, k, datapath=dp, lam=0.0)
    meus = arch.modes[0].meus
    per_part = [[u for u in meus if u.m == mm] for mm, _ in pyramid_pack(m, 8)]
    best = min(
        gemm_cost(
            arch, tuple(Part(0, u, u.m * q) for u, (_, q) in zip(combo, pyramid_pack(m, 8))), m, n, k, 1, True, dp
        ).latency_s
        for combo in itertools.product(*per_part)
    )
    assert found.latency_s <= best + 1e-15


def test_lookup_table_caches_and_matches_search() -> None:
    table = ConfigTable(dynacore())
    a = table.lookup(3, 4096, 4096, 1, True, "w4a16")
    b = table.lookup(3, 4096, 4096, 1, True, "w4a16")
    assert a is b and len(table) == 1
    assert a == search_gemm(dynacore(), 3, 4096, 4096, datapath="w4a16")
    n = table.build([(4096, 4096, 1, True), (14336, 4096, 1, True)], [1, 2, 3], ["w4a16", "w8a8"])
    assert n == 2 * 3 * 2


def test_gemv_needs_split_k_on_16_cores() -> None:
    # N = 4096 gives only 4 tiles of a 1×1024 MEU for 16 cores: the search must split K (t > 1).
    c = search_gemm(dynacore(32, 16), 1, 4096, 4096, datapath="w4a16")
    assert all(p.meu.t > 1 for p in c.parts)


@pytest.mark.parametrize(("builder", "floor"), [(systolic, 128), (lambda: planaria(), 32), (lambda: sara(), 4)])
def test_conformal_baselines_floor(builder, floor: int) -> None:
    arch = builder()
    assert min(u.m for md in arch.modes for u in md.meus) == floor
    assert all(u.m == u.n and u.t == 1 for md in arch.modes for u in md.meus)
    assert all(md.pes == 128 * 128 for md in arch.modes)


def test_decode_gemv_latency_flat_until_floor() -> None:
    # Below its MEU floor a conformal array pays the same cycles for any M (rows idle); above, cycles grow.
    for arch, floor in ((systolic(), 128), (planaria(), 32), (sara(), 4)):
        base = search_gemm(arch, 1, 4096, 4096, datapath="w8a8").compute_s
        assert search_gemm(arch, floor, 4096, 4096, datapath="w8a8").compute_s == pytest.approx(base)
        assert search_gemm(arch, 2 * floor, 4096, 4096, datapath="w8a8").compute_s > 1.5 * base


def test_single_datapath_baselines_refuse_others() -> None:
    with pytest.raises(ConfigError):
        search_gemm(bitfusion(), 1, 64, 64, datapath="fp16")
    with pytest.raises(ConfigError):
        search_gemm(figlut(), 1, 64, 64, datapath="w8a8")


def test_bitfusion_outer_product_gets_no_k_packing() -> None:
    bf = search_gemm(bitfusion(), 128, 1024, 4096, datapath="w8a8")
    sa = search_gemm(systolic(), 128, 1024, 4096, datapath="w8a8")
    assert bf.steady_cycles == 2 * sa.steady_cycles


def test_simd_has_no_weight_reuse_across_tokens() -> None:
    v = simd()
    one = search_gemm(v, 1, 4096, 4096, datapath="w4a16").compute_s
    eight = search_gemm(v, 8, 4096, 4096, datapath="w4a16").compute_s
    assert eight == pytest.approx(8 * one, rel=0.01)


def test_unknown_architecture_is_config_error() -> None:
    with pytest.raises(ConfigError):
        get_architecture("tpu")
    assert MEU(1, 16, 1) in dynacore(4, 1).modes[0].meus
