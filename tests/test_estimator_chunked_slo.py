"""The estimator's chunked-prefill plan and its SLO metrics (attainment, p90, capacity) against closed forms."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from hydra_opt.evaluate.estimator import Estimate, estimate, estimate_space
from hydra_opt.evaluate.estimator import capacities as cap
from hydra_opt.evaluate.estimator.goodput import estimated_capacity, estimated_slo
from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.evaluate.slo import CapacitySettings, Slo
from hydra_opt.system.design import DesignPoint
from hydra_opt.workload.models import load_model
from hydra_opt.workload.workload import load_workload

ROOT_WL = "studies/workloads/quickstart-chat.yaml"


@pytest.fixture(scope="module")
def pair():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    return load_model("llama-3-8b"), load_workload(root / ROOT_WL)


def _design(batching: str, **kw) -> DesignPoint:
    return DesignPoint(counts=(("tscs_d", 10), ("tscs_p", 6)), n_mem=8, d2d_bw_gbps=512.0, max_batch=8,
                       batching=batching, **kw)


def test_chunk_aggregates_in_closed_form():
    # One prompt of 1000 tokens in chunks of 256: 256, 256, 256, 232 at contexts 0, 256, 512, 768.
    st = cap.length_stats(np.array([1000.0]), np.array([5.0]))
    agg, n = cap.chunked_prefill_agg(st, 1.0, 256.0)
    qs, cs = [256, 256, 256, 232], [0, 256, 512, 768]
    assert n == 4
    np.testing.assert_allclose(agg, [1, 4, 1000, sum(q * c for q, c in zip(qs, cs)), sum(q * q for q in qs), sum(cs)])
    # A chunk as large as the prompt is the unchunked prefill pass.
    agg1, n1 = cap.chunked_prefill_agg(st, 1.0, 4096.0)
    np.testing.assert_allclose(agg1, cap.prefill_agg(st, 1.0))
    assert n1 == 1


def test_lone_requests_decode_alike_under_continuous_and_chunked(pair):
    # At a trickle of requests each runs alone: a pass is the one-member decode pass under both policies (the
    # simulator's decode-only steady state is the same), while chunked prefill's first token waits for its pass.
    model, wl = pair
    slow = Scenario(arrival_interval_s=60.0, n_requests=8)
    a = estimate(_design("continuous"), model, wl, scenario=slow)
    b = estimate(_design("chunked"), model, wl, scenario=slow)
    # A lone request's batch is the only one: its passes are decode-only (an arrival would start a batch of its own
    # while fewer than max_batches run), so its TPOT is exactly the continuous one.
    assert b.tpot_mean_s == pytest.approx(a.tpot_mean_s, rel=1e-9)
    assert b.throughput_tok_s == pytest.approx(a.throughput_tok_s, rel=3e-3)


@pytest.mark.parametrize("batching", ["continuous", "chunked"])
def test_a_lone_request_decodes_alike_whatever_the_batch_cap(pair, batching):
    # A one-member pass streams the same weights and computes the same token whatever max_batch allows, so a lone
    # request's TPOT cannot depend on it. Scaling every batch count by the member split at m batches priced it at
    # 18.9 ms with B = 16 and 15.0 ms with B = 8 on this design (simulated 15.3 ms for both).
    model, wl = pair
    slow = Scenario(arrival_interval_s=60.0, n_requests=8)
    tpot = [estimate(replace(_design(batching, scheduler="elastic"), max_batch=b), model, wl, scenario=slow).tpot_mean_s
            for b in (4, 8, 16)]
    assert tpot == pytest.approx([tpot[0]] * 3, rel=1e-9)


def test_single_and_vectorised_agree_and_small_budgets_delay_the_first_token(pair):
    model, wl = pair
    d = _design("chunked", scheduler="elastic")
    ttfts = []
    for budget in (8192, 128, 32):
        scn = Scenario(token_budget=budget)
        one = estimate(d, model, wl, scenario=scn)
        vec = estimate_space([d, replace(d, max_batch=4)], model, wl, scenario=scn)[0]
        for e in (vec,):
            assert e.ttft_mean_s == pytest.approx(one.ttft_mean_s, rel=1e-6)
            assert e.throughput_tok_s == pytest.approx(one.throughput_tok_s, rel=1e-6)
        ttfts.append(one.ttft_mean_s)
    assert ttfts[0] < ttfts[1] < ttfts[2]  # more chunks per prompt → more passes before the first token


def test_estimated_attainment_is_the_shifted_exponential():
    e = Estimate(throughput_tok_s=100.0, ttft_mean_s=1.0, tpot_mean_s=0.02, capacity_tok_s=200.0, bottleneck="x",
                 diagnostics={"prefill_latency_s": 0.4})
    m = estimated_slo(e, Slo(ttft_s=1.5, tpot_s=0.05))
    assert m["slo_attainment"] == pytest.approx(1 - math.exp(-(1.5 - 0.4) / 0.6))
    assert m["goodput_tok_s"] == pytest.approx(100.0 * m["slo_attainment"])
    assert m["ttft_p90_s"] == pytest.approx(0.4 + math.log(10) * 0.6)
    assert estimated_slo(e, Slo(ttft_s=0.3, tpot_s=0.05))["slo_attainment"] == 0.0  # below the deterministic part
    assert estimated_slo(e, Slo(ttft_s=10.0, tpot_s=0.01))["slo_attainment"] == 0.0  # TPOT bound missed


def test_estimated_capacity_attains_at_its_rate_and_not_above(pair):
    model, wl = pair
    slo = Slo(ttft_s=5.0, tpot_s=0.5)
    c = estimated_capacity(_design("continuous"), model, wl, slo=slo,
                           capacity=CapacitySettings(requests=1000, window_s=30.0))
    assert c.converged and c.capacity_req_s > 0
    lo, hi = c.bracket_req_s
    assert hi / lo - 1 <= 0.02 * (1 + 1e-9)  # neighbours on the search's rate lattice
    att = dict(c.runs)
    assert att[lo] >= 0.9 and att[hi] < 0.9


def test_a_capacity_search_leaves_no_preparation_behind(pair):
    # Each rate the search tries is a new request stream with a preparation of its own; once the search is over
    # the streams are freed and so must their preparations be (kept, they grew a process by ~0.5 MB a design).
    import gc

    from hydra_opt.evaluate.estimator import core

    model, wl = pair
    estimated_capacity(_design("continuous", scheduler="elastic"), model, wl)  # warm: the workload's own entries
    gc.collect()
    before = len(core._PREP_CACHE)
    for b in (4, 8, 16):
        res = estimated_capacity(replace(_design("continuous", scheduler="elastic"), max_batch=b), model, wl)
        assert len(res.runs) > 3
    gc.collect()
    assert len(core._PREP_CACHE) == before
