"""Objectives: metric registry, multi-workload aggregation (HYDRA §VI-C), constraints, YAML validation; and the
exhaustive mode's tables and recovery metrics on a closed-form evaluator."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hydra_opt.config import ConfigError, Node
from hydra_opt.evaluate.objectives import METRICS, aggregate, load_objectives, parse_objectives

ROOT = Path(__file__).resolve().parents[1]


def _parse(doc: dict):
    return parse_objectives(Node(doc, file="o.yaml"))


def test_shipped_objective_files_load() -> None:
    for f in sorted((ROOT / "objectives").glob("*.yaml")):
        spec = load_objectives(f)
        assert spec.metric_names and len(spec.directions) == len(spec.metrics)
    spec = load_objectives(ROOT / "objectives" / "throughput_ttft.yaml")
    assert spec.directions == ["maximize", "minimize"]
    assert spec.metric_names == ["throughput [tok/s]", "TTFT [s]"]


def test_geomean_is_invariant_to_per_workload_normalisation() -> None:
    # Table IV normalises each workload to its own optimum; the geometric mean ranks designs identically with or
    # without those constants, so no optimum needs to be known in advance.
    a = {"m1/chat": {"throughput_tok_s": 100.0, "ttft_mean_s": 1.0}, "m2/chat": {"throughput_tok_s": 10.0, "ttft_mean_s": 4.0}}
    b = {"m1/chat": {"throughput_tok_s": 60.0, "ttft_mean_s": 2.0}, "m2/chat": {"throughput_tok_s": 20.0, "ttft_mean_s": 1.0}}
    spec = _parse({"objectives": ["throughput_tok_s", "ttft_s"], "aggregate": "geomean"})
    ra, rb = spec.combine(a), spec.combine(b)
    assert ra["throughput_tok_s"] == pytest.approx(math.sqrt(100 * 10))
    assert rb["ttft_s"] == pytest.approx(math.sqrt(2 * 1))
    ref = {"m1/chat": {"throughput_tok_s": 100.0}, "m2/chat": {"throughput_tok_s": 20.0}}
    norm = _parse({"objectives": ["throughput_tok_s"], "aggregate": "geomean", "reference": ref})
    ratio_raw = ra["throughput_tok_s"] / rb["throughput_tok_s"]
    ratio_norm = norm.combine(a)["throughput_tok_s"] / norm.combine(b)["throughput_tok_s"]
    assert ratio_raw == pytest.approx(ratio_norm)


def test_worst_case_uses_references() -> None:
    per = {"x/w": {"throughput_tok_s": 50.0}, "y/w": {"throughput_tok_s": 90.0}}
    spec = _parse({"objectives": ["throughput_tok_s"], "aggregate": "worst",
                   "reference": {"x/w": {"throughput_tok_s": 100.0}, "y/w": {"throughput_tok_s": 100.0}}})
    assert spec.combine(per)["throughput_tok_s"] == pytest.approx(0.5)
    assert aggregate([1.0, 3.0], [1, 1], "worst", "minimize") == 3.0
    assert aggregate([1.0, 3.0], [1, 3], "mean", "maximize") == pytest.approx(2.5)


def test_constraint_violation_sign() -> None:
    spec = _parse({"objectives": ["throughput_tok_s", "ttft_s"], "constraints": [{"metric": "ttft_s", "max": 2.0},
                                                                                 {"metric": "throughput_tok_s", "min": 100}]})
    assert spec.constraint_values({"ttft_s": 1.0, "throughput_tok_s": 150.0}) == [pytest.approx(-0.5), pytest.approx(-0.5)]
    assert spec.constraint_values({"ttft_s": 3.0, "throughput_tok_s": 50.0}) == [pytest.approx(0.5), pytest.approx(0.5)]


def test_tp_per_ttft_metric() -> None:
    assert METRICS["tp_per_ttft"].read({"throughput_tok_s": 300.0, "ttft_mean_s": 1.5}) == pytest.approx(200.0)


@pytest.mark.parametrize(
    "doc,key",
    [
        ({"objectives": ["speed"]}, "objectives[0]"),
        ({"objectives": [{"metric": "ttft_s", "direction": "maximize"}]}, "objectives[0].direction"),
        ({"objectives": ["ttft_s", "ttft_s"]}, "objectives"),
        ({"objectives": ["ttft_s"], "aggregate": "median"}, "aggregate"),
        ({"objectives": ["ttft_s"], "constraints": [{"metric": "ttft_s"}]}, "constraints[0]"),
        ({"objectives": ["ttft_s"], "extra": 1}, "extra"),
        ({"objectives": []}, "objectives"),
        ({"objectives": ["capacity_req_s"], "slo": {"ttft_s": 0}}, "slo.ttft_s"),
        ({"objectives": ["capacity_req_s"], "slo": {"attainment": 2}}, "slo.attainment"),
        ({"objectives": ["capacity_req_s"], "slo": {"p90": 1}}, "slo.p90"),
        ({"objectives": ["capacity_req_s"], "capacity": {"max_runs": 1}}, "capacity.max_runs"),
        ({"objectives": ["capacity_req_s"], "capacity": {"window": 10}}, "capacity.window"),
        ({"objectives": ["capacity_req_s"], "capacity": {"min_requests": 1}}, "capacity.min_requests"),
        ({"objectives": ["capacity_req_s"], "capacity": {"min_requests": "many"}}, "capacity.min_requests"),
    ],
)
def test_objective_errors_are_located(doc: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        _parse(doc)
    assert info.value.key == key and info.value.file == "o.yaml"


def test_exhaustive_tables_and_recovery() -> None:
    from dse_fakes import FakeEvaluator, closed_form

    from hydra_opt.dse.exhaustive import recovery, run_exhaustive
    from hydra_opt.dse.search_space import parse_search_space

    space = parse_search_space(Node({
        "name": "t", "slots": 10, "chiplets": {"tscs_p": {"min": 1, "max": 8}, "tscs_d": {"min": 1, "max": 8}},
        "memory": {"count": {"min": 2, "max": 5}}, "max_batch": [4, 16]}, file="t.yaml"))
    designs = list(space.enumerate())
    spec = _parse({"objectives": ["throughput_tok_s", "ttft_s"]})
    res = run_exhaustive(designs, [("m", "w")], spec, FakeEvaluator(), simulate="all")
    assert len(designs) == space.size()
    assert list(res.feasible) == [d["n_mem"] >= 3 for d in designs]
    i = int(np.flatnonzero(res.feasible)[0])
    assert res.est["throughput_tok_s"][i] == pytest.approx(closed_form(designs[i])[0])
    assert np.isnan(res.sim["ttft_s"][~res.feasible]).all()
    ref = np.column_stack([res.sim["throughput_tok_s"], res.sim["ttft_s"]])[res.feasible]
    full = recovery(ref, ref, [True, False])
    assert full["best_ratio"] == pytest.approx(1.0) and full["hv_ratio"] == pytest.approx(1.0)
    worse = recovery(ref, ref[ref[:, 0] < np.median(ref[:, 0])], [True, False])
    assert worse["best_ratio"] < 1.0 and worse["hv_ratio"] < 1.0
    sample = run_exhaustive(designs, [("m", "w")], spec, FakeEvaluator(), simulate=5, seed=1)
    assert int(np.isfinite(sample.sim["throughput_tok_s"]).sum()) == 5
    assert len(res.frame()) == len(designs)
    # Screening simulates the estimated front first (HYDRA §VI-B).
    k = 4
    scr = run_exhaustive(designs, [("m", "w")], spec, FakeEvaluator(), simulate=f"front:{k}")
    picked = np.flatnonzero(np.isfinite(scr.sim["throughput_tok_s"]))
    est = np.column_stack([scr.est["throughput_tok_s"], scr.est["ttft_s"]])
    from hydra_opt.evaluate.front import pareto_mask

    feas = np.flatnonzero(scr.feasible)
    front = set(feas[pareto_mask(est[feas], [True, False])])
    assert len(picked) == k and (set(picked) <= front or front <= set(picked))


def test_exhaustive_sweep_resumes_from_its_storage(tmp_path) -> None:
    """An interrupted exhaustive sweep resumes from its Optuna storage: same table, only the designs not simulated
    before are simulated; a sweep of another setup (another simulation seed) is a study of its own."""
    from dse_fakes import FakeEvaluator

    from hydra_opt.dse.exhaustive import run_exhaustive
    from hydra_opt.dse.search_space import parse_search_space

    space = parse_search_space(Node({
        "name": "t", "slots": 10, "chiplets": {"tscs_p": {"min": 1, "max": 8}, "tscs_d": {"min": 1, "max": 8}},
        "memory": {"count": {"min": 3, "max": 4}}, "max_batch": [4, 16]}, file="t.yaml"))
    designs = list(space.enumerate())
    spec = _parse({"objectives": ["throughput_tok_s", "ttft_s"]})
    full = run_exhaustive(designs, [("m", "w")], spec, FakeEvaluator(), simulate="all")
    n_feas = int(full.feasible.sum())

    class Interrupted(FakeEvaluator):
        def simulate(self, *a, **k):
            if self.n_simulated == 7:
                raise KeyboardInterrupt
            return super().simulate(*a, **k)

    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    with pytest.raises(KeyboardInterrupt):
        run_exhaustive(designs, [("m", "w")], spec, Interrupted(), simulate="all", storage=url)
    ev = FakeEvaluator()
    res = run_exhaustive(designs, [("m", "w")], spec, ev, simulate="all", storage=url)
    assert ev.n_simulated == n_feas - 7
    for m in full.sim:
        np.testing.assert_array_equal(res.sim[m], full.sim[m])
    ev_again = FakeEvaluator()
    run_exhaustive(designs, [("m", "w")], spec, ev_again, simulate="all", storage=url)
    assert ev_again.n_simulated == 0  # complete: nothing left to simulate
    ev2 = FakeEvaluator()
    run_exhaustive(designs, [("m", "w")], spec, ev2, simulate="all", storage=url, sim_seed=1)
    assert ev2.n_simulated == n_feas


def test_slo_and_capacity_settings_parse_and_mark_the_expensive_metric() -> None:
    from hydra_opt.evaluate.slo import Slo

    spec = _parse({"objectives": ["capacity_req_s", "ttft_p90_s"], "slo": {"ttft_s": 1.5},
                   "capacity": {"requests": 500, "window_s": 20, "max_runs": 7}})
    assert spec.slo == Slo(ttft_s=1.5) and spec.needs_capacity
    assert (spec.capacity.requests, spec.capacity.window_s, spec.capacity.max_runs) == (500, 20.0, 7)
    cheap = _parse({"objectives": ["goodput_tok_s"], "constraints": [{"metric": "slo_attainment", "min": 0.9}]})
    assert not cheap.needs_capacity and cheap.slo == Slo()
    assert METRICS["capacity_req_s"].direction == "maximize" and METRICS["capacity_req_s"].unit == "req/s"
