"""The queueing delay a finite run measures near capacity (``markov.diffusion_queue_mean`` / ``window_wait_s``).

Regression: the continuous-batching estimate used the *stationary* occupancy chain's wait, with its waiting room
cut at ``λ·t_end``. At ``ρ ≈ 1`` that chain is nearly uniform, so the mean wait was ``≈ t_end/2`` — 22 s for a
30 s capacity window — while a run that starts empty waits about a second. The estimated SLO attainment then
*rose* with the rate (0.21 at 18 req/s, 0.59 at 24 req/s on the design below) and the capacity search could stop
in that hole.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from hydra_opt.evaluate.estimator import markov

CHAT = Path(__file__).resolve().parents[1] / "studies" / "workloads" / "quickstart-chat.yaml"


def _numeric_mean(m: float, var: float, t: float) -> float:
    """E[sup_{s≤t}(m·s + σB(s))] = ∫ P(M_t > x) dx with the reflection-principle tail."""
    s = math.sqrt(var * t)

    def tail(x: float) -> float:
        return (1.0 - norm.cdf((x - m * t) / s)) + math.exp(min(2.0 * m * x / var, 700.0)) * norm.cdf((-x - m * t) / s)

    return quad(tail, 0.0, 60.0 * (abs(m) * t + s), limit=400)[0]


@pytest.mark.parametrize("m,var,t", [(-1.0, 4.0, 3.0), (-0.1, 9.0, 10.0), (0.5, 1.0, 4.0), (-3.0, 1.0, 0.5),
                                     (2.0, 30.0, 15.0)])
def test_reflected_brownian_mean_matches_the_reflection_principle_integral(m, var, t):
    assert markov.diffusion_queue_mean(m, var, t) == pytest.approx(_numeric_mean(m, var, t), rel=1e-7)


def test_reflected_brownian_mean_limits():
    # Zero drift: σ√(2t/π); the series branch joins the closed form continuously.
    assert markov.diffusion_queue_mean(0.0, 4.0, 5.0) == pytest.approx(2.0 * math.sqrt(2.0 * 5.0 / math.pi))
    assert markov.diffusion_queue_mean(1e-5, 4.0, 5.0) == pytest.approx(markov.diffusion_queue_mean(1e-3, 4.0, 5.0),
                                                                        rel=1e-3)
    # Stable drift: rises monotonically to the stationary mean σ²/(2|m|).
    ts = np.linspace(0.1, 400.0, 50)
    vals = [markov.diffusion_queue_mean(-0.5, 3.0, float(t)) for t in ts]
    assert all(b >= a for a, b in zip(vals, vals[1:]))
    assert vals[-1] == pytest.approx(3.0 / (2 * 0.5), rel=1e-6)
    # Unstable drift: the linear fluid m·t plus a bounded excess.
    assert markov.diffusion_queue_mean(2.0, 1.0, 100.0) - 200.0 == pytest.approx(1.0 / (2 * 2.0), rel=1e-6)


def test_window_wait_is_increasing_in_the_rate_and_below_the_stationary_wait():
    mu, scv = 10.0, 0.5
    waits = [markov.window_wait_s(lam, mu, scv, 3.0, 30.0) for lam in np.linspace(1.0, 13.0, 25)]
    assert all(b > a for a, b in zip(waits, waits[1:]))
    # Far below capacity the run reaches the stationary diffusion wait (σ²/(2|m|))/μ quickly.
    lam = 2.0
    assert markov.window_wait_s(lam, mu, scv, 3.0, 30.0) == pytest.approx(
        (lam + mu * scv) / (2 * (mu - lam)) / mu, rel=0.05)
    # At ρ = 1 it stays finite and grows like √t, not like the window.
    w30, w120 = (markov.window_wait_s(mu, mu, scv, 0.0, t) for t in (30.0, 120.0))
    assert w120 / w30 == pytest.approx(2.0, rel=0.01)


SLO = dict(ttft_s=5.0, tpot_s=0.05, attainment=0.9)


def _estimates(chiplets: dict, model: str, scheduler: str, max_batch: int, d2d: int, capacity: dict, rates):
    """(estimate, Slo) of a continuous-batching chat design at each rate of one capacity stream."""
    from hydra_opt.evaluate.estimator.core import resolve
    from hydra_opt.evaluate.estimator.result import EstimatorOptions
    from hydra_opt.evaluate.estimator.single import estimate
    from hydra_opt.evaluate.scenario import Scenario
    from hydra_opt.evaluate.slo import CapacitySettings, CapacityStream, Slo
    from hydra_opt.system.design import DesignPoint

    design = DesignPoint.from_dict({
        "chiplets": chiplets, "n_mem": 8, "memory": "hbm3", "d2d_bw_gbps": d2d, "max_batch": max_batch,
        "placement": "cp", "batching": "continuous", "scheduler": scheduler,
        "package": {"grid_w": 6, "grid_h": 4, "slot_area_mm2": 144.0}})
    design, model, workload = resolve(design, model, CHAT)
    slo = Slo(**SLO)
    stream = CapacityStream(workload, 0, CapacitySettings(**capacity))
    return [(estimate(design, model, stream.at(rate), scenario=Scenario(slo=slo), options=EstimatorOptions(seed=None)),
             slo) for rate in rates]


def test_estimated_attainment_falls_with_the_rate_near_capacity():
    from hydra_opt.evaluate.estimator.goodput import estimated_slo

    att = []
    for est, slo in _estimates({"tscs_d": 12, "tscs_p": 4}, "llama-3-8b", "static", 8, 512,
                               dict(tolerance=0.02, max_runs=6, requests=1000, window_s=30.0),
                               (14.0, 16.0, 17.0, 18.0, 19.0, 20.0, 22.0, 24.0, 28.0)):
        att.append(estimated_slo(est, slo)["slo_attainment"])
        assert est.diagnostics["queue_wait_s"] < 5.0  # the stationary chain said 22.4 s at 18 req/s
    assert all(b <= a + 1e-9 for a, b in zip(att, att[1:])), att


def test_no_request_waits_before_the_run_fills_its_slots():
    """A one-decode-chiplet Mamba-2 chat design is TPOT-bound long before its 64 slots fill: a 15 s window at
    2.2 req/s fills about 11. The estimated TTFT p90 was 4.9 s there (ρ = 0.96 against the slot capacity, the
    empty-start diffusion from t = 0) and 0.07 s at 2.9 req/s; simulated 0.06 and 0.08 s."""
    from hydra_opt.evaluate.estimator.goodput import estimated_slo

    p90 = [estimated_slo(est, slo)["ttft_p90_s"]
           for est, slo in _estimates({"marca_d": 1, "marca_p": 15}, "mamba2-2.7b", "elastic", 4, 256,
                                      dict(tolerance=0.05, max_runs=10, requests=4000, window_s=15.0),
                                      (1.2, 2.19, 2.92))]
    assert max(p90) < 0.2, p90
