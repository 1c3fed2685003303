"""DynaCore core model: reachable MEUs, packing, Split-K, precision packing, memory floor, energy."""

from __future__ import annotations

import math

import pytest

from hydra_opt.config import ConfigError
from hydra_opt.hardware.dynacore import (
    DEFAULT_ENERGY,
    MEU,
    Device,
    Part,
    dynacore,
    get_datapath,
    pyramid_pack,
    pyramid_shapes,
    reachable_meus,
    search_gemm,
    spatial_shapes,
    systolic,
)
from hydra_opt.hardware.dynacore.core import gemm_cost, gemm_dram_bytes, part_cost
from hydra_opt.hardware.dynacore.energy import execution_energy_j

FP16, W8A8, W4A16 = (get_datapath(n) for n in ("fp16", "w8a8", "w4a16"))


# -- reachable shapes -------------------------------------------------------------------------------------------
def test_spatial_shapes_of_32x32_core_are_six() -> None:
    shapes = spatial_shapes(32)
    assert [(u.m, u.n) for u in shapes] == [(32, 32), (16, 64), (8, 128), (4, 256), (2, 512), (1, 1024)]


@pytest.mark.parametrize("s", [1, 2, 4, 8, 32, 128])
def test_reachable_meus_cover_all_power_of_two_factorisations(s: int) -> None:
    meus = set(reachable_meus(s))
    # Closed form: for each of the log2(S)+1 group counts G, t ranges over the divisors of G -> sum_{j=0..L}(j+1).
    levels = int(math.log2(s))
    assert len(meus) == (levels + 1) * (levels + 2) // 2
    for u in meus:
        assert u.m * u.n * u.t == s * s
        assert all(x & (x - 1) == 0 for x in (u.m, u.n, u.t))
        groups = s // u.m
        assert groups % u.t == 0 and u.n == s * groups // u.t


def test_reachable_meus_rejects_non_power_of_two() -> None:
    with pytest.raises(ConfigError):
        reachable_meus(24)


# -- pyramid packing ---------------------------------------------------------------------------------------------
def test_pyramid_packing_paper_example() -> None:
    assert pyramid_shapes(11, 4) == ((4, 4), (4, 4), (2, 8), (1, 16))


@pytest.mark.parametrize("s", [4, 32])
def test_pyramid_packing_fills_array_exactly(s: int) -> None:
    for m in range(1, 5 * s + 3):
        parts = pyramid_pack(m, s)
        assert sum(mm * q for mm, q in parts) == m
        # Each m at most once below S (binary digits), largest first, and every shape uses all S^2 PEs.
        ms = [mm for mm, _ in parts]
        assert ms == sorted(ms, reverse=True) and len(set(ms)) == len(ms)
        assert all(q == 1 for mm, q in parts if mm < s)
        for mm, nn in pyramid_shapes(m, s):
            assert mm * nn == s * s


def test_pyramid_packing_beats_padding_on_one_core() -> None:
    # One 4x4 core, M = 11, W4A16 (the weight port feeds every shape): packing needs exactly M·N·K/S² steady
    # cycles (full utilisation); a padded 4-row MEU needs ⌈11/4⌉·4·N·K/S².
    n, k = 64, 256
    arch = dynacore(4, 1)
    w4 = W4A16
    packed = gemm_cost(
        arch, (Part(0, MEU(4, 4, 1), 8), Part(0, MEU(2, 8, 1), 2), Part(0, MEU(1, 16, 1), 1)), 11, n, k, 1, True, w4
    )
    padded = gemm_cost(arch, (Part(0, MEU(4, 4, 1), 11),), 11, n, k, 1, True, w4)
    assert packed.steady_cycles == 11 * n * k // 16
    assert padded.steady_cycles == 12 * n * k // 16
    # The search reaches the packed plan's full-utilisation steady state (eleven flattened 1×16 passes tie with it
    # on the steady state and win on fill, so the search may return either).
    found = search_gemm(arch, 11, n, k, datapath="w4a16")
    assert found.steady_cycles == packed.steady_cycles
    assert found.latency_s <= packed.latency_s


def test_non_resident_tiles_restream_weights_per_pass() -> None:
    # 1024 SARA-style 4×4 sub-arrays holding 4-column tiles of K = 4096 W8 weights need 16 MB at once > 4 MB (half
    # the buffer): every one of the ⌈M/4⌉ passes re-streams the weights. A 128×128 array's tiles (512 KB) stay.
    from hydra_opt.hardware.dynacore import sara

    small = sara(128, 4)
    mi = len(small.modes) - 1  # the 1024 × 4×4 mode
    c = gemm_cost(small, (Part(mi, MEU(4, 4, 1), 64),), 64, 8192, 4096, 1, True, W8A8)
    assert c.dram_bytes == pytest.approx(16 * 8192 * 4096)
    big = gemm_cost(systolic(128), (Part(0, MEU(128, 128, 1), 256),), 256, 8192, 4096, 1, True, W8A8)
    assert big.dram_bytes == pytest.approx(8192 * 4096)


def test_search_falls_back_to_padding_when_flattening_starves() -> None:
    # At FP16 the flattened m=2/m=1 parts are weight-port bound (port = S² 4-bit elements/cycle), so the
    # adaptive search keeps the padded square MEU instead of the pyramid.
    packed = search_gemm(dynacore(4, 1), 11, 64, 256, datapath="fp16")
    padded = search_gemm(dynacore(4, 1, meu=(4, 4, 1)), 11, 64, 256, datapath="fp16")
    assert packed.latency_s <= padded.latency_s


# -- cycles ------------------------------------------------------------------------------------------------------
def test_fixed_array_cycles_closed_form() -> None:
    sa = systolic(16)
    c = gemm_cost(sa, (Part(0, MEU(16, 16, 1), 20),), 20, 40, 100, 1, True, FP16)
    tiles = math.ceil(20 / 16) * math.ceil(40 / 16)
    assert c.fill_cycles + c.steady_cycles == tiles * (100 + 16 + 16 - 2)
    assert c.drain_cycles == 16


def test_split_k_reduction_adds_no_cycles() -> None:
    # Tick-tock: partial sums fold during the ordinary drain (rows cycles) whatever t is.
    arch = dynacore(32, 1)
    n, k = 32, 4096
    for t in (1, 2, 4, 8, 16, 32):
        meu = MEU(1, 1024 // t, t)
        assert meu in reachable_meus(32)
        pc = part_cost(arch, Part(0, meu, 1), 1, n, k, 1, True, W4A16)
        c = gemm_cost(arch, (Part(0, meu, 1),), 1, n, k, 1, True, W4A16)
        assert c.drain_cycles == 32
        assert pc.steady_compute_cycles == math.ceil(k / t) * pc.rounds
    # A narrow-and-flat GEMV: splitting K over t groups divides the steady state by t (one tile either way).
    c1 = gemm_cost(arch, (Part(0, MEU(1, 1024, 1), 1),), 1, 32, 4096, 1, True, W4A16)
    c32 = gemm_cost(arch, (Part(0, MEU(1, 32, 32), 1),), 1, 32, 4096, 1, True, W4A16)
    assert c1.steady_cycles == 4096 and c32.steady_cycles == 4096 // 32


def test_w8a8_packing_halves_cycles_along_k() -> None:
    sa = systolic(32)
    part = (Part(0, MEU(32, 32, 1), 64),)
    f = gemm_cost(sa, part, 64, 128, 4096, 1, True, FP16)
    i = gemm_cost(sa, part, 64, 128, 4096, 1, True, W8A8)
    assert i.steady_cycles * 2 == f.steady_cycles
    assert i.fill_cycles == f.fill_cycles  # the array shape is untouched by precision (Sec. 6.2)


def test_memory_floor_with_w4_weights_is_quarter_of_fp16() -> None:
    arch = dynacore(32, 16)
    for m, n, k in ((1, 4096, 4096), (3, 14336, 4096), (1, 128256, 4096)):
        b16 = gemm_dram_bytes(arch, m, n, k, 1, True, FP16)
        b4 = gemm_dram_bytes(arch, m, n, k, 1, True, W4A16)
        assert b4 * 4 == b16
        c16, c4 = search_gemm(arch, m, n, k, datapath="fp16"), search_gemm(arch, m, n, k, datapath="w4a16")
        assert c4.dram_s * 4 == pytest.approx(c16.dram_s)


def test_gemv_compute_over_weight_stream_closed_form() -> None:
    # Sec. 2.4: one row of an S×S array busy -> compute/stream = BW / (2 B · S · f) = 31.25 at 128, 500 MHz, 4 TB/s.
    for s, f_mhz, tbps in ((128, 500, 4), (64, 500, 4), (128, 1000, 2)):
        dev = Device(f_mhz, 8, tbps)
        sa = systolic(s, dev)
        pc = part_cost(sa, Part(0, MEU(s, s, 1), 1), 1, 8 * s, 4096, 1, True, FP16)
        ratio = (pc.steady_compute_cycles / dev.clock_hz) / (
            gemm_dram_bytes(sa, 1, 8 * s, 4096, 1, True, FP16) / dev.dram_bytes_per_s
        )
        assert ratio == pytest.approx(tbps * 1e12 / (2 * s * f_mhz * 1e6))
    assert 4e12 / (2 * 128 * 500e6) == 31.25


def test_fp16_flattened_core_is_weight_port_bound() -> None:
    # Port = S² 4-bit elements/cycle: at FP16 a 1×S² MEU needs 4x that -> steady state stretched 4x; W4 is not.
    arch = dynacore(32, 1)
    p16 = part_cost(arch, Part(0, MEU(1, 1024, 1), 1), 1, 1024, 512, 1, True, FP16)
    p4 = part_cost(arch, Part(0, MEU(1, 1024, 1), 1), 1, 1024, 512, 1, True, W4A16)
    assert p16.weight_port_bound and not p4.weight_port_bound
    assert p16.steady_cycles == 4 * p4.steady_cycles


def test_utilization_bounded_and_gemv_full_on_dynacore() -> None:
    arch = dynacore(32, 16)
    for m, n, k in ((1, 4096, 4096), (7, 6144, 4096), (256, 28672, 4096)):
        c = search_gemm(arch, m, n, k, datapath="w4a16")
        assert 0 < c.utilization <= 1.0
    gemv = search_gemm(arch, 1, 4096, 4096, datapath="w4a16")
    assert gemv.utilization > 0.9  # flattened + Split-K fill all 16 cores


# -- energy ------------------------------------------------------------------------------------------------------
def test_energy_monotonic_in_time() -> None:
    kw = dict(macs=1e9, mac_kind="fp16", sram_bytes=1e8, dram_bytes=1e8, static_power_w=2.0)
    es = [execution_energy_j(DEFAULT_ENERGY, latency_s=t, **kw) for t in (0.0, 1e-3, 1e-2, 1.0)]
    assert es == sorted(es) and es[0] < es[-1]
    # Same GEMM, slower clock -> longer -> more leakage energy, same dynamic energy.
    fast = search_gemm(dynacore(32, 16, Device(1000, 8, 4)), 64, 4096, 4096, datapath="fp16")
    slow = search_gemm(dynacore(32, 16, Device(250, 8, 4)), 64, 4096, 4096, datapath="fp16")
    assert slow.latency_s > fast.latency_s and slow.energy_j > fast.energy_j


def test_int8_mac_cheaper_than_fp16() -> None:
    assert DEFAULT_ENERGY.mac_int8_pj < DEFAULT_ENERGY.mac_fp16_pj


def test_bad_device_is_config_error() -> None:
    with pytest.raises(ConfigError):
        Device(0, 8, 4)
    with pytest.raises(ConfigError):
        dynacore(32, 16, meu=(2, 2, 2))


def test_pyramid_parts_share_one_scheduling_window() -> None:
    # Two parts of 2 tiles each on 4 cores run side by side (one round), not one after the other.
    arch = dynacore(4, 4)
    parts = (Part(0, MEU(2, 8, 1), 2), Part(0, MEU(1, 16, 1), 1))
    n, k = 32, 256
    p2 = part_cost(arch, parts[0], 3, n, k, 1, True, W4A16)
    p1 = part_cost(arch, parts[1], 3, n, k, 1, True, W4A16)
    assert (p2.tiles, p1.tiles) == (4, 2) and p2.rounds == p1.rounds == 1
    c = gemm_cost(arch, parts, 3, n, k, 1, True, W4A16)
    # 6 tiles on 4 cores: the busiest core runs one m=2 tile and one m=1 tile (LPT), not two rounds of each part.
    assert c.fill_cycles + c.steady_cycles == p2.cycles + p1.cycles
    eight = gemm_cost(dynacore(4, 8), parts, 3, n, k, 1, True, W4A16)
    assert eight.fill_cycles + eight.steady_cycles == max(p2.cycles, p1.cycles)
