"""Feasibility reasons (never exceptions)."""

from __future__ import annotations

import pytest

from hydra_opt.system.design import DesignPoint
from hydra_opt.system.feasibility import feasibility

models = pytest.importorskip("hydra_opt.workload.models")


def _d(**kw) -> DesignPoint:
    base = dict(counts={"tscs_p": 3, "tscs_d": 1, "marca_p": 7, "marca_d": 7}, n_mem=6, d2d_bw_gbps=384, max_batch=2)
    base.update(kw)
    return DesignPoint(**base)


def test_paper_design_is_feasible() -> None:
    assert feasibility(_d()) == []
    assert feasibility(_d(), "nemotron-h-4b") == []


def test_slots_exceeded() -> None:
    r = feasibility(_d(n_mem=8))
    assert any("26 exceed the 24 slots" in x for x in r), r


def test_memory_off_ring() -> None:
    d = _d(counts={"tscs_p": 1, "tscs_d": 1}, n_mem=17)
    r = feasibility(d)
    assert any(x.startswith("n_mem:") and "16 outer-ring" in x for x in r), r
    assert feasibility(_d(counts={"tscs_p": 1, "tscs_d": 1}, n_mem=16)) == []


def test_area_over_slot_budget() -> None:
    # At 2 TB/s per link, 4 x (bump + PHY) = 4 x 43.7 mm² leaves nothing for compute in 144 mm².
    r = feasibility(_d(d2d_bw_gbps=2048))
    assert any("no room for compute" in x for x in r), r
    # A 60 mm² slot cannot hold a 121 mm² HBM footprint.
    r = feasibility(_d(slot_area_mm2=60))
    assert any(x.startswith("memory:") and "footprint" in x for x in r), r


def test_weights_do_not_fit() -> None:
    m = models.load_model("llama-3-8b")
    # fp16 Llama-3-8B weights are ~15 GiB: one 16 GiB HBM3 holds them, but not with 64 requests of 4K context.
    d = DesignPoint(counts={"tscs_p": 1, "tscs_d": 1}, n_mem=1, max_batch=64, precision="fp16")
    assert feasibility(d, m) == []
    r = feasibility(d, m, min_context_tokens=4096)
    assert any(x.startswith("n_mem:") and "64 request(s)" in x for x in r), r
    # Continuous batching only needs one request to fit.
    assert feasibility(d.replace(batching="continuous"), m, min_context_tokens=4096) == []
    # One GDDR7 (16 GiB) cannot hold the fp16 weights of Llama-2-13B (~24 GiB).
    big = models.load_model("llama-2-13b")
    r = feasibility(d.replace(memory="gddr7", max_batch=1), big)
    assert any("hold 16.00 GiB" in x for x in r), r


def test_missing_family_or_phase() -> None:
    mamba = models.load_model("mamba2-2.7b")
    d = DesignPoint(counts={"tscs_p": 4, "tscs_d": 4}, n_mem=4)
    r = feasibility(d, mamba)
    assert sum("no chiplet can run mamba" in x for x in r) == 2, r
    only_prefill = DesignPoint(counts={"marca_p": 4}, n_mem=4)
    r = feasibility(only_prefill, mamba)
    assert len(r) == 1 and "mamba blocks in decode" in r[0]
    assert feasibility(only_prefill, mamba, allow_fallback=True) == []


def test_never_raises() -> None:
    class Broken:
        blocks = ()

        def weight_bytes(self, p):
            raise RuntimeError("boom")

    r = feasibility(_d(), Broken())
    assert len(r) == 1 and "could not be checked" in r[0]
    r = feasibility(DesignPoint(counts={"nonexistent": 2}, n_mem=2))
    assert any("chiplets.nonexistent" in x for x in r)


def test_block_larger_than_one_memory() -> None:
    class Block:
        family = "attention"

    class Huge:
        name = "huge"
        blocks = (Block(), Block())

        def weight_bytes(self, p):
            return 2 * 20 * 2**30

        def kv_bytes_per_token(self, p):
            return 0.0

        def state_bytes_per_seq(self, p):
            return 0.0

        def block_weight_bytes(self, p):
            return [20 * 2**30, 20 * 2**30]

    d = DesignPoint(counts={"tscs_p": 1, "tscs_d": 1}, n_mem=4)  # 64 GiB in total, 16 GiB per HBM3
    r = feasibility(d, Huge())
    assert r == ["memory: the largest block's weights (20.00 GiB) exceed one hbm3 (16.00 GiB)"], r
    assert feasibility(d.replace(memory="hbm3e"), Huge()) == []  # 24 GiB stacks
