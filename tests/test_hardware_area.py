"""Area model: the artifact's compositions recomputed from the component table, and first-principles compose()."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from hydra_opt.hardware.area import (
    Composition,
    area_problem,
    interpolate_area_mm2,
    package_area_mm2,
)
from hydra_opt.hardware.chiplets import ChipletLibrary, compose

ARTIFACT = Path("/work/shared/data/hydra_artifact/analytic_profile/comp_acc")
TYPES = ("tscs_p", "tscs_d", "marca_p", "marca_d")


def _artifact_rows():
    """(type, slot, bw, cores, banks) from the artifact's own YAML files (skipped when not on this machine)."""
    rows = []
    for t in TYPES:
        for slot in (121, 144):
            f = ARTIFACT / f"{t}_{slot}mm2.yml"
            if not f.exists():
                continue
            for bw, r in yaml.safe_load(f.read_text()).items():
                rows.append((t, float(slot), float(bw), r["core"], r["sram"]))
    return rows


ROWS = _artifact_rows()
needs_artifact = pytest.mark.skipif(not ROWS, reason="HYDRA artifact profiles not available")


@pytest.fixture(scope="module")
def lib() -> ChipletLibrary:
    return ChipletLibrary.default()


def test_area_formula_closed_form(lib: ChipletLibrary) -> None:
    # METHODS 2b: core·A_core + sfu·0.02 + links·(bump + PHY) + dma·dma + sram·1.5336, tscs_p @ 256 GB/s, 144 mm².
    expected = 44 * 1.3129 + 44 * 0.02 + 4 * (0.238 * 2 + 2.56 * 2) + 4 * 0.0672 * 2 + 40 * 1.5336
    spec = lib.spec("tscs_p")
    a = spec.area(Composition(44, 40, 44, 4, 4), 256)
    assert a.total_mm2 == pytest.approx(expected, rel=1e-12)
    assert a.communication_mm2 == pytest.approx(4 * (0.476 + 5.12) + 4 * 0.1344)


@needs_artifact
def test_library_rows_equal_artifact_rows(lib: ChipletLibrary) -> None:
    for t, slot, bw, cores, banks in ROWS:
        comp = lib.spec(t).profiled(bw, slot)
        assert comp is not None, (t, slot, bw)
        assert (comp.cores, comp.sram_banks, comp.sfus) == (cores, banks, cores)


@needs_artifact
def test_artifact_compositions_fill_but_do_not_exceed_their_slot(lib: ChipletLibrary) -> None:
    assert len(ROWS) == 36
    for t, slot, bw, cores, banks in ROWS:
        a = lib.spec(t).area(Composition(cores, banks, cores, 4, 4), bw).total_mm2
        assert area_problem(lib.spec(t).area(Composition(cores, banks, cores, 4, 4), bw), slot) is None
        # Less than one SRAM bank (1.53 mm²) or so of unused area: the rows fill the slot.
        assert slot - 3.0 < a <= slot, (t, slot, bw, a)


@needs_artifact
def test_compose_matches_artifact_within_one_unit(lib: ChipletLibrary) -> None:
    exact = 0
    for t, slot, bw, cores, banks in ROWS:
        c = compose(t, bw, slot, library=lib)
        assert abs(c.cores - cores) <= 1 and abs(c.sram_banks - banks) <= 1, (t, slot, bw, c, cores, banks)
        assert lib.spec(t).area(c, bw).total_mm2 <= slot + 1e-9
        exact += (c.cores, c.sram_banks) == (cores, banks)
    assert exact >= len(ROWS) // 3


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("slot", [121.0, 144.0])
def test_faster_noi_leaves_fewer_cores(lib: ChipletLibrary, name: str, slot: float) -> None:
    cores = [lib.compose(name, bw, slot).cores for bw in (128, 256, 384, 512, 640, 1024)]
    assert cores == sorted(cores, reverse=True)
    assert cores[0] > cores[-1]


def test_compose_with_no_room_gives_no_cores(lib: ChipletLibrary) -> None:
    # 4 links at 4 TB/s need 4 x (7.4 + 80) mm² of bump + PHY at 28 nm: more than the slot.
    c = lib.compose("tscs_p", 4096, 144)
    assert c.cores == 0 and c.sram_banks == 0


def test_interpolation_is_proportional_below_and_linear_between() -> None:
    pts = ((128.0, 2.56), (256.0, 5.12), (1024.0, 12.0))
    assert interpolate_area_mm2(pts, 64) == pytest.approx(1.28)
    assert interpolate_area_mm2(pts, 192) == pytest.approx(3.84)
    assert interpolate_area_mm2(pts, 640) == pytest.approx(5.12 + (12.0 - 5.12) * 0.5)
    assert interpolate_area_mm2(pts, 2048) == pytest.approx(12.0 + (12.0 - 5.12) * 1024 / 768)
    assert interpolate_area_mm2((), 256) == 0.0


def test_package_area_matches_paper_range() -> None:
    # HYDRA Sec. VI-A: 2,700-3,000 mm² interposer for 24 chiplets of ~121 mm².
    assert package_area_mm2(6, 4, 121.0) == pytest.approx(2904.0)
    assert 2700 <= package_area_mm2(6, 4, 121.0) <= 3000
    side = math.sqrt(144.0)
    assert package_area_mm2(6, 4, 144.0, gap_mm=1.0) == pytest.approx((6 * side + 7) * (4 * side + 5))


def test_7nm_recipes_recompose_their_rows(lib: ChipletLibrary) -> None:
    # The 7 nm rows use only part of the 121 mm² slot; with the recipe's fill_fraction, compose() lands within one
    # unit of every profiled row except unified_p @ 256 GB/s (the artifact repeats its 1024 GB/s counts there).
    for name in ("b200_p", "systolic_p", "vu_d", "unified_p"):
        spec = lib.spec(name)
        for (slot, bw), comp in spec.compositions:
            if (name, bw) == ("unified_p", 256.0):
                continue
            c = spec.compose(bw, slot)
            assert abs(c.cores - comp.cores) <= 1 and abs(c.sram_banks - comp.sram_banks) <= 1, (name, bw, c)
            assert spec.area(comp, bw).total_mm2 <= slot
