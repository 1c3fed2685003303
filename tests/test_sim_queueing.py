"""Closed-form checks of the simulator on a single chiplet with batch cap 1 (M/D/1, M/M/1).

The engine's real code path is used: a one-block synthetic model whose compute time is a constant (deterministic
service) or proportional to the prompt length (geometric prompt lengths → exponential-like service).
"""

from __future__ import annotations

import numpy as np
import pytest

from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.evaluate.simulator import run_system
from sim_synthetic import one_block_model, single_chiplet_system

S = 0.01  # service time, s


def _run(arr, prompt, model):
    n = arr.size
    return run_system(
        single_chiplet_system(), model, arr, prompt, np.ones(n, dtype=np.int64), scenario=Scenario(warmup_frac=0.0),
        batching="static", max_batch=1,
    )


def _lindley(arr: np.ndarray, service: np.ndarray) -> np.ndarray:
    """Waiting times of a FIFO single server: W_{n+1} = max(0, W_n + S_n − A_{n+1})."""
    w = np.zeros(arr.size)
    gaps = np.diff(arr)
    for i in range(1, arr.size):
        w[i] = max(0.0, w[i - 1] + service[i - 1] - gaps[i - 1])
    return w


def _poisson(rate: float, n: int, seed: int) -> np.ndarray:
    return np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate, n))


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_md1_sample_path_is_lindley(rho):
    """Every request's wait equals the Lindley recursion on the same arrivals (20,000 requests)."""
    n = 20_000
    arr = _poisson(rho / S, n, seed=3)
    res = _run(arr, np.ones(n, dtype=np.int64), one_block_model(service_s=S))
    raw = res.raw
    assert res.completed_requests == n
    wait = raw.first_token_s - arr - S
    np.testing.assert_allclose(wait, _lindley(arr, np.full(n, S)), atol=1e-9)
    # Service on a lone chiplet is exactly S: the batch-start TTFT of every request is S.
    np.testing.assert_allclose(raw.first_batch_start_s, S, rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("rho,n", [(0.5, 200_000), (0.8, 400_000)])
def test_md1_pollaczek_khinchine(rho, n):
    """Mean wait within 3 % of the M/D/1 Pollaczek–Khinchine value ρS / (2(1−ρ))."""
    arr = _poisson(rho / S, n, seed=11)
    res = _run(arr, np.ones(n, dtype=np.int64), one_block_model(service_s=S))
    wait = (res.raw.first_token_s - arr - S).mean()
    expected = rho * S / (2 * (1 - rho))
    assert abs(wait / expected - 1) < 0.03, (wait, expected)


def test_mm1_sample_path():
    """Geometric prompt lengths with a per-token cost give (near-)exponential service: waits follow Lindley."""
    n, mean_tokens, rho = 20_000, 1000, 0.8
    per_tok = S / mean_tokens
    prompt = np.random.default_rng(5).geometric(1.0 / mean_tokens, n).astype(np.int64)
    arr = _poisson(rho / S, n, seed=6)
    res = _run(arr, prompt, one_block_model(per_token_s=per_tok))
    service = prompt * per_tok
    np.testing.assert_allclose(res.raw.first_token_s - arr - service, _lindley(arr, service), atol=1e-9)


@pytest.mark.slow
def test_mm1_mean_wait():
    """Mean wait matches M/G/1 P-K with the realised E[S²] and M/M/1 ρS/(1−ρ) within 3 % (ρ = 0.5)."""
    n, mean_tokens, rho = 400_000, 1000, 0.5
    per_tok = S / mean_tokens
    rng = np.random.default_rng(5)
    prompt = rng.geometric(1.0 / mean_tokens, n).astype(np.int64)
    arr = _poisson(rho / S, n, seed=6)
    res = _run(arr, prompt, one_block_model(per_token_s=per_tok))
    service = prompt * per_tok
    wait = res.raw.first_token_s - arr - service
    np.testing.assert_allclose(wait, _lindley(arr, service), atol=1e-9)
    lam = rho / S
    es2 = per_tok**2 * (2 - 1 / mean_tokens) * mean_tokens**2  # E[S²] of the geometric service
    pk = lam * es2 / (2 * (1 - rho))
    mm1 = rho * S / (1 - rho)
    assert abs(wait.mean() / pk - 1) < 0.03, (wait.mean(), pk)
    assert abs(wait.mean() / mm1 - 1) < 0.03, (wait.mean(), mm1)


@pytest.mark.slow
def test_mm1_at_high_load():
    n, mean_tokens, rho = 400_000, 1000, 0.8
    per_tok = S / mean_tokens
    prompt = np.random.default_rng(7).geometric(1.0 / mean_tokens, n).astype(np.int64)
    arr = _poisson(rho / S, n, seed=8)
    res = _run(arr, prompt, one_block_model(per_token_s=per_tok))
    wait = (res.raw.first_token_s - arr - prompt * per_tok).mean()
    assert abs(wait / (rho * S / (1 - rho)) - 1) < 0.03
