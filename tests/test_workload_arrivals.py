"""Arrival processes and Workload: rates/CVs, fixed interval, trace time scaling, truncation, determinism, YAML."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from hydra_opt.config import ConfigError
from hydra_opt.workload.arrivals import FixedArrival, GammaArrival, PoissonArrival, TraceArrival
from hydra_opt.workload.profiles import load_profile
from hydra_opt.workload.traces import load_trace
from hydra_opt.workload.workload import TraceLengths, Workload, list_workloads, load_workload, truncate


def test_poisson_rate_and_cv() -> None:
    t = PoissonArrival(4.0).times(40_000, np.random.default_rng(0))
    gaps = np.diff(np.concatenate([[0.0], t]))
    # mean gap 0.25 s; standard error 0.25/sqrt(40000) = 0.00125 -> 4 sigma
    assert abs(gaps.mean() - 0.25) < 0.005
    assert abs(gaps.std() / gaps.mean() - 1.0) < 0.03
    assert np.all(np.diff(t) >= 0)


@pytest.mark.parametrize("cv", [0.5, 2.0])
def test_gamma_rate_and_cv(cv: float) -> None:
    t = GammaArrival(10.0, cv).times(40_000, np.random.default_rng(1))
    gaps = np.diff(np.concatenate([[0.0], t]))
    assert abs(gaps.mean() - 0.1) < 0.1 * 4 * cv / np.sqrt(40_000) + 1e-4
    assert abs(gaps.std() / gaps.mean() - cv) < 0.06 * cv


def test_fixed_interval_is_hydra_10ms() -> None:
    t = FixedArrival(0.01).times(5000, np.random.default_rng(0))
    assert t[0] == 0.0 and t[-1] == pytest.approx(49.99) and np.allclose(np.diff(t), 0.01)
    assert FixedArrival(0.01).times(None, np.random.default_rng(0), horizon_s=1.0).size == 100


def test_horizon_cuts_arrivals() -> None:
    t = PoissonArrival(50.0).times(None, np.random.default_rng(2), horizon_s=200.0)
    assert t.max() < 200.0 and abs(t.size - 10_000) < 5 * np.sqrt(10_000)


def test_workload_deterministic_and_sorted() -> None:
    w = load_workload("azure-conv")
    a, b, c = w.requests(), w.requests(), w.requests(seed=1)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.prompt_tokens, b.prompt_tokens)
    assert not np.array_equal(a.prompt_tokens, c.prompt_tokens)
    assert np.all(np.diff(a.arrival_s) >= 0)
    assert a.prompt_tokens.dtype == np.int64 and a.output_tokens.dtype == np.int64
    assert a.prompt_tokens.min() >= 1 and a.output_tokens.min() >= 1


def test_every_shipped_workload_loads_and_samples() -> None:
    names = list_workloads()
    assert {
        "arxiv",
        "bwb",
        "chat",
        "longwriter",
        "sharegpt",
        "azure-conv",
        "azure-code",
        "mooncake-conv",
        "hydra-arxiv",
        "hydra-bwb",
        "hydra-chat",
        "hydra-longwriter",
    } <= set(names)
    for name in names:
        r = load_workload(name).requests()
        assert len(r) > 0 and r.prompt_tokens.min() >= 1 and r.output_tokens.min() >= 1


def test_hydra_preset() -> None:
    w = load_workload("hydra-longwriter")
    r = w.requests()
    assert len(r) == 5000 and r.arrival_s[1] == pytest.approx(0.01)
    assert r.total_tokens.max() <= 128_000


def test_truncation_rules() -> None:
    p, o = truncate(np.array([0, 10, 127_990, 200_000]), np.array([0, 5, 50, 10]), 128_000)
    assert p.tolist() == [1, 10, 127_990, 127_999]
    assert o.tolist() == [1, 5, 10, 1]
    assert np.all(p + o <= 128_000)


def test_trace_replay_and_time_scaling(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    rows = [(0, 10, 3), (1000, 20, 4), (1500, 30, 5), (4000, 40, 6)]
    f.write_text("".join(f'{{"timestamp": {t}, "input_length": {i}, "output_length": {o}}}\n' for t, i, o in rows))
    tr = load_trace(f)
    w = Workload("t", TraceLengths(tr), TraceArrival(time_scale=0.5), n_requests=3)
    r = w.requests()
    assert r.arrival_s.tolist() == [0.0, 0.5, 0.75] and r.prompt_tokens.tolist() == [10, 20, 30]
    # rescaled to 2 req/s: trace rate is 3 gaps / 4 s = 0.75 req/s
    r2 = Workload("t", TraceLengths(tr), TraceArrival(rate_per_s=2.0), n_requests=None, horizon_s=100.0).requests()
    assert (len(r2) - 1) / r2.arrival_s[-1] == pytest.approx(2.0)
    # file-order replay with other arrivals takes the first rows, wrapping around
    r3 = Workload("t", TraceLengths(tr, "file"), FixedArrival(1.0), n_requests=6).requests()
    assert r3.prompt_tokens.tolist() == [10, 20, 30, 40, 10, 20]


def test_trace_arrivals_need_timestamps() -> None:
    with pytest.raises(ConfigError, match="needs lengths from a trace"):
        Workload("x", load_profile("chat"), TraceArrival(), n_requests=10)


def _yaml(tmp_path: Path, data: dict) -> Path:
    p = tmp_path / "w.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


GOOD = {
    "name": "w",
    "lengths": {"profile": "chat"},
    "arrival": {"process": "poisson", "rate_per_s": 3.0},
    "n_requests": 50,
}


def test_user_yaml_with_trace_path(tmp_path: Path) -> None:
    (tmp_path / "tr.csv").write_text("num_prefill_tokens,num_decode_tokens\n5,6\n7,8\n")
    w = load_workload(_yaml(tmp_path, {**GOOD, "lengths": {"trace": "tr.csv", "order": "sample"}}))
    r = w.requests()
    assert set(r.prompt_tokens.tolist()) <= {5, 7} and len(r) == 50


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"arrival": {"process": "uniform"}}, ["arrival.process", "is not one of"]),
        ({"arrival": {"process": "poisson", "rate_per_s": -1}}, ["arrival.rate_per_s", "positive"]),
        ({"arrival": {"process": "poisson", "rate_per_s": 1, "cv": 2}}, ["arrival.cv", "not a known key"]),
        ({"arrival": {"process": "gamma", "rate_per_s": 1}}, ["arrival.cv", "required"]),
        ({"lengths": {"profile": "chat", "trace": "x.csv"}}, ["lengths", "exactly one"]),
        ({"lengths": {"profile": "nope"}}, ["lengths.profile", "'nope'", "shipped"]),
        ({"lengths": {"trace": "missing.csv"}}, ["lengths.trace", "does not exist"]),
        ({"n_requests": 0}, ["n_requests", ">= 1"]),
        ({"n_requests": None}, ["n_requests", "horizon_s"]),
        ({"max_total_tokens": 1}, ["max_total_tokens", ">= 2"]),
        ({"rate": 3}, ["rate", "not a known key"]),
        ({"arrival": {"process": "trace"}}, ["arrival.process", "needs lengths from a trace"]),
    ],
)
def test_bad_workload_yaml(tmp_path: Path, changes: dict, words: list[str]) -> None:
    data = {**GOOD, **changes}
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(ConfigError) as ei:
        load_workload(_yaml(tmp_path, data))
    msg = str(ei.value)
    assert "w.yaml" in msg
    for w in words:
        assert w in msg, (w, msg)
