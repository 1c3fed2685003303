"""The DynaCore chiplet form: area-limited core count, ChipletType, block pricing, settings validation."""

from __future__ import annotations

import math

import pytest

from hydra_opt.config import ConfigError
from hydra_opt.hardware.dynacore import (
    DynaCoreSettings,
    coerce_settings,
    cores_for_area,
    dynacore_block_cost,
    dynacore_block_time,
    dynacore_chiplet,
    resolve_settings,
)
from hydra_opt.hardware.dynacore.chiplet import AREA_28NM, core_area_mm2, fixed_area_mm2
from hydra_opt.hardware.types import ChipletType
from hydra_opt.workload.models import block_gemms, load_model


def test_core_count_closed_form() -> None:
    s = DynaCoreSettings(core_size=32, sram_mb=8)
    bw = 256
    fixed = (
        4 * bw * (AREA_28NM["bump_mm2_per_gbps"] + AREA_28NM["phy_mm2_per_gbps"] + AREA_28NM["dma_mm2_per_gbps"])
        + 8 * 1.5336
    )
    core = 1024 * 1.3129 / 256 + 0.02
    assert fixed_area_mm2(s, bw) == pytest.approx(fixed)
    assert core_area_mm2(s) == pytest.approx(core)
    assert cores_for_area(s, 121, bw) == math.floor((121 - fixed) / core)


def test_faster_noi_or_more_sram_leaves_fewer_cores() -> None:
    s = DynaCoreSettings()
    assert cores_for_area(s, 121, 512) < cores_for_area(s, 121, 128)
    assert cores_for_area(DynaCoreSettings(sram_mb=32), 121, 256) < cores_for_area(s, 121, 256)


def test_chiplet_type_fields() -> None:
    c = dynacore_chiplet(DynaCoreSettings(), 121, 256)
    assert isinstance(c, ChipletType)
    assert c.area_mm2 <= 121
    assert c.macs_per_cycle == c.cores * 32 * 32 * 2  # W8A8 prefill packs two products per PE
    fp16 = dynacore_chiplet(DynaCoreSettings.from_policy("fp16"), 121, 256)
    assert fp16.macs_per_cycle == fp16.cores * 1024
    assert c.can_run("attention", "prefill") and c.can_run("attention", "decode")


def test_no_room_is_config_error() -> None:
    with pytest.raises(ConfigError):
        resolve_settings(DynaCoreSettings(sram_mb=64), 100, 640)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"core_size": 24},
        {"meu_policy": "sometimes"},
        {"meu_policy": "fixed"},
        {"meu_policy": "fixed", "meu_shape": (2, 2, 2)},
        {"meu_shape": (32, 32, 1)},
        {"prefill_precision": "w2a2"},
        {"sram_mb": 0},
        {"cores": 0},
        {"clock_mhz": -1.0},
    ],
)
def test_bad_settings(kwargs) -> None:
    with pytest.raises(ConfigError):
        DynaCoreSettings(**kwargs)


def test_block_time_from_design_settings_copy() -> None:
    from hydra_opt.system.design import DynaCoreSettings as DesignSettings

    model = load_model("llama-3-8b")
    gemms = block_gemms(model.blocks[1], [512] * 4, [1] * 4)
    ours = dynacore_block_time(DynaCoreSettings(cores=16), gemms, 1000.0, "decode")
    theirs = dynacore_block_time(DesignSettings(core_size=32), gemms, 1000.0, "decode", cores=16)
    assert ours == theirs > 0
    assert coerce_settings(DesignSettings(core_size=16), cores=3).core_size == 16


def test_block_time_monotone_in_bandwidth_and_cores() -> None:
    model = load_model("llama-3-8b")
    gemms = block_gemms(model.blocks[1], [0], [1])
    s = DynaCoreSettings(cores=16)
    t_lo = dynacore_block_time(s, gemms, 256.0)
    t_hi = dynacore_block_time(s, gemms, 4000.0)
    assert t_lo > t_hi
    # Memory-bound GEMV at 256 GB/s: the block time is the W4 weight stream.
    weights = sum(g.n * g.k for g in gemms if g.weight) * 0.5
    assert t_lo == pytest.approx(weights / 256e9, rel=0.02)
    big = block_gemms(model.blocks[1], [0] * 64, [16] * 64)
    assert dynacore_block_time(DynaCoreSettings(cores=32), big, 4000.0, "prefill") < dynacore_block_time(
        s, big, 4000.0, "prefill"
    )
    cost = dynacore_block_cost(s, big, 4000.0, "prefill")
    assert cost.energy_j > 0 and cost.latency_s >= cost.compute_s / 2


def test_fixed_meu_policy_is_slower_for_gemv() -> None:
    model = load_model("llama-3-8b")
    gemms = block_gemms(model.blocks[1], [0], [1])
    adaptive = dynacore_block_time(DynaCoreSettings(cores=16), gemms, 4000.0)
    fixed = dynacore_block_time(DynaCoreSettings(cores=16, meu_policy="fixed", meu_shape=(32, 32, 1)), gemms, 4000.0)
    assert fixed > 10 * adaptive


def test_settings_dict_round_trip() -> None:
    s = DynaCoreSettings(meu_policy="fixed", meu_shape=(1, 64, 16), cores=8)
    assert DynaCoreSettings(**{**s.to_dict(), "meu_shape": tuple(s.to_dict()["meu_shape"])}) == s


def test_library_hook_builds_dynacore_chiplets() -> None:
    from hydra_opt.hardware.chiplets import ChipletLibrary
    from hydra_opt.system.design import DynaCoreSettings as DesignSettings

    lib = ChipletLibrary.default()
    c = lib.get("dynacore", 256, 121, settings=DesignSettings(core_size=32))
    assert c.name == "dynacore" and c.cores == cores_for_area(DynaCoreSettings(), 121, 256)
    # Smaller cores: more of them, same or nearly the same PE count in the same slot.
    small = lib.get("dynacore", 256, 121, settings=DesignSettings(core_size=16))
    assert small.cores > c.cores
    assert abs(small.cores * 256 - c.cores * 1024) <= 1024 + 256


def test_phase_peak_rates() -> None:
    from hydra_opt.hardware.dynacore import phase_macs_per_cycle

    s = DynaCoreSettings(cores=16)
    assert phase_macs_per_cycle(s, "prefill") == 16 * 1024 * 2  # W8A8: two INT8 products per PE
    assert phase_macs_per_cycle(s, "decode") == 16 * 1024  # W4A16: FP16 arithmetic
    with pytest.raises(ConfigError):
        phase_macs_per_cycle(DynaCoreSettings(), "decode")
