"""SLOs, goodput and the capacity search: closed forms (M/D/1, a single chiplet's service rate) and contracts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydra_opt.config import ConfigError, Node
from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.evaluate.simulator import run_system
from hydra_opt.evaluate.simulator.goodput import slo_metrics
from hydra_opt.evaluate.slo import Slo, capacity_search, mean_rate_per_s, scaled_requests, slo_from_node
from hydra_opt.workload.workload import Requests
from sim_synthetic import one_block_model, single_chiplet_system

D = 0.01  # deterministic service time of one request (one pass of one block), s


# -- the search routine on synthetic evaluators with a known capacity -------------------------------------------
@pytest.mark.parametrize("accelerate", [False, True])
@pytest.mark.parametrize("start", [0.3, 5.0, 37.0, 400.0])
def test_search_brackets_a_threshold_to_its_tolerance(start, accelerate):
    cap = 37.3
    res = capacity_search(lambda r: 1.0 if r <= cap else 0.5, start, 0.9, tolerance=0.02, max_runs=30,
                          accelerate=accelerate)
    assert res.converged
    assert cap / 1.02 <= res.capacity_req_s <= cap
    lo, hi = res.bracket_req_s
    assert lo <= cap < hi and hi / lo - 1 <= 0.02
    assert len(res.runs) == len({r for r, _ in res.runs})  # no rate evaluated twice


def test_search_finds_the_upper_edge_of_a_band_above_a_failing_start():
    # Static batching misses at low rates too (a batch waits to fill): attained only on [5, 37.3].
    res = capacity_search(lambda r: 1.0 if 5.0 <= r <= 37.3 else 0.0, 1.0, 0.9, tolerance=0.02, max_runs=30)
    assert 37.3 / 1.02 <= res.capacity_req_s <= 37.3


@pytest.mark.parametrize("start, cap, band", [(1.9, 20.4, False), (1.9, 20.4, True), (21.0, 2.0, False)])
def test_an_accelerated_search_reaches_a_far_start_within_a_small_budget(start, cap, band):
    # The product's simulated search starts at the estimate with steps of 1.25 and 6 runs: fixed steps reach only
    # 1.25**5 = 3.05x from the start (a lower bound, or nothing attained); growing steps bracket the capacity.
    def attained(r):
        return 1.0 if r <= cap else 0.0

    fixed = capacity_search(attained, start, 0.9, factor=1.25, max_runs=6, band=band)
    assert fixed.status in ("lower_bound", "none")
    res = capacity_search(attained, start, 0.9, factor=1.25, max_runs=6, band=band, accelerate=True)
    lo, hi = res.bracket_req_s
    assert 0 < lo <= cap < hi < math.inf and len(res.runs) <= 6
    assert res.status in ("converged", "max_runs")


def test_an_accelerated_search_brackets_a_close_start_as_fixed_steps_do():
    def attained(r):
        return 1.0 if r <= 10.0 else 0.0

    a, b = (capacity_search(attained, 9.0, 0.9, factor=1.25, max_runs=6, accelerate=x) for x in (False, True))
    assert a.runs == b.runs


def test_search_is_bounded_and_reports_no_capacity():
    res = capacity_search(lambda r: 0.0, 10.0, 0.9, max_runs=6)
    assert res.capacity_req_s == 0.0 and len(res.runs) <= 6 and not res.converged
    res = capacity_search(lambda r: 1.0, 10.0, 0.9, max_runs=5)
    assert len(res.runs) == 5 and not res.converged and math.isinf(res.bracket_req_s[1])


def test_scaled_requests_are_common_random_numbers():
    rng = np.random.default_rng(0)
    req = Requests(np.cumsum(rng.exponential(0.1, 50)), np.arange(1, 51), np.full(50, 3))
    s = scaled_requests(req, 25.0)
    assert mean_rate_per_s(s.arrival_s) == pytest.approx(25.0)
    gaps0, gaps1 = np.diff(req.arrival_s), np.diff(s.arrival_s)
    np.testing.assert_allclose(gaps1 / gaps0, gaps1[0] / gaps0[0])  # one factor stretches every gap
    np.testing.assert_array_equal(s.prompt_tokens, req.prompt_tokens)
    # A fixed arrival window keeps the requests arriving within it: twice the rate, about twice the requests.
    w1, w2 = scaled_requests(req, 10.0, window_s=2.0), scaled_requests(req, 20.0, window_s=2.0)
    assert w1.arrival_s[-1] - w1.arrival_s[0] <= 2.0 and w2.arrival_s[-1] - w2.arrival_s[0] <= 2.0
    assert 1.5 <= w2.arrival_s.size / w1.arrival_s.size <= 2.5
    np.testing.assert_array_equal(w2.prompt_tokens, req.prompt_tokens[: w2.arrival_s.size])  # a prefix: CRN


# -- attainment and goodput of one simulated run --------------------------------------------------------------------
def _run(arr, prompt, out, *, batching="continuous", max_batch=1, **opt):
    return run_system(single_chiplet_system(), one_block_model(service_s=D), np.asarray(arr, dtype=float),
                      np.asarray(prompt), np.asarray(out), scenario=Scenario(warmup_frac=0.0, max_batches=1, **opt),
                      batching=batching, max_batch=max_batch)


def test_attainment_and_goodput_of_a_hand_computed_run():
    # Static B=3: nothing starts before the third arrival at 1 s; TTFTs 1+D, 0.9+D, D; TPOT = D per token.
    res = _run([0, 0.1, 1.0], [1, 1, 1], [2, 2, 2], batching="static", max_batch=3)
    m = slo_metrics(res, Slo(ttft_s=0.95, tpot_s=1.0))
    assert m["slo_attainment"] == pytest.approx(2 / 3) and m["slo_measured_requests"] == 3
    # Every request has the same output length, so the SLO-meeting share of the throughput is 2/3.
    assert m["goodput_tok_s"] == pytest.approx(res.throughput_tok_s * 2 / 3)
    assert slo_metrics(res, Slo(ttft_s=2.0, tpot_s=D / 2))["slo_attainment"] == 0.0  # TPOT D > D/2
    full = slo_metrics(res, Slo(ttft_s=2.0, tpot_s=1.0))
    assert full["slo_attainment"] == 1.0 and full["goodput_tok_s"] == pytest.approx(res.throughput_tok_s)


def test_an_unserved_request_misses_the_slo():
    # The horizon cuts the run before the last request's first token: it counts as a miss, not as absent.
    res = _run([0.0, 0.0, 0.0], [1, 1, 1], [1, 1, 1], horizon_s=2.5 * D)
    m = slo_metrics(res, Slo(ttft_s=1.0, tpot_s=1.0))
    assert m["slo_measured_requests"] == 3 and m["slo_attainment"] == pytest.approx(2 / 3)


# -- closed forms: M/D/1 and a single chiplet's service rate -----------------------------------------------------
def _md1_wait_cdf(t: float, lam: float, d: float) -> float:
    """Erlang's M/D/1 waiting-time distribution P(W ≤ t) (FIFO, service d, Poisson λ)."""
    rho = lam * d
    if rho >= 1:
        return 0.0
    s = sum((lam * (k * d - t)) ** k / math.factorial(k) * math.exp(-lam * (k * d - t)) for k in range(int(t // d) + 1))
    return (1.0 - rho) * s


def _md1_capacity(slo_ttft: float, target: float, d: float) -> float:
    lo, hi = 1e-6, (1 - 1e-9) / d
    for _ in range(100):  # the attainment falls with λ: bisection
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _md1_wait_cdf(slo_ttft - d, mid, d) >= target else (lo, mid)
    return lo


def _sim_capacity(n: int, slo: Slo, seed: int = 1, window_s: float | None = None) -> tuple[float, object]:
    rng = np.random.default_rng(seed)
    base = Requests(np.cumsum(rng.exponential(1.0, n)), np.ones(n, dtype=np.int64), np.ones(n, dtype=np.int64))

    def attainment(rate: float) -> float:
        s = scaled_requests(base, rate, window_s=window_s)
        res = run_system(single_chiplet_system(), one_block_model(service_s=D), s.arrival_s, s.prompt_tokens,
                         s.output_tokens, scenario=Scenario(max_batches=1), batching="continuous", max_batch=1)
        return slo_metrics(res, slo)["slo_attainment"]

    res = capacity_search(attainment, 10.0, slo.attainment, tolerance=0.01, max_runs=20)
    return res.capacity_req_s, res


def test_capacity_of_an_md1_queue_at_its_slo_quantile():
    # One request = one pass of D on one chiplet, one at a time: an M/D/1 queue; TTFT = wait + D. The capacity is
    # the λ at which P(W ≤ ttft_s − D) = 0.9 by Erlang's formula (ρ ≈ 0.69 for ttft_s = 5D).
    slo = Slo(ttft_s=5 * D, tpot_s=1.0, attainment=0.9)
    want = _md1_capacity(slo.ttft_s, 0.9, D)
    got, res = _sim_capacity(4000, slo)
    assert res.converged
    assert got == pytest.approx(want, rel=0.05), (got, want)


@pytest.mark.parametrize("n", [3000, 12000])
def test_single_chiplet_capacity_is_its_service_rate_plus_the_finite_run_backlog(n):
    # With a TTFT bound s far above the service time the only limit is the service rate μ = 1/D — up to what a
    # finite run hides: above μ the backlog grows, and a request arriving at fraction f of the run waits
    # f·n·D·(1 − μ/λ). The measured requests are those after the 10 % warm-up, so 90 % of them meet s when the
    # request at f = 0.91 does: λ/μ = 1 / (1 − s / (0.91·n·D)), which tends to 1 as the run grows (1.123 at
    # n = 3000, 1.028 at n = 12000, for s = 300 D).
    slo = Slo(ttft_s=300 * D, tpot_s=1.0, attainment=0.9)
    got, _ = _sim_capacity(n, slo, seed=2)
    want = 1.0 / (1.0 - slo.ttft_s / (0.91 * n * D)) / D
    assert got == pytest.approx(want, rel=0.02), (got * D, want * D)


def test_a_fixed_arrival_window_bounds_the_hidden_overload():
    # Runs of fixed arrival duration T: above μ the wait grows as t·(λ/μ − 1), so 90 % of the measured requests
    # meet s when λ/μ = 1 + s / (0.91·T) (1.11 for s = 3 s, T = 30 s), whatever the stream's length.
    slo = Slo(ttft_s=300 * D, tpot_s=1.0, attainment=0.9)
    got, _ = _sim_capacity(6000, slo, seed=3, window_s=30.0)
    assert got * D == pytest.approx(1.0 + slo.ttft_s / (0.91 * 30.0), rel=0.02)


# -- configuration ----------------------------------------------------------------------------------------------------
def test_slo_from_yaml_node_and_its_errors():
    assert slo_from_node(Node({"ttft_s": 0.5}, file="f.yaml", key="slo")) == Slo(ttft_s=0.5)
    with pytest.raises(ConfigError, match=r"f\.yaml: slo\.tpot_s"):
        slo_from_node(Node({"tpot_s": -1}, file="f.yaml", key="slo"))
    with pytest.raises(ConfigError, match=r"slo\.attainment"):
        slo_from_node(Node({"attainment": 1.5}, file="f.yaml", key="slo"))
    with pytest.raises(ConfigError, match=r"slo\.ttft: is not a known key"):
        slo_from_node(Node({"ttft": 1}, file="f.yaml", key="slo"))


@pytest.mark.parametrize("start", [8.0, 1.0, 40.0])
def test_a_band_narrower_than_a_step_is_found_between_the_best_attainment_and_its_neighbours(start):
    # Static batching on the quickstart's 12 + 2 chiplet B16 design (estimated): attainment climbs as batches form
    # faster (0.57 at 1.5 req/s, 0.86 at 3.2) and is lost to overload above 5.5; attained only on [3.9, 5.5], narrower
    # than the search's steps of ~x2.2, which went on to 0.006 and 7,922 req/s and found no capacity.
    def attained(r: float) -> float:
        return 0.0 if r > 5.5 else max(0.0, 0.96 - 0.35 * abs(math.log(r / 5.0)))

    res = capacity_search(attained, start, 0.9, tolerance=0.05, max_runs=30)
    assert res.converged and 5.5 / 1.05 <= res.capacity_req_s <= 5.5
    assert len(res.runs) <= 12
    # On no-band searches (continuous/chunked) a miss still only descends.
    assert capacity_search(attained, 8.0, 0.9, tolerance=0.05, max_runs=30, band=False).capacity_req_s <= 5.5


@settings(max_examples=200, deadline=None, database=None)
@given(peak=st.floats(0.1, 1000.0), edge=st.floats(1.0, 1.3), slope=st.floats(0.05, 0.5),
       start=st.floats(0.01, 100.0), tol=st.sampled_from([0.02, 0.05]))
def test_static_batchings_band_is_found_from_any_start_within_reach(peak, edge, slope, start, tol):
    """Attainment climbs towards a peak as batches form faster, stays up to the overload edge and falls to 0 above
    it: from any start within 100x, the search reports the edge — also when the band is narrower than its steps."""
    top = peak * edge

    def attained(r: float) -> float:
        return 0.0 if r > top else (0.96 if r >= peak else max(0.0, 0.96 - slope * math.log(peak / r)))

    res = capacity_search(attained, peak * start, 0.9, tolerance=tol, max_runs=40)
    assert res.converged, res.runs
    assert top / (1 + tol) <= res.capacity_req_s * (1 + 1e-9) and res.capacity_req_s <= top * (1 + 1e-9)
