"""The paper's design spaces (Table III / METHODS 2a): counts, closed forms, invariants."""

from __future__ import annotations

import math

import pytest

from hydra_opt.system.feasibility import feasibility
from hydra_opt.system.space import (
    BATCH_SIZES,
    D2D_BWS_GBPS,
    compositions,
    llama3_space,
    mamba2_space,
    n_compositions,
    nemotron_h_space,
    paper_space,
)


def test_llama3_and_mamba2_have_5040_designs() -> None:
    for space, names in ((llama3_space(), {"tscs_p", "tscs_d"}), (mamba2_space(), {"marca_p", "marca_d"})):
        designs = list(space)
        assert len(designs) == len(space) == 5040 == 210 * 24
        assert len(set(designs)) == 5040
        for d in designs:
            assert set(d.chiplet_names) == names
            assert d.n_chiplets == 24 and 2 <= d.n_mem <= 16
            assert d.max_batch in BATCH_SIZES and d.d2d_bw_gbps in D2D_BWS_GBPS


def test_nemotron_artifact_subset_has_17040_designs() -> None:
    s = nemotron_h_space("artifact")
    assert len(s) == 17040 and s.n_compositions == 710
    per_m = {}
    for m, counts in s.compositions:
        assert m % 2 == 0 and all(v % 2 == 1 for _, v in counts) and m + sum(v for _, v in counts) == 24
        per_m[m] = per_m.get(m, 0) + 1
    # METHODS 2a: C(k+3, 3) with k = (24 - M - 4) / 2 -> 220, 165, 120, 84, 56, 35, 20, 10.
    assert [per_m[m] for m in range(2, 17, 2)] == [220, 165, 120, 84, 56, 35, 20, 10]


def test_nemotron_all_compositions() -> None:
    s = nemotron_h_space("all")
    # Sum over M = 2..16 of C(23 - M, 3) = C(22, 4) - C(7, 4) (hockey stick).
    assert s.n_compositions == math.comb(22, 4) - math.comb(7, 4) == 7280
    assert len(s) == 7280 * 24 == 174720
    assert len(set(s.compositions)) == 7280
    assert set(nemotron_h_space("artifact").compositions) <= set(s.compositions)
    for _, counts in s.compositions:
        assert len(counts) == 4 and min(v for _, v in counts) >= 1


def test_closed_form_equals_enumeration() -> None:
    for k in (1, 2, 3, 4):
        for odd in (False, True):
            for mems in (range(2, 17), range(2, 17, 2), range(30)):
                got = sum(1 for _ in compositions([f"c{i}" for i in range(k)], mem_counts=mems, odd_compute=odd))
                assert got == n_compositions(k, mem_counts=mems, odd_compute=odd)


def test_every_paper_design_is_hardware_feasible() -> None:
    for name in ("llama3", "mamba2", "nemotron_h_artifact"):
        space = paper_space(name, batch_sizes=(2,))
        for d in space:
            assert feasibility(d) == [], d


def test_unknown_space() -> None:
    with pytest.raises(ValueError):
        paper_space("gpt4")
    with pytest.raises(ValueError):
        nemotron_h_space("some")
