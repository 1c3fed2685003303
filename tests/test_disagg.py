"""Prefill/decode-disaggregated serving simulator (hydra_opt.experiments.disagg): closed forms and invariants."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from hydra_opt.config.errors import ConfigError
from hydra_opt.experiments.disagg import DisaggOptions, DynaCoreDeviceCost, simulate_disagg


class LinearCost:
    """prefill = a + b·Σp; decode = c + d·B + e·Σctx (easy closed forms)."""

    def __init__(self, a=0.1, b=1e-4, c=0.01, d=1e-3, e=1e-6):
        self.a, self.b, self.c, self.d, self.e = a, b, c, d, e

    def prefill_s(self, p):
        return self.a + self.b * float(np.sum(p))

    def decode_s(self, ctx):
        ctx = np.asarray(ctx)
        return self.c + self.d * ctx.size + self.e * float(ctx.sum())


def reqs(arr, p, o):
    return SimpleNamespace(
        arrival_s=np.asarray(arr, float), prompt_tokens=np.asarray(p, np.int64), output_tokens=np.asarray(o, np.int64)
    )


def test_single_request_closed_form():
    cost = LinearCost()
    kvb = 131072.0
    p, o, t0 = 1000, 6, 2.5
    res = simulate_disagg(reqs([t0], [p], [o]), cost, cost, kvb, DisaggOptions(n_prefill=2, n_decode=3))
    kv_s = p * kvb / 16e9
    assert res.ttft_s[0] == pytest.approx(cost.prefill_s([p]) + kv_s, rel=1e-12)
    steps = [cost.decode_s([p + j - 1]) for j in range(1, o)]
    assert res.tpot_s[0] == pytest.approx(np.mean(steps), rel=1e-12)
    assert res.finish_s[0] == pytest.approx(t0 + cost.prefill_s([p]) + kv_s + sum(steps), rel=1e-12)
    assert res.kv_bytes == p * kvb
    # Without the hand-off in TTFT, the first token is at prefill end.
    res2 = simulate_disagg(
        reqs([t0], [p], [o]), cost, cost, kvb, DisaggOptions(ttft_includes_kv_transfer=False)
    )
    assert res2.ttft_s[0] == pytest.approx(cost.prefill_s([p]), rel=1e-12)


def test_one_token_output_has_no_decode_and_nan_tpot():
    cost = LinearCost()
    res = simulate_disagg(reqs([0.0], [10], [1]), cost, cost, 0.0)
    assert res.decode_steps == 0
    assert np.isnan(res.tpot_s[0])
    assert res.finish_s[0] == pytest.approx(cost.prefill_s([10]))


def test_fcfs_prefill_batching_and_queueing():
    # One prefill device: r0 starts alone on arrival; r1, r2 (and r3, over the batch limit 2) queue behind it.
    cost = LinearCost(a=1.0, b=0.0)
    res = simulate_disagg(
        reqs([0, 0, 0, 0], [5, 5, 5, 5], [2, 2, 2, 2]),
        cost,
        cost,
        0.0,
        DisaggOptions(n_prefill=1, n_decode=1, max_prefill_batch=2),
    )
    assert res.prefill_end_s.tolist() == [1.0, 2.0, 2.0, 3.0]
    # Token cap: a batch never exceeds max_prefill_tokens unless one prompt alone does.
    res = simulate_disagg(
        reqs([0, 0, 0], [600, 600, 9000], [2, 2, 2]),
        cost,
        cost,
        0.0,
        DisaggOptions(n_prefill=1, n_decode=1, max_prefill_batch=8, max_prefill_tokens=1000),
    )
    assert res.prefill_end_s.tolist() == [1.0, 2.0, 3.0]


def test_kv_link_serialises_transfers_on_one_pair():
    cost = LinearCost(a=1.0, b=0.0)
    kvb = 16e9 / 100  # 100 tokens → 1 s over 16 GB/s
    res = simulate_disagg(
        reqs([0, 0], [100, 100], [2, 2]), cost, cost, kvb, DisaggOptions(n_prefill=1, n_decode=1)
    )
    # Same batch, same link: second transfer waits for the first.
    assert res.first_token_s.tolist() == pytest.approx([2.0, 3.0])


def test_continuous_batching_joins_at_iteration_boundary():
    cost = LinearCost(a=0.0, b=0.0, c=1.0, d=0.0, e=0.0)  # every decode step 1 s
    res = simulate_disagg(
        reqs([0.0, 0.5], [4, 4], [4, 2]), cost, cost, 0.0, DisaggOptions(n_prefill=2, n_decode=1)
    )
    # r0 decodes at [0,1],[1,2],[2,3]; r1 (KV at 0.5) joins at t=1 → done at 2.
    assert res.finish_s.tolist() == pytest.approx([3.0, 2.0])
    assert res.decode_steps == 3 and res.decode_tokens == 4


def test_conservation_and_invariants_random():
    rng = np.random.default_rng(1)
    n = 300
    arr = np.sort(rng.exponential(0.05, n).cumsum())
    p = rng.integers(1, 3000, n)
    o = rng.integers(1, 200, n)
    cost = LinearCost()
    opt = DisaggOptions(n_prefill=3, n_decode=2, max_decode_batch=16)
    res = simulate_disagg(reqs(arr, p, o), cost, cost, 1e5, opt)
    assert np.all(np.isfinite(res.finish_s)) and np.all(np.isfinite(res.first_token_s))
    assert np.all(res.prefill_end_s >= arr + cost.prefill_s([1]) - 1e-12)
    assert np.all(res.first_token_s >= res.prefill_end_s)
    assert np.all(res.finish_s >= res.first_token_s)
    # Every decode iteration makes one token per resident request; the first token comes from prefill.
    assert res.decode_tokens == int((o - 1).sum())
    assert res.kv_bytes == pytest.approx(float(p.sum()) * 1e5)
    assert set(np.unique(res.decode_device)) <= {0, 1}
    # Busy time never exceeds the span per device.
    span = res.finish_s.max()
    assert np.all(res.prefill_busy_s <= span + 1e-9) and np.all(res.decode_busy_s <= span + 1e-9)
    # Same input → same output.
    res2 = simulate_disagg(reqs(arr, p, o), cost, cost, 1e5, opt)
    assert np.array_equal(res.finish_s, res2.finish_s)


def test_more_decode_devices_never_hurt_tpot_under_load():
    rng = np.random.default_rng(2)
    n = 200
    arr = np.sort(rng.uniform(0, 5, n))
    p, o = rng.integers(10, 200, n), rng.integers(20, 100, n)
    cost = LinearCost(c=0.02, d=0.002)
    t = [
        simulate_disagg(reqs(arr, p, o), cost, cost, 0.0, DisaggOptions(n_prefill=4, n_decode=k)).tpot_mean_s
        for k in (1, 2, 4)
    ]
    assert t[0] > t[1] > t[2]


def test_bad_options():
    with pytest.raises(ConfigError):
        DisaggOptions(n_prefill=0)
    with pytest.raises(ConfigError):
        DisaggOptions(link_bw_gbps=0.0)
    with pytest.raises(ConfigError):
        simulate_disagg(reqs([0], [0], [1]), LinearCost(), LinearCost(), 0.0)


def test_dynacore_device_cost_matches_pass_cost():
    from hydra_opt.hardware.dynacore import ConfigTable, get_architecture, pass_cost

    cost = DynaCoreDeviceCost("planaria", "llama-3.1-8b", "w8a8", "w4a16")
    table = ConfigTable(get_architecture("planaria"))
    rng = np.random.default_rng(0)
    for _ in range(2):
        ctx = rng.integers(10, 4000, size=int(rng.integers(2, 40)))
        ref = pass_cost(table, cost.model, ctx, np.ones_like(ctx), "w4a16").latency_s
        assert cost.decode_s(ctx) == pytest.approx(ref, rel=0.02)
        pr = rng.integers(10, 3000, size=int(rng.integers(1, 4)))
        ref = pass_cost(table, cost.model, np.zeros_like(pr), pr, "w8a8").latency_s
        assert cost.prefill_s(pr) == pytest.approx(ref, rel=0.03)
    # Decode is flat in batch on Planaria below its 32-row floor (Fig. 11 knee) and grows with context.
    assert cost.decode_s(np.full(8, 512)) < 1.5 * cost.decode_s(np.full(1, 512))
    assert cost.decode_s(np.full(8, 8192)) > cost.decode_s(np.full(8, 512))
