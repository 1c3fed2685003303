"""The estimator: capacities priced by opcost (as the simulator prices tasks), closed forms, invariants."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from hydra_opt.evaluate.estimator import estimate, roofline_estimate, space_arrays
from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.evaluate.estimator import capacities as cap
from hydra_opt.evaluate.estimator import core, fluid, markov
from hydra_opt.evaluate.opcost import task_time
from hydra_opt.hardware.chiplets import ChipletLibrary
from hydra_opt.hardware.memory import get_memory
from hydra_opt.system.design import DesignPoint
from hydra_opt.workload.cost import BlockCost, batch_aggregates
from hydra_opt.workload.models import load_model
from hydra_opt.workload.workload import load_workload

ROOT = Path(__file__).resolve().parents[1]

LIB = ChipletLibrary.default()


@pytest.fixture(scope="module")
def llama():
    return load_model("llama-3-8b")


@pytest.fixture(scope="module")
def arxiv():
    return load_workload("arxiv")


def _stream(n: int, rate: float, prompt: int, output: int, seed: int = 0):
    """A workload-like object: Poisson arrivals, constant lengths."""
    rng = np.random.default_rng(seed)
    arr = np.cumsum(rng.exponential(1.0 / rate, n))
    req = SimpleNamespace(arrival_s=arr, prompt_tokens=np.full(n, prompt), output_tokens=np.full(n, output))
    return SimpleNamespace(name=f"const-{rate}-{prompt}-{output}", horizon_s=None, requests=lambda seed=None: req)


# ------------------------------------------------------------------------------------------------ capacities


def test_block_times_equal_opcost_and_simulator_task_cost(llama) -> None:
    """Per-block time of a batch = opcost.task_time of that block's BlockCost — what the simulator charges."""
    from hydra_opt.evaluate.simulator.system import mem_coefficients, time_coefficients

    chip = LIB.get("tscs_d", 384.0)
    coeffs = llama.block_coeffs("int8")
    ctx = np.array([100.0, 2000.0, 517.0])
    new = np.array([1.0, 1.0, 1.0])
    agg = batch_aggregates(ctx, new)
    costs = cap.block_costs(coeffs, agg)
    lat, mem = cap.block_times(costs, cap.chiplet_arrays([chip]), np.array([300.0]))
    k_comp, k_sram = time_coefficients(chip, coeffs)
    mem_k, _ = mem_coefficients(coeffs)
    for b in (0, 17, 31):
        ref = task_time(chip, BlockCost.from_array(coeffs[b] @ agg), 300.0)
        assert lat[b, 0] == pytest.approx(ref.latency_s, rel=1e-12)
        sim = max(k_comp[b] @ agg, k_sram[b] @ agg, (mem_k[b] @ agg) / 300e9)
        assert lat[b, 0] == pytest.approx(sim, rel=1e-12)
        assert mem[b] == pytest.approx(mem_k[b] @ agg, rel=1e-12)


def test_expected_aggregates_are_exact_means() -> None:
    """E[agg] of a decode pass uses the length-biased context (long outputs hold decode slots longer)."""
    p = np.array([10.0, 1000.0])
    o = np.array([2.0, 5.0])  # S = 1 and 4 decode steps
    st = cap.length_stats(p, o)
    slots = [(10.0 + 0)] + [1000.0 + i for i in range(4)]  # context of every decode step of both requests
    assert st.decode_ctx_mean_tok == pytest.approx(np.mean(slots))
    assert st.decode_ctx_sq_mean_tok2 == pytest.approx(np.mean(np.square(slots)))
    agg = cap.prefill_agg(st, 3.0)
    assert agg.tolist() == pytest.approx([1.0, 3.0, 3.0 * 505.0, 0.0, 3.0 * (100.0 + 1e6) / 2.0, 0.0])


def test_assignment_minimises_bottleneck_for_identical_blocks() -> None:
    t = np.full((32, 5), 1.0)
    loads, owner = cap.assign_blocks(t)
    assert loads.max() == 7.0 and loads.sum() == 32.0  # ceil(32/5)
    assert np.bincount(owner, minlength=5).tolist() == loads.astype(int).tolist()
    # Vectorised twin (numpy over designs) gives the same mapping as the one-design Python path.
    l2, o2 = cap.assign_blocks(np.stack([t, t * 2.0]))
    assert np.array_equal(o2[0], owner) and np.array_equal(l2[1], 2.0 * loads)


def test_ineligible_stations_get_nothing() -> None:
    t = np.array([[1.0, np.inf], [2.0, np.inf], [1.0, 3.0]])
    loads, owner = cap.assign_blocks(t)
    assert owner[0] == 0 and owner[1] == 0 and np.isfinite(loads).all()


def test_mva_closed_forms() -> None:
    # One station: X = 1/D whatever the population. Two equal stations: X(n) = n / ((n + 1) D).
    x, r, _ = cap.mva_throughput(np.array([[0.5, 0.0]]), 4)
    assert x[0] == pytest.approx(2.0)
    for n in (1, 2, 5):
        x, r, _ = cap.mva_throughput(np.array([[0.2, 0.2]]), n)
        assert x[0] == pytest.approx(n / ((n + 1) * 0.2))
        assert r[0] == pytest.approx(n / x[0])


def test_memory_concurrency_grows_with_capacity(llama, arxiv) -> None:
    prep = core.prepare(llama, arxiv, precision="int8")
    n = core.memory_concurrency(prep, np.array([2, 4, 8]), 16 * 2**30, "static", 16)
    assert np.all(np.diff(n) > 0)


# ------------------------------------------------------------------------------------------------ Markov / fluid


def test_birth_death_product_form_sums_to_one_and_batches_over_a_leading_axis() -> None:
    rng = np.random.default_rng(3)
    b = rng.uniform(0.5, 2.0, (3, 40))
    d = rng.uniform(1.0, 3.0, (3, 40))
    p = markov.birth_death_stationary(b, d)
    assert p.shape == (3, 41)
    assert np.allclose(p.sum(axis=1), 1.0) and np.all(p >= 0)
    assert np.allclose(p[1], markov.birth_death_stationary(b[1], d[1]), rtol=1e-14, atol=0)
    # Detailed balance.
    assert np.allclose(p[:, :-1] * b, p[:, 1:] * d)
    # A 4,000-state chain at ρ = 1 stays finite (log space): uniform.
    flat = markov.birth_death_stationary(np.full(4000, 2.0), np.full(4000, 2.0))
    assert np.allclose(flat, 1.0 / 4001)


def test_mm1_queue_from_occupancy_chain() -> None:
    lam, mu = 0.6, 1.0
    pi, k = markov.occupancy_chain(lam, np.array([mu]), 1)
    q = (pi * np.maximum(np.arange(pi.size) - 1, 0)).sum()
    assert q == pytest.approx(lam**2 / (mu * (mu - lam)), rel=1e-6)  # M/M/1 mean queue length


def test_single_chiplet_reduces_to_md1() -> None:
    """One chiplet, batch cap 1, Poisson arrivals, identical requests: the wait is Pollaczek–Khinchine's M/D/1."""
    model = load_model("llama-3-8b")
    design = DesignPoint(counts=(("b200_p", 1),), n_mem=8, d2d_bw_gbps=256.0, max_batch=1)
    for rho in (0.5, 0.8):
        probe = estimate(design, model, _stream(50, 1.0, 64, 8), scenario=Scenario(horizon_s=1e9))
        service = 1.0 / probe.diagnostics["mu_max_req_s"]
        lam = rho / service
        est = estimate(design, model, _stream(4000, lam, 64, 8), scenario=Scenario(horizon_s=1e9))
        lam_eff = est.diagnostics["arrival_per_s"]
        assert est.diagnostics["regime"] == "stationary"
        assert est.diagnostics["queue_wait_s"] == pytest.approx(float(markov.md1_wait(lam_eff, service)), rel=1e-3)
        assert sum(est.diagnostics["pi"]) == pytest.approx(1.0, abs=1e-6)


def test_emin_curve_and_order_statistics_exact() -> None:
    s = np.array([0.0, 3.0, 3.0, 10.0])
    grid, emin = fluid.emin_curve(s, n_points=4)
    for k, e in zip(grid, emin):
        assert e == pytest.approx(np.minimum(s, k).mean())
    # E[max of 2 draws] by enumeration of the 16 equally likely pairs.
    pairs = np.maximum.outer(s, s)
    assert core._order_stats(s, 2)[0] == pytest.approx(pairs.mean())
    assert core._order_stats(s, 1)[0] == pytest.approx(s.mean())


def test_fluid_wait_closed_form() -> None:
    assert float(markov.fluid_wait(2.0, 1.0, 10.0, 30.0)) == pytest.approx(0.5 * 20.0)
    assert float(markov.fluid_wait(1.0, 2.0, 10.0, 30.0)) == 0.0


# ------------------------------------------------------------------------------------------------ invariants


def _designs():
    return [
        DesignPoint(counts=(("tscs_d", 10), ("tscs_p", 6)), n_mem=8, d2d_bw_gbps=384.0, max_batch=4),
        DesignPoint(counts=(("tscs_d", 3), ("tscs_p", 14)), n_mem=7, d2d_bw_gbps=256.0, max_batch=2),
        DesignPoint(counts=(("tscs_d", 12), ("tscs_p", 2)), n_mem=10, d2d_bw_gbps=640.0, max_batch=8),
        DesignPoint(counts=(("tscs_d", 5), ("tscs_p", 5)), n_mem=14, d2d_bw_gbps=512.0, max_batch=16,
                    scheduler="elastic", batching="continuous"),
    ]


def test_more_memory_bandwidth_never_lowers_throughput(llama) -> None:
    base = get_memory("hbm3")
    wl = load_workload("chat")
    opts = Scenario(horizon_s=60.0, n_requests=200)
    for d in _designs():
        prev = -1.0
        for bw in (300.0, 600.0, 1200.0, 2400.0):
            mem = SimpleNamespace(**{**base.__dict__, "bw_gbps": bw})
            dd = SimpleNamespace(**{f: getattr(d, f) for f in d.__dataclass_fields__}, )
            dd.memory = mem
            e = estimate(dd, llama, wl, scenario=opts)
            # Arrival-bound designs may lose a few 1e-4 of the window's tokens: faster passes finish the warm-up's
            # requests earlier, so fewer of their tokens fall inside the measurement window (1.3e-4 measured on the
            # replayed requests' own outputs, a few 1e-5 on output-length quantiles).
            assert e.throughput_tok_s >= prev - 3e-4 * max(prev, 1.0)
            assert e.capacity_tok_s > 0
            prev = e.throughput_tok_s


def test_vectorised_equals_scalar(llama, arxiv) -> None:
    opts = Scenario(horizon_s=60.0, n_requests=200)
    ds = _designs()
    a = space_arrays(ds, llama, arxiv, scenario=opts)
    for i, d in enumerate(ds):
        e = estimate(d, llama, arxiv, scenario=opts)
        assert a["throughput_tok_s"][i] == pytest.approx(e.throughput_tok_s, rel=1e-6, abs=1e-9)  # fixed-point tolerance
        assert a["capacity_tok_s"][i] == pytest.approx(e.capacity_tok_s, rel=1e-9)
        if np.isfinite(e.ttft_mean_s):
            assert a["ttft_mean_s"][i] == pytest.approx(e.ttft_mean_s, rel=1e-6)
        else:
            assert not np.isfinite(a["ttft_mean_s"][i])


def test_estimate_is_deterministic_and_serialisable(llama, arxiv) -> None:
    d = _designs()[0]
    e1 = estimate(d, llama, arxiv)
    e2 = estimate(d, llama, arxiv)
    assert e1.to_dict() == e2.to_dict()
    import json

    json.dumps(e1.to_dict())
    for key in ("throughput_tok_s", "ttft_mean_s", "tpot_mean_s", "bottleneck", "diagnostics"):
        assert key in e1.to_dict()


def test_static_batch_never_formed_gives_no_tokens(llama, arxiv) -> None:
    """At 1 req/s a static batch of 64 cannot form within 30 s: nothing is served (as in the simulator)."""
    d = DesignPoint(counts=(("tscs_d", 10), ("tscs_p", 10)), n_mem=4, d2d_bw_gbps=256.0, max_batch=64)
    e = estimate(d, llama, arxiv, scenario=Scenario(horizon_s=30.0))
    assert e.throughput_tok_s == 0.0 and not np.isfinite(e.ttft_mean_s)


def test_roofline_is_an_upper_bound_style_baseline(llama, arxiv) -> None:
    for d in _designs()[:3]:
        r = roofline_estimate(d, llama, arxiv)
        e = estimate(d, llama, arxiv)
        assert r.bottleneck in ("compute", "hbm", "noi")
        assert r.throughput_tok_s >= e.capacity_tok_s * 0.999  # pooled resources bound the pipeline


def test_lending_allocation_chain_balances_phases() -> None:
    """Allocation CTMC (§V-A/V-D): π sums to 1 per family, concentrates where the phases drain equally fast, and
    lending never makes the expected cycle rate worse than a badly unbalanced native split."""
    fams = [(1, 7, 1.0, 2.0, 1.0, 2.0)]  # 1 prefill-built, 7 decode-built chiplets; equal work per phase
    gain, pis = markov.lending_gain(fams, 0.9, 1.0)
    assert pis[0].sum() == pytest.approx(1.0)
    g_p, g_d = markov.lending_states(1, 7, 1.0, 2.0, 1.0, 2.0, 0.9)
    best = int(np.argmax(np.minimum(g_p, g_d)))
    assert int(np.argmax(pis[0])) in (best - 1, best, best + 1)
    assert gain > 1.0
    # Two families: the joint π is the product of the per-family chains.
    gain2, pis2 = markov.lending_gain(fams + [(4, 4, 1.0, 1.5, 1.0, 1.5)], 0.9, 1.0)
    assert np.allclose(pis2[0], pis[0]) and pis2[1].sum() == pytest.approx(1.0)


def test_window_past_the_last_arrival_is_capped_by_the_offered_tokens():
    # The paper preset's whole-run window: 500 requests arrive within 5 s, the window is 20 s. Jamba-tiny keeps up
    # with them, so every token is emitted within the run and throughput = offered tokens / 20 s (the simulator's
    # value); an open-ended fluid arrival stream would keep adding requests after the last one (2× or more).
    from hydra_opt.evaluate import simulate
    from hydra_opt.evaluate.estimator import EstimatorOptions

    d = DesignPoint.from_dict({
        "chiplets": {"marca_p": 1, "marca_d": 17, "tscs_p": 1, "tscs_d": 1}, "n_mem": 4, "memory": "hbm3",
        "d2d_bw_gbps": 640, "max_batch": 2, "placement": "cp", "batching": "static", "scheduler": "static",
        "precision": "int8", "package": {"grid_w": 6, "grid_h": 4, "slot_area_mm2": 144.0}})
    model, wl = load_model("jamba-tiny"), load_workload("hydra-chat")
    scn = Scenario.paper(horizon_s=20.0, n_requests=500)
    opts = EstimatorOptions(window_s=(0.0, 20.0))
    offered = float(np.maximum(wl.requests(0).output_tokens[:500], 1).sum()) / 20.0
    single = estimate(d, model, wl, scenario=scn, options=opts).throughput_tok_s
    vec = float(space_arrays([d], model, wl, scenario=scn, options=opts)["throughput_tok_s"][0])
    sim = simulate(d, model, wl, scenario=scn).throughput_tok_s
    assert single <= offered * (1 + 1e-12) and vec <= offered * (1 + 1e-12)
    assert sim == pytest.approx(offered)  # the simulator finishes every request: the cap is reached
    assert single == pytest.approx(sim, rel=0.02) and vec == pytest.approx(sim, rel=0.02)


def test_static_batches_side_by_side_are_those_the_run_forms():
    """A static batch decodes beside the batches alive with it: Little's ``r = λ·life/B`` in a long run, and no more
    than the replayed requests form — the quickstart's 12 + 2 chiplet B16 design replays 74 requests at 7 req/s
    (4.6 batches) where Little's law gave 14 and an estimated TPOT of 63 ms against 30 ms simulated."""
    from hydra_opt.evaluate.estimator.single import _overlap

    assert _overlap(4.0, math.inf) == 4.0
    assert _overlap(4.0, 4e6) == pytest.approx(4.0, rel=1e-6)
    assert _overlap(4.0, 4.0) == pytest.approx(8.0 / 3.0) == _overlap(4.0, 4.0 * (1 + 1e-12))  # continuous at n_b = r
    assert _overlap(1e6, 3.0) == pytest.approx(3.0, rel=1e-5)  # every batch beside every other
    for r, n in ((2.0, 5.0), (7.0, 3.0), (0.5, 0.2)):
        assert 0 < _overlap(r, n) <= min(r, n)


def test_a_short_static_run_decodes_at_most_the_batches_it_forms():
    from hydra_opt.evaluate.slo import CapacitySettings, CapacityStream

    d = DesignPoint(counts=(("tscs_d", 12), ("tscs_p", 2)), memory="hbm3", n_mem=10, d2d_bw_gbps=256.0,
                    max_batch=16, batching="static", scheduler="static")
    wl = load_workload(str(ROOT / "studies/workloads/quickstart-chat.yaml"))
    run = CapacityStream(wl, 0, CapacitySettings(requests=400, window_s=10)).at(7.0)
    e = estimate(d, load_model("llama-3-8b"), run, scenario=Scenario())
    assert e.diagnostics["decode_concurrency"] <= run.arrival_s.size / 16
    assert e.tpot_mean_s < 0.045  # simulated 0.030 s; 0.063 s with Little's law's 14 batches
