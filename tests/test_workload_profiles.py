"""Length profiles: sampled workloads match their source traces (KS < 0.02 on 10,000 requests, both lengths),
the prompt/output coupling is kept, shipped files are what the generator produces, and sampling is seeded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import ks_2samp, spearmanr

from hydra_opt.config import ConfigError
from hydra_opt.workload.arrivals import FixedArrival
from hydra_opt.workload.profiles import N_LEVELS, build_profile, list_profiles, load_profile
from hydra_opt.workload.traces import load_trace
from hydra_opt.workload.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "data" / "traces"
needs_shared = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"{TRACES} absent: CI clones ../shared beside the repository for the real traces"
)
PROFILES = ["arxiv", "bwb", "chat", "longwriter", "sharegpt", "azure-conv", "azure-code", "mooncake-conv"]


def test_all_profiles_ship_with_source() -> None:
    assert set(PROFILES) <= set(list_profiles())
    for name in PROFILES:
        p = load_profile(name)
        assert p.prompt_quantiles.shape == (N_LEVELS,) and p.output_quantiles.shape == (N_LEVELS,)
        assert "@" in p.source and ":" in p.source  # owner/repo:path@commit
        assert np.array_equal(np.sort(p.copula), np.arange(p.copula.size))


@needs_shared
@pytest.mark.parametrize("name", PROFILES)
def test_sampled_lengths_match_source_trace_ks(name: str) -> None:
    prof = load_profile(name)
    trace = load_trace(TRACES / prof.trace_file)
    req = Workload(name, prof, FixedArrival(0.01), n_requests=10_000, seed=123).requests()
    assert len(req) == 10_000
    ks_p = ks_2samp(req.prompt_tokens, trace.prompt_tokens).statistic
    ks_o = ks_2samp(req.output_tokens, trace.output_tokens).statistic
    assert ks_p < 0.02 and ks_o < 0.02, (ks_p, ks_o)


@needs_shared
@pytest.mark.parametrize("name", PROFILES)
def test_joint_coupling_preserved(name: str) -> None:
    prof = load_profile(name)
    trace = load_trace(TRACES / prof.trace_file)
    p, o = prof.sample(20_000, np.random.default_rng(5))
    rho_trace = spearmanr(trace.prompt_tokens, trace.output_tokens)[0]
    rho_sample = spearmanr(p, o)[0]
    # the coupling is a 4,000-row subsample: standard error of rho ~ 1/sqrt(4000) = 0.016
    assert abs(rho_sample - rho_trace) < 0.06, (rho_sample, rho_trace)


def test_bwb_keeps_strong_positive_coupling() -> None:
    # BWB translation: output length follows input length (Spearman ~0.8 in the trace); independent marginals
    # would give ~0.
    p, o = load_profile("bwb").sample(10_000, np.random.default_rng(0))
    assert spearmanr(p, o)[0] > 0.7


@needs_shared
@pytest.mark.parametrize("name", ["chat", "azure-code"])
def test_shipped_profile_is_reproducible_from_trace(name: str) -> None:
    shipped = json.loads((ROOT / "hydra_opt" / "data" / "profiles" / f"{name}.json").read_text())
    rebuilt = build_profile(
        load_trace(TRACES / shipped["trace_file"]), name, shipped["source"], description=shipped["description"], seed=0
    ).to_dict()
    assert rebuilt == shipped


def test_sampling_is_seeded() -> None:
    prof = load_profile("sharegpt")
    a = prof.sample(500, np.random.default_rng(3))
    b = prof.sample(500, np.random.default_rng(3))
    c = prof.sample(500, np.random.default_rng(4))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0])


def test_quantile_bounds_respected() -> None:
    prof = load_profile("longwriter")
    p, o = prof.sample(5000, np.random.default_rng(1))
    assert p.min() >= prof.prompt_quantiles[0] and p.max() <= prof.prompt_quantiles[-1]
    assert o.min() >= prof.output_quantiles[0] and o.max() <= prof.output_quantiles[-1]


def test_bad_profile_file(tmp_path: Path) -> None:
    d = load_profile("chat").to_dict()
    d["prompt_quantiles"] = d["prompt_quantiles"][::-1]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ConfigError, match="p.json: prompt_quantiles: must be 1001 non-decreasing"):
        load_profile(path)
    with pytest.raises(ConfigError, match="shipped: arxiv"):
        load_profile("no-such-profile")
