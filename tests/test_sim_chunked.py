"""Chunked prefill (batching="chunked") through the real engine, against closed forms on synthetic systems."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hydra_opt.evaluate.scenario import SCENARIO_KEYS, Scenario
from hydra_opt.evaluate.simulator import SimOptions, run_system
from hydra_opt.runtime.batching import plan_chunks
from sim_synthetic import one_block_model, single_chiplet_system

S = 0.01  # per-pass constant cost, s
K = 1e-4  # per new token cost, s


def _run(arr, prompt, out, *, batching, max_batch=8, model=None, **opt):
    return run_system(
        single_chiplet_system(), model or one_block_model(service_s=S, per_token_s=K), np.asarray(arr, dtype=float),
        np.asarray(prompt), np.asarray(out), SimOptions(debug=True, **{k: v for k, v in opt.items() if k not in SCENARIO_KEYS}),
        scenario=Scenario(warmup_frac=0.0, **{k: v for k, v in opt.items() if k in SCENARIO_KEYS}),
        batching=batching, max_batch=max_batch,
    )


def test_plan_chunks_fills_the_budget_in_order():
    assert plan_chunks([300, 50, 400], 320) == [300, 20, 0]
    assert plan_chunks([10, 10], 0) == [0, 0]
    assert plan_chunks([1000], 256) == [256]


@pytest.mark.parametrize("prompt,budget", [(1000, 256), (1024, 256), (100, 256), (257, 256)])
def test_lone_request_ttft_is_the_sum_of_its_chunk_passes(prompt, budget):
    # Alone, every pass carries one chunk: ceil(P/C) passes of S + K·q each, so TTFT = n·S + K·P.
    res = _run([0.0], [prompt], [3], batching="chunked", token_budget=budget)
    n = math.ceil(prompt / budget)
    assert res.raw.first_token_s[0] == pytest.approx(n * S + K * prompt, rel=1e-12)
    # Then two decode passes of one token each.
    assert res.raw.finish_s[0] == pytest.approx(n * S + K * prompt + 2 * (S + K), rel=1e-12)


def test_decode_only_steady_state_equals_continuous_batching():
    # Every prompt fits one pass's budget and all arrive together: both policies prefill everyone in one pass and
    # then run decode-only passes, which must be identical.
    arr, prompt, out = [0.0] * 5, [40, 70, 10, 90, 30], [6, 3, 9, 2, 5]
    cont = _run(arr, prompt, out, batching="continuous", max_batches=1)
    chunk = _run(arr, prompt, out, batching="chunked", max_batches=1)
    np.testing.assert_array_equal(chunk.raw.first_token_s, cont.raw.first_token_s)
    np.testing.assert_array_equal(chunk.raw.finish_s, cont.raw.finish_s)
    assert chunk.tokens_emitted == cont.tokens_emitted == sum(out)


def test_chunks_share_passes_with_decodes():
    # r0 decodes while r1's 600-token prompt is prefilled in chunks of budget − 1 decode = 255 tokens: r0's
    # decode passes carry those chunks (the passes are mixed), and r1's first token comes after 3 chunk passes.
    # (r1 arrives with r0; both are admitted into one batch.)
    res2 = _run([0.0, 0.0], [10, 600], [20, 2], batching="chunked", token_budget=256, max_batch=2, max_batches=1)
    # First pass: r0's prompt (10) + 246 tokens of r1's (one prefill task); then r0's decode + 255 tokens, then
    # r0's decode + 99 tokens. A mixed pass is one task per phase (as in continuous batching; on HYDRA systems
    # they run on prefill and decode chiplets); on the lone chiplet they queue, the prefill task first, and the
    # next pass starts when both are done.
    t1 = S + K * 256
    t2 = t1 + (S + K * 255) + (S + K)
    t3 = t2 + S + K * 99
    assert res2.raw.first_token_s[0] == pytest.approx(t1, rel=1e-12)
    assert res2.raw.first_token_s[1] == pytest.approx(t3, rel=1e-12)
    assert res2.tokens_emitted == 22


def test_chunked_preemption_keeps_conservation():
    rng = np.random.default_rng(3)
    n = 40
    arr = np.sort(rng.uniform(0, 0.5, n))
    res = run_system(
        single_chiplet_system(), one_block_model(service_s=S, per_token_s=K, kv_bytes_per_token=1000.0),
        arr, rng.integers(50, 400, n), rng.integers(1, 30, n),
        SimOptions(debug=True), scenario=Scenario(warmup_frac=0.0, token_budget=128), batching="chunked", max_batch=8,
    )
    assert res.completed_requests + res.rejected_requests == n
    assert res.tokens_emitted == int(res.raw.generated.sum()) + res.tokens_discarded
