"""Memory chiplets from package data."""

from __future__ import annotations

import pytest

from hydra_opt.config import ConfigError
from hydra_opt.hardware.memory import GIB, get_memory, list_memories, load_memory


def test_shipped_memories() -> None:
    assert list_memories() == ("gddr7", "hbm3", "hbm3e")
    hbm3 = get_memory("hbm3")
    # HYDRA artifact: 16 GB (16,384 MB of 2**20 B), 600 GB/s node IO budget (METHODS 2a).
    assert hbm3.capacity_bytes == 16 * GIB == 16384 * 2**20
    assert hbm3.bw_gbps == 600
    assert get_memory("hbm3e").capacity_bytes == 24 * GIB and get_memory("hbm3e").bw_gbps == 1024
    # GDDR7 chiplet = 2 devices x 32 pins x 32 Gb/s / 8 = 256 GB/s.
    assert get_memory("gddr7").bw_gbps == 2 * 32 * 32 / 8
    for name in list_memories():
        m = get_memory(name)
        assert m.latency_ns > 0 and m.energy_pj_per_byte > 0 and m.area_mm2 > 0


def test_unknown_memory() -> None:
    with pytest.raises(ConfigError, match="allowed: gddr7, hbm3, hbm3e"):
        get_memory("hbm4")


def test_peak_below_usable_is_refused(tmp_path) -> None:
    f = tmp_path / "m.yaml"
    f.write_text("kind: memory\nname: x\ncapacity_gib: 8\nbw_gbps: 900\npeak_bw_gbps: 800\n")
    with pytest.raises(ConfigError) as e:
        load_memory(f)
    assert "peak_bw_gbps" in str(e.value)
