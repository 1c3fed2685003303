"""Capacity search robustness (issue 15 item 1): a short workload's stream is extended to fill each run's window,
an unbracketed search is reported as a lower bound, and the CLI, the objective YAML and both evaluators read one
set of capacity settings (``hydra_opt.evaluate.slo.CapacitySettings``)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hydra_opt.config import ConfigError, Node
from hydra_opt.evaluate.slo import (DEFAULT_CAPACITY, CapacitySettings, CapacityStream, capacity_search, coarse_grid,
                                    mean_rate_per_s)
from hydra_opt.workload.workload import Requests, load_workload

ROOT = Path(__file__).resolve().parents[1]
CHAT32 = ROOT / "studies" / "workloads" / "quickstart-chat.yaml"  # 32 requests, Poisson 8 req/s


def test_a_short_workload_is_extended_to_fill_the_window_at_every_rate():
    # The lead's case: 32 requests hid every overload (attained up to 6,998 req/s). Each run must now hold about
    # rate x window requests and span the window, whatever the rate.
    wl = load_workload(str(CHAT32))
    s = CapacityStream(wl, 0, CapacitySettings(requests=100, window_s=10.0))
    first = dataclasses.replace(wl, n_requests=100).requests(0)
    runs = [s.at(8.0 * 2**k) for k in range(7)]  # 8 ... 512 req/s
    for k, r in enumerate(runs):
        rate = 8.0 * 2**k
        assert r.arrival_s[-1] - r.arrival_s[0] >= 0.95 * 10.0, rate
        assert 0.7 <= r.arrival_s.size / (rate * 10.0) <= 1.3, (rate, r.arrival_s.size)  # rate = nominal
    # The first chunk is the workload's own draw of `requests` requests, and each run is a prefix of the next
    # (common random numbers: extending the stream never changes what an earlier rate replayed).
    np.testing.assert_array_equal(s.requests.prompt_tokens[:100], np.maximum(first.prompt_tokens, 1))
    for a, b in zip(runs, runs[1:]):
        np.testing.assert_array_equal(b.prompt_tokens[: a.prompt_tokens.size], a.prompt_tokens)
    # Rates are relative to the first chunk's mean rate (6.75 req/s for these 100 draws of Poisson 8 req/s): the
    # extension chunks keep the generator's 8 req/s, so a long run is denser by that sampling error (8/6.75).
    assert mean_rate_per_s(runs[6].arrival_s) == pytest.approx(512.0 * 8.0 / s.rate0_req_s, rel=0.05)
    assert math.isinf(s.max_rate_req_s(512.0))  # a generator can always grow (up to MAX_STREAM_REQUESTS)


def test_min_requests_stretch_the_window_only_at_rates_too_low_to_fill_it():
    # A 10 s window at 0.5 req/s holds ~5 requests: 90 % attainment would be decided by the first miss. With
    # min_requests = 40 the run replays the first 40 arrivals (same requests: a prefix, common random numbers);
    # at 16 req/s the window already holds ~160 and nothing changes.
    wl = load_workload(str(CHAT32))
    few, many = (CapacityStream(wl, 0, CapacitySettings(requests=100, window_s=10.0, min_requests=m))
                 for m in (None, 40))
    a, b = few.at(0.5), many.at(0.5)
    assert a.arrival_s.size < 10 and b.arrival_s.size == 40
    np.testing.assert_array_equal(b.arrival_s[: a.arrival_s.size], a.arrival_s)
    assert b.arrival_s[-1] - b.arrival_s[0] > 10.0 and "min40" in b.name and "min" not in a.name.split("/")[-1]
    hi_a, hi_b = few.at(16.0), many.at(16.0)
    np.testing.assert_array_equal(hi_a.arrival_s, hi_b.arrival_s)
    assert hi_a.name == hi_b.name
    # A base stream shorter than min_requests grows to it (a generator) ...
    small = CapacityStream(wl, 0, CapacitySettings(requests=20, window_s=10.0, min_requests=60))
    assert small.at(0.5).arrival_s.size == 60
    # ... and a fixed list gives what it has.
    req = Requests(np.arange(12, dtype=float), np.ones(12, dtype=np.int64), np.ones(12, dtype=np.int64))
    assert CapacityStream(req, 0, CapacitySettings(window_s=2.0, min_requests=50)).at(0.1).arrival_s.size == 12


def test_a_stream_that_cannot_grow_caps_the_search_and_the_capacity_is_a_lower_bound():
    # A fixed request list (like a timed trace) of 32 requests at ~8 req/s fills a 30 s window only up to ~8 req/s.
    rng = np.random.default_rng(0)
    req = Requests(np.cumsum(rng.exponential(0.125, 32)), np.ones(32, dtype=np.int64), np.ones(32, dtype=np.int64))
    s = CapacityStream(req, 0, CapacitySettings(window_s=30.0))
    ceiling = s.max_rate_req_s(1e6)
    assert ceiling == pytest.approx(s.rate0_req_s * (req.arrival_s[-1] - req.arrival_s[0]) / 30.0)
    res = capacity_search(lambda r: 1.0, s.rate0_req_s, 0.9, max_rate_req_s=s.max_rate_req_s)
    assert max(r for r, _ in res.runs) <= ceiling * (1 + 1e-12)
    assert res.status == "lower_bound" and res.lower_bound and not res.converged
    assert res.capacity_req_s == pytest.approx(ceiling) and "window only up to" in res.note
    d = res.to_dict()
    assert d["capacity_lower_bound"] is True and d["capacity_bracket_req_s"][1] is None


def test_an_unbracketed_search_is_flagged_not_reported_as_measured():
    res = capacity_search(lambda r: 1.0, 8.0, 0.9, max_runs=11)  # attained at every rate: 9.19 ... ~5,000 req/s
    # (the start snapped to the coarse grid of 1.02**16, steps of 2 rounded to it: 1.02**32 = 1.885 each)
    assert res.runs[0][0] == pytest.approx(1.02 ** 112) and res.status == "lower_bound"
    assert res.capacity_req_s == pytest.approx(1.02 ** (112 + 320))
    assert "at least" in res.note
    ok = capacity_search(lambda r: 1.0 if r <= 30.0 else 0.0, 8.0, 0.9, max_runs=30)
    assert ok.status == "converged" and not ok.lower_bound and ok.note == ""
    none = capacity_search(lambda r: 0.0, 8.0, 0.9, max_runs=6)
    assert none.status == "none" and none.capacity_req_s == 0.0
    short = capacity_search(lambda r: 1.0 if r <= 30.0 else 0.0, 8.0, 0.9, max_runs=4)
    assert short.status == "max_runs" and not short.lower_bound


def test_without_a_batch_formation_band_a_miss_only_descends():
    # Continuous/chunked batching: attainment falls with the rate, so a miss at the start is overload; probing
    # higher rates (static batching's batch-formation band) only wastes runs.
    res = capacity_search(lambda r: 1.0 if r <= 1.0 else 0.0, 8.0, 0.9, band=False, max_runs=12)
    assert max(r for r, _ in res.runs) == res.runs[0][0] == pytest.approx(1.02 ** 112) and res.converged
    banded = capacity_search(lambda r: 1.0 if r <= 1.0 else 0.0, 8.0, 0.9, max_runs=12)
    assert max(r for r, _ in banded.runs) > 8.0  # the static-batching search does probe upwards


@settings(max_examples=200, deadline=None, database=None)
@given(cap=st.floats(0.05, 2000.0), starts=st.lists(st.floats(0.01, 5000.0), min_size=2, max_size=2),
       factor=st.sampled_from([1.25, 2.0]), accelerate=st.booleans(), band=st.booleans(),
       tol=st.sampled_from([0.02, 0.05, 0.2]))
def test_capacity_does_not_depend_on_where_the_search_starts(cap, starts, factor, accelerate, band, tol):
    """Where attainment falls with the rate, every converged search reports the same capacity — the largest
    lattice rate ``(1 + tol)**k`` at or below the true one — from any start (a study starts at the estimator's
    capacity, ``simulate --capacity`` at the workload's rate; plain geometric midpoints differed within the
    tolerance)."""
    got = []
    for start in starts:
        res = capacity_search(lambda r: 1.0 if r <= cap else 0.0, start, 0.9, tolerance=tol, factor=factor,
                              accelerate=accelerate, band=band, max_runs=40, max_steps=40)
        assume(res.converged)
        lo, hi = res.bracket_req_s
        assert lo <= cap < hi and hi / lo - 1.0 <= tol * (1 + 1e-9)
        got.append(res.capacity_req_s)
    assert got[0] == got[1]


@settings(max_examples=200, deadline=None, database=None)
@given(k_cap=st.integers(-150, 380), starts=st.lists(st.floats(0.01, 5000.0), min_size=2, max_size=2),
       noise=st.integers(0, 2**31), factor=st.sampled_from([1.25, 2.0]), accelerate=st.booleans(),
       tol=st.sampled_from([0.02, 0.05, 0.2]))
def test_capacity_does_not_depend_on_the_start_when_attainment_is_noisy_between_coarse_rates(
        k_cap, starts, noise, factor, accelerate, tol):
    """A simulated attainment is not monotone from one lattice rate to the next near the capacity (0.854 at
    11.20 req/s, 0.978 at 11.42 on a Llama-3-8B design): attained at lattice rate ``k`` at random off the coarse grid,
    monotone on it. Every converged search still reports the same capacity from any start (fails with plain lattice
    midpoints: each start then meets the noise at other rates)."""
    lg, grid = math.log1p(tol), coarse_grid(tol)

    def attained(r: float) -> float:
        k = round(math.log(r) / lg)
        if k % grid == 0:
            return 1.0 if k <= k_cap else 0.0
        return float(np.random.default_rng([noise, k + 10_000]).random() < 0.5)

    got = []
    for start in starts:
        res = capacity_search(attained, start, 0.9, tolerance=tol, factor=factor, accelerate=accelerate, band=False,
                              max_runs=40, max_steps=40)
        assume(res.converged)
        fine = grid.bit_length() - 1  # the last log2(M) runs halve the final coarse cell
        got.append((res.capacity_req_s, res.runs[len(res.runs) - fine:]))
    assert got[0] == got[1]


def test_cli_objective_and_evaluators_share_one_definition_of_the_capacity_settings():
    from hydra_opt.cli.simulate_cmd import add_slo_args, capacity_settings
    from hydra_opt.evaluate.objectives import parse_objectives

    p = argparse.ArgumentParser()
    add_slo_args(p)
    assert capacity_settings(p.parse_args([])) == DEFAULT_CAPACITY
    spec = parse_objectives(Node({"objectives": ["capacity_req_s"], "capacity": {}}, file="o.yaml"))
    assert spec.capacity == DEFAULT_CAPACITY
    assert (DEFAULT_CAPACITY.requests, DEFAULT_CAPACITY.window_s) == (1000, 30.0)  # objectives/capacity_slo.yaml's
    got = capacity_settings(p.parse_args(["--capacity-requests", "200", "--capacity-window", "5",
                                          "--capacity-max-runs", "4", "--capacity-tolerance", "0.1",
                                          "--capacity-min-requests", "30"]))
    assert got == CapacitySettings(tolerance=0.1, max_runs=4, requests=200, window_s=5.0, min_requests=30)
    for flags, name in ((["--capacity-requests", "1"], "--capacity-requests"),
                        (["--capacity-min-requests", "1"], "--capacity-min-requests"),
                        (["--capacity-max-runs", "1"], "--capacity-max-runs"),
                        (["--capacity-window", "0"], "--capacity-window"),
                        (["--capacity-tolerance", "2"], "--capacity-tolerance")):
        with pytest.raises(ConfigError, match=name):
            capacity_settings(p.parse_args(flags))


DESIGN = """kind: design
chiplets: {tscs_p: 6, tscs_d: 10}
memory: hbm3
n_mem: 8
d2d_bw_gbps: 512
max_batch: 16
placement: cp
batching: continuous
scheduler: elastic
package: {grid_w: 6, grid_h: 4, slot_area_mm2: 144}
"""


def test_simulate_cli_capacity_of_a_32_request_workload_is_not_a_burst(tmp_path):
    # Before: 6,998 req/s after 11 ever-doubling runs of the same 32 requests. With the stream extended each run
    # holds ~rate x window requests and the search finds a rate that misses the SLO (measured 25.5 req/s with the
    # default 30 s window; a 10 s window keeps the test cheap and lets an overload of up to 5/(0.91*10) = 55 % pass).
    d = tmp_path / "d.yaml"
    d.write_text(DESIGN)
    out = subprocess.run([sys.executable, "-m", "hydra_opt", "simulate", "--design", str(d), "--model", "llama-3-8b",
                          "--workload", str(CHAT32), "--json", "--capacity", "--capacity-window", "10",
                          "--capacity-requests", "200", "--capacity-max-runs", "5", "--capacity-tolerance", "0.5",
                          "--slo-ttft", "5", "--slo-tpot", "0.05"], capture_output=True, text=True, cwd=ROOT,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert len(r["capacity_runs"]) <= 5 and r["capacity_req_s"] < 60
    assert any(x["attainment"] < 0.9 for x in r["capacity_runs"])  # an overload was seen
    assert r["capacity_lower_bound"] is False and r["capacity_status"] in ("converged", "max_runs")


def test_simulate_cli_says_when_the_capacity_is_only_a_lower_bound(tmp_path):
    # Two runs, both attained: no upper end, so the human output marks the capacity ">=" and says why.
    d = tmp_path / "d.yaml"
    d.write_text(DESIGN)
    out = subprocess.run([sys.executable, "-m", "hydra_opt", "simulate", "--design", str(d), "--model", "llama-3-8b",
                          "--workload", str(CHAT32), "--capacity", "--capacity-window", "3", "--capacity-max-runs",
                          "2", "--slo-ttft", "5", "--slo-tpot", "0.05"], capture_output=True, text=True, cwd=ROOT,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert "SLO capacity      >= " in out.stdout and "LOWER BOUND: attained at every rate tried" in out.stdout


def test_cli_refuses_a_bad_capacity_flag_with_one_line():
    out = subprocess.run([sys.executable, "-m", "hydra_opt", "estimate", "--design", "x.yaml", "--model",
                          "llama-3-8b", "--workload", str(CHAT32), "--capacity", "--capacity-requests", "1"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2 and "--capacity-requests" in out.stderr and "Traceback" not in out.stderr


def test_the_printed_bracket_keeps_its_two_ends_apart_at_any_tolerance():
    from hydra_opt.cli.simulate_cmd import _slo_lines

    def line(lo: float, hi: float, tol: float) -> str:
        extra = {"slo": {"ttft_s": 5.0, "tpot_s": 0.05, "attainment": 0.9}, "slo_attainment": 1.0,
                 "goodput_tok_s": 1.0, "capacity_req_s": lo, "capacity_bracket_req_s": [lo, hi],
                 "capacity_runs": [{}] * 22, "capacity_lower_bound": False, "capacity_tolerance": tol,
                 "capacity_note": "", "capacity_status": "converged"}
        return _slo_lines(extra).splitlines()[1]

    assert "bracket 10.77-10.98 req/s" in line(10.77, 10.98, 0.02)  # the default's 4 digits
    lo = 12.4558172
    ends = line(lo, lo * (1 + 1e-6), 1e-6).split("bracket ")[1].split(" req/s")[0].split("-")
    assert ends[0] != ends[1]
