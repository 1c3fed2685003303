"""DesignPoint: normalisation, YAML round trip, located validation errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from hydra_opt.config import ConfigError
from hydra_opt.system.design import (
    DesignPoint,
    DynaCoreSettings,
    load_design,
    save_design,
)

ROOT = Path(__file__).resolve().parents[1]


def _design(**kw) -> DesignPoint:
    base = dict(counts={"tscs_p": 3, "tscs_d": 1, "marca_p": 7, "marca_d": 7}, n_mem=6, d2d_bw_gbps=384, max_batch=2)
    base.update(kw)
    return DesignPoint(**base)


def test_counts_are_sorted_and_zeros_dropped() -> None:
    d = DesignPoint(counts={"tscs_p": 2, "marca_p": 0, "marca_d": 5}, n_mem=4)
    assert d.counts == (("marca_d", 5), ("tscs_p", 2))
    assert d.count("marca_p") == 0 and d.count("tscs_p") == 2
    assert d.n_compute == 7 and d.n_chiplets == 11
    assert d == DesignPoint(counts=[("tscs_p", 2), ("marca_d", 5)], n_mem=4)
    assert hash(d) == hash(DesignPoint(counts=[("tscs_p", 2), ("marca_d", 5)], n_mem=4))


@pytest.mark.parametrize(
    "design",
    [
        _design(),
        _design(placement="rr", batching="continuous", scheduler="elastic", precision="fp16", name="x"),
        _design(d2d_bw_gbps=333.5, slot_area_mm2=121.5, grid_w=8, grid_h=3),
        _design(counts={"dynacore": 4}, dynacore=DynaCoreSettings(core_size=64, meu_policy="fixed", meu_shape=(8, 16, 32))),
        _design(dynacore=DynaCoreSettings()),
        _design(counts={"dynacore": 2}, dynacore=DynaCoreSettings(sram_mb=16, clock_mhz=500.0, cores=8, links=4)),
    ],
)
def test_yaml_round_trip_is_exact(tmp_path: Path, design: DesignPoint) -> None:
    assert DesignPoint.from_dict(design.to_dict()) == design
    f = tmp_path / "d.yaml"
    save_design(design, f, header="a comment\nline two")
    back = load_design(f)
    assert back == design and back.name == design.name
    assert back.to_dict() == design.to_dict()
    assert f.read_text().startswith("# a comment\n# line two\n")


def test_defaults_from_minimal_yaml() -> None:
    d = DesignPoint.from_dict({"chiplets": {"tscs_p": 1, "tscs_d": 1}, "n_mem": 2})
    assert (d.memory, d.d2d_bw_gbps, d.placement, d.batching, d.scheduler, d.precision) == (
        "hbm3", 256.0, "cp", "static", "static", "int8"
    )
    assert (d.grid_w, d.grid_h, d.slot_area_mm2) == (6, 4, 144.0)


@pytest.mark.parametrize(
    "patch,key,needle",
    [
        ({"chiplets": {"tscs_q": 1}}, "chiplets.tscs_q", "allowed: b200_p"),
        ({"chiplets": {"tscs_p": -1}}, "chiplets.tscs_p", ">= 0"),
        ({"chiplets": {"tscs_p": 1.5}}, "chiplets.tscs_p", "not an integer"),
        ({"n_mem": float("nan")}, "n_mem", "not an integer"),
        ({"d2d_bw_gbps": float("nan")}, "d2d_bw_gbps", "finite"),
        ({"d2d_bw_gbps": -5}, "d2d_bw_gbps", "1..1e+06 GB/s"),
        ({"max_batch": 0}, "max_batch", ">= 1"),
        ({"placement": "bw"}, "placement", "cp, rr, random"),
        ({"scheduler": "fifo"}, "scheduler", "elastic"),
        ({"precision": "int3"}, "precision", "allowed"),
        ({"memory": "hbm9"}, "memory", "hbm3e"),
        ({"package": {"grid_w": 0}}, "package.grid_w", ">= 1"),
        ({"package": {"slot_mm2": 5}}, "package.slot_mm2", "not a known key"),
        ({"max_bacth": 4}, "max_bacth", "not a known key"),
        ({"dynacore": {"meu_policy": "fixed"}}, "dynacore.meu_shape", "required"),
        ({"dynacore": {"meu_shape": [1, 2]}}, "dynacore.meu_shape", "at least 3"),
        ({"dynacore": {"sram_mb": 0}}, "dynacore.sram_mb", ">= 1"),
        ({"dynacore": {"clock_mhz": float("inf")}}, "dynacore.clock_mhz", "finite"),
    ],
)
def test_located_errors(patch: dict, key: str, needle: str) -> None:
    data = {"chiplets": {"tscs_p": 1, "tscs_d": 1}, "n_mem": 2, **patch}
    with pytest.raises(ConfigError) as e:
        DesignPoint.from_dict(data, file="x.yaml")
    msg = str(e.value)
    assert msg.startswith("x.yaml: "), msg
    assert f" {key}" in msg and needle in msg, msg


def test_constructor_validates_programmatic_input() -> None:
    with pytest.raises(ConfigError):
        _design(max_batch=0)
    with pytest.raises(ConfigError):
        _design(placement="bw")
    with pytest.raises(ConfigError):
        _design(counts={"tscs_p": -2})


def test_feasibility_is_exported_by_the_system_package() -> None:
    from hydra_opt import system

    assert system.feasibility(_design()) == []
    assert system.feasibility(_design(n_mem=30)) != []


def test_example_designs_load_and_match_their_source_comment() -> None:
    files = sorted((ROOT / "studies" / "designs").glob("fig10-*.yaml"))
    assert len(files) == 24
    for f in files:
        d = load_design(f)
        row = next(line for line in f.read_text().splitlines() if line.startswith("# (row:"))
        nums = [int(t.strip(",;")) for t in row.split() if t.strip(",;").isdigit()]
        batch, m, mp, md, ap, ad, bw = nums[:7]
        assert (d.max_batch, d.n_mem, d.count("marca_p"), d.count("marca_d"), d.count("tscs_p"), d.count("tscs_d")) == (
            batch, m, mp, md, ap, ad
        )
        assert d.d2d_bw_gbps == bw and d.n_chiplets == 24


def test_round_trip_over_a_paper_space() -> None:
    from hydra_opt.system.space import nemotron_h_space

    for d in nemotron_h_space("artifact"):
        if d.max_batch != 8:
            continue
        assert DesignPoint.from_dict(d.to_dict()) == d
