"""Chiplet library: derived capabilities, presets, hook, and library-file validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from hydra_opt.config import ConfigError
from hydra_opt.hardware import chiplets as chiplets_mod
from hydra_opt.hardware.chiplets import (
    PAPER_SRAM_BANK_BYTES,
    ChipletLibrary,
    register_chiplet_provider,
)
from hydra_opt.hardware.types import ChipletType

DATA = Path(chiplets_mod.__file__).resolve().parents[1] / "data" / "chiplets"


@pytest.fixture(scope="module")
def lib() -> ChipletLibrary:
    return ChipletLibrary.default()


def test_names(lib: ChipletLibrary) -> None:
    names = lib.names()
    for n in ("tscs_p", "tscs_d", "marca_p", "marca_d", "b200_p", "systolic_p", "vu_d", "unified_p", "dynacore"):
        assert n in names
    assert names[-1] == "dynacore"


# METHODS 2b table (144 mm² files): MAC/ns, SRAM GB/s, SFU GOps/s, element-wise width per NoI bandwidth.
METHODS_TABLE = {
    "tscs_p": ([11264, 10240, 8960, 8192], [3840, 3456, 3168, 2688], [105.6, 96, 84, 76.8], [704, 640, 560, 512]),
    "tscs_d": ([6400, 5888, 5120, 4608], [5472, 4896, 4416, 3840], [60, 55.2, 48, 43.2], [400, 368, 320, 288]),
    "marca_p": ([10240, 9216, 8192, 7424], [3936, 3552, 3168, 2784], [96, 86.4, 76.8, 69.6], [10240, 9216, 8192, 7424]),
    "marca_d": ([7936, 7168, 6400, 5632], [4704, 4320, 3840, 3360], [74.4, 67.2, 60, 52.8], [7936, 7168, 6400, 5632]),
}


@pytest.mark.parametrize("name", sorted(METHODS_TABLE))
def test_capabilities_match_methods_table(lib: ChipletLibrary, name: str) -> None:
    macs, sram, sfu, elem = METHODS_TABLE[name]
    for i, bw in enumerate((256, 384, 512, 640)):
        c = lib.get(name, bw)
        assert c.macs_per_cycle == macs[i]
        assert c.macs_per_s == pytest.approx(macs[i] * 1e9)  # 1 GHz
        assert c.sram_gbps == pytest.approx(sram[i])
        assert c.sfu_ops_per_s == pytest.approx(sfu[i] * 1e9)
        assert c.elem_ops_per_s == pytest.approx(elem[i] * 1e9)
        assert 142.0 < c.area_mm2 <= 144.0


def test_families_and_phases(lib: ChipletLibrary) -> None:
    assert lib.get("tscs_p", 256).can_run("attention", "prefill")
    assert not lib.get("tscs_p", 256).can_run("attention", "decode")
    assert not lib.get("tscs_d", 256).can_run("mamba", "decode")
    assert lib.get("marca_d", 256).can_run("mamba", "decode")
    assert lib.get("vu_d", 1024, 121).can_run("attention", "decode")
    assert lib.get("systolic_p", 256, 121).can_run("mamba", "prefill")


def test_sram_bytes_clean_vs_paper_preset(lib: ChipletLibrary) -> None:
    clean = lib.get("tscs_d", 256)
    paper = ChipletLibrary.default(preset="paper").get("tscs_d", 256)
    assert clean.sram_bytes == 57 * 2**20
    assert paper.sram_bytes == 57 * PAPER_SRAM_BANK_BYTES
    assert paper.macs_per_cycle == clean.macs_per_cycle and paper.area_mm2 == clean.area_mm2


def test_missing_row_is_composed_and_fits(lib: ChipletLibrary) -> None:
    # The 121 mm² files have no 640 GB/s row: it is composed from first principles.
    assert lib.spec("tscs_p").profiled(640, 121) is None
    c = lib.get("tscs_p", 640, 121)
    assert c.area_mm2 <= 121.0
    assert 0 < c.cores < lib.get("tscs_p", 512, 121).cores


def test_energy_and_leakage_scale_with_area(lib: ChipletLibrary) -> None:
    c = lib.get("marca_p", 256)
    tech = lib.spec("marca_p").technology
    assert c.mac_energy_pj == tech.mac_energy_pj > 0
    assert c.static_power_w == pytest.approx(tech.leakage_w_per_mm2 * c.area_mm2)


def test_bad_get_arguments(lib: ChipletLibrary) -> None:
    with pytest.raises(ConfigError, match="not a known chiplet"):
        lib.get("tscs_x", 256)
    with pytest.raises(ConfigError, match="positive"):
        lib.get("tscs_p", 0)


def test_dynacore_hook_provider(lib: ChipletLibrary) -> None:
    seen = {}

    def provider(*, d2d_bw_gbps, slot_area_mm2, settings):
        seen.update(bw=d2d_bw_gbps, slot=slot_area_mm2, settings=settings)
        base = lib.get("tscs_p", d2d_bw_gbps, slot_area_mm2)
        return ChipletType(**{**base.__dict__, "name": "fake_dc", "phases": frozenset({"prefill", "decode"})})

    register_chiplet_provider("fake_dc", provider)
    try:
        c = lib.get("fake_dc", 384, 121, settings="S")
        assert c.name == "fake_dc" and c.can_run("attention", "decode")
        assert seen == {"bw": 384.0, "slot": 121.0, "settings": "S"}
        assert "fake_dc" in lib.names()
    finally:
        chiplets_mod._PROVIDERS.pop("fake_dc", None)


def test_shipped_files_validate() -> None:
    for f in sorted(DATA.glob("*.yaml")):
        chiplets_mod.validate_library_file(f)


def test_library_file_errors_are_located(tmp_path: Path) -> None:
    text = (DATA / "hydra_28nm.yaml").read_text()
    bad = tmp_path / "lib.yaml"
    bad.write_text(text.replace("core: tscs\n", "core: tscz\n", 1))
    with pytest.raises(ConfigError) as e:
        ChipletLibrary.from_yaml(bad)
    assert "chiplets.tscs_p.core" in str(e.value) and "tscs" in str(e.value)
    bad.write_text(text.replace("cores: 49, sram_banks: 43", "cores: 60, sram_banks: 43", 1))
    with pytest.raises(ConfigError) as e:
        chiplets_mod.validate_library_file(bad)
    assert "chiplets.tscs_p.compositions[4]" in str(e.value) and "exceeds" in str(e.value)


@pytest.mark.parametrize("slot", [100.0, 121.0, 144.0, 200.0])
def test_every_chiplet_fits_every_slot_and_bandwidth(lib: ChipletLibrary, slot: float) -> None:
    for name in lib.names():
        if name == "dynacore":
            continue
        prev = None
        for bw in (64, 128, 256, 384, 512, 640, 768, 1024):
            c = lib.get(name, bw, slot)
            assert c.area_mm2 <= slot + 1e-9, (name, bw, slot, c.area_mm2)
            assert c.cores >= 0 and c.sram_bytes >= 0
            if lib.spec(name).profiled(bw, slot) is None and prev is not None and lib.spec(name).profiled(prev[0], slot) is None:
                assert c.cores <= prev[1], (name, bw, slot)  # composed rows: faster links never add cores
            prev = (bw, c.cores)
