"""The artifact-rule probes of the Fig. 8 reproduction (hydra_opt/experiments/artifact_probe.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hydra_opt.experiments.artifact_probe import (
    ArtifactAttention,
    ProbeLibrary,
    artifact_attention_model,
    artifact_batch_limit,
    calibrate,
    probe_ladder,
)
from hydra_opt.evaluate import Scenario
from hydra_opt.experiments._hydra_sims import SimRun
from hydra_opt.hardware.chiplets import ChipletLibrary
from hydra_opt.workload.cost import COST_FIELDS, batch_aggregates
from hydra_opt.workload.layers import AttentionLayer
from hydra_opt.workload.models import load_model
from hydra_opt.workload.precision import get_precision

_MACS = COST_FIELDS.index("macs")


def _design(chiplets: dict, n_mem: int, bw: int, batch: int) -> dict:
    return {"chiplets": chiplets, "n_mem": n_mem, "d2d_bw_gbps": bw, "max_batch": batch}


def test_batch_limit_memory_bound_llama():
    # 32 blocks on 6 HBMs: 6 on the fullest; free = 16,384 − 6·230,370,112/2^20 = 15,065.8 MB; per request
    # 6·(8,192·4,096 + 14,336)/2^20 = 192.08 MB → 78 requests → 9 batches of 8 (IO limit 45, 18 chiplets).
    d = _design({"tscs_d": 10, "tscs_p": 8}, 6, 384, 8)
    assert artifact_batch_limit(d, "llama-3-8b@hydra") == 9
    # Batch 4 on 5 HBMs: 7 blocks on the fullest → 66 requests → 16 batches (< 19 chiplets).
    assert artifact_batch_limit(_design({"tscs_d": 10, "tscs_p": 9}, 5, 384, 4), "llama-3-8b@hydra") == 16


def test_batch_limit_io_and_compute_bound_mamba():
    # 2 HBMs at 512 GB/s: u = max(64, 192/2) = 96 → IO limit min(⌊1,200/96⌋, ⌊3,072/96⌋) = 12 < 22 chiplets.
    assert artifact_batch_limit(_design({"marca_d": 8, "marca_p": 14}, 2, 512, 16), "mamba2-2.7b@hydra") == 12
    # 5 HBMs at 384: IO ⌊3,000/80⌋ = 37, memory allows ~3,600 requests: the 19 compute chiplets bind.
    assert artifact_batch_limit(_design({"marca_d": 11, "marca_p": 8}, 5, 384, 16), "mamba2-2.7b@hydra") == 19


def test_batch_limit_unknown_model_or_bandwidth_is_none():
    assert artifact_batch_limit(_design({"tscs_d": 1}, 2, 384, 2), "nemotron-h-4b@hydra") is None
    assert artifact_batch_limit(_design({"tscs_d": 1}, 2, 300, 2), "llama-3-8b@hydra") is None


def test_probe_library_fixes_composition_and_scales_mac_rates():
    base = ChipletLibrary.default("paper")
    lib = ProbeLibrary(base, noi_gbps=384, mac_scale=0.5, prefill_mac_scale=0.25)
    p, d = lib.get("tscs_p", 160, 144.0), lib.get("tscs_d", 160, 144.0)
    p384, d384 = base.get("tscs_p", 384, 144.0), base.get("tscs_d", 384, 144.0)
    assert p.cores == p384.cores and d.sram_gbps == d384.sram_gbps  # the 384 GB/s composition, not 160's
    assert p.macs_per_s == pytest.approx(p384.macs_per_s * 0.125)
    assert d.macs_per_s == pytest.approx(d384.macs_per_s * 0.5)
    assert "tscs_p" in lib and lib.names() == base.names()


def test_artifact_attention_macs_closed_form():
    model = load_model("llama-3-8b@hydra")
    p = get_precision("int8")
    real = next(layer for layer in model.blocks[0].layers if type(layer) is AttentionLayer)
    art = ArtifactAttention(**{f: getattr(real, f) for f in ("hidden", "heads", "kv_heads", "head_dim", "rope")})
    D, h, dk = real.hidden, real.heads, real.hidden // real.kv_heads
    L, c = 2445, 3000
    prefill = batch_aggregates(np.array([0.0]), np.array([float(L)]))
    decode = batch_aggregates(np.array([float(c)]), np.array([1.0]))
    # Prefill: 3·D² per token + full L×L scores and values at d_k = D/h_kv (METHODS §2b).
    assert art.coeffs(p)[_MACS] @ prefill == pytest.approx(3 * D * D * L + 2 * h * dk * L * L)
    assert art.coeffs(p)[_MACS] @ decode == pytest.approx(3 * D * D + 2 * h * dk * (c + 1))
    # Llama's GQA: d_k is 4× the head dimension, so the artifact's prefill attention costs more.
    assert art.coeffs(p)[_MACS] @ prefill > real.coeffs(p)[_MACS] @ prefill
    other = [i for i in range(len(COST_FIELDS)) if i != _MACS]
    np.testing.assert_array_equal(art.coeffs(p)[other], real.coeffs(p)[other])


def test_artifact_attention_model_changes_only_attention_macs():
    model = load_model("llama-3-8b@hydra")
    art = artifact_attention_model(model)
    a, b = model.block_coeffs("int8"), art.block_coeffs("int8")
    assert not np.allclose(a[:, _MACS], b[:, _MACS])
    other = [i for i in range(len(COST_FIELDS)) if i != _MACS]
    np.testing.assert_array_equal(a[:, other], b[:, other])
    # The original model's cached coefficients are untouched.
    np.testing.assert_array_equal(model.block_coeffs("int8"), a)


def test_calibrate_inverse_law_converges_in_one_run():
    runs = []

    def run(s):
        runs.append(s)
        return 100.0 * s, 10.0 / s

    tries = calibrate(run, 40.0, (100.0, 10.0))
    assert runs == [pytest.approx(0.25)]
    assert tries[-1][2] == pytest.approx(40.0)


def test_calibrate_secant_on_a_weaker_law():
    tries = calibrate(lambda s: (s, 10.0 / math.sqrt(s)), 40.0, (1.0, 10.0), tol=0.02, max_runs=6)
    s, _, tt = tries[-1]
    assert abs(tt / 40.0 - 1) <= 0.02
    assert s == pytest.approx(1 / 16, rel=0.05)


def test_calibrate_without_target_runs_nothing():
    assert calibrate(lambda s: pytest.fail("must not run"), math.nan, (1.0, 2.0)) == [(1.0, 1.0, 2.0)]


def test_probe_ladder_short_run():
    d = {"chiplets": {"tscs_d": 10, "tscs_p": 8}, "n_mem": 6, "memory": "hbm3", "d2d_bw_gbps": 384, "max_batch": 8,
         "placement": "cp", "batching": "static", "scheduler": "static", "precision": "int8",
         "package": {"grid_w": 6, "grid_h": 4, "slot_area_mm2": 144.0}}
    out = probe_ladder(d, "llama-3-8b@hydra", "hydra-arxiv", SimRun(Scenario.paper(horizon_s=60.0, n_requests=1000)),
                       published_ttft_s=30.0)
    keys = [k for k, _, _ in out["steps"]]
    assert keys[:5] == ["ours", "limit", "half_rate", "attention", "reserved"]
    assert out["limit"] == 9 and out["reserved_gbps"] == 160.0
    ttft = {k: tt for k, _, tt in out["steps"]}
    # ArXiv prompts (~3k tokens) make prefill compute-bound: halving the MAC rate lengthens the first token.
    assert ttft["half_rate"] > ttft["limit"]
    final = out["calibration"][-1]
    assert abs(math.log(final[2] / 30.0)) <= abs(math.log(ttft["reserved"] / 30.0))
