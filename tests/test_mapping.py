"""Initial spatial-pipeline mapping Ω (HYDRA Eqs. 3–5): optimality on small cases, baselines, determinism."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hydra_opt.runtime.mapping import (
    bottleneck_s,
    comm_time_s,
    map_tasks,
    round_robin_mapping,
)


def _random_instance(rng: np.random.Generator, k_max: int = 7, c_max: int = 4):
    k = int(rng.integers(1, k_max + 1))
    c = int(rng.integers(1, c_max + 1))
    # Unrelated machines: task size × chiplet speed × noise, plus a communication term.
    t = rng.uniform(0.2, 2.0, (k, 1)) / rng.uniform(0.5, 2.0, (1, c)) * rng.uniform(0.8, 1.25, (k, c))
    t = t + comm_time_s(rng.integers(0, 5, (k, c)), rng.uniform(0, 1e8, (k, 1)), 256.0)
    ok = rng.random((k, c)) < 0.75
    for i in range(k):
        if not ok[i].any():
            ok[i, int(rng.integers(c))] = True
    return t, ok


def _brute(t: np.ndarray, ok: np.ndarray) -> tuple[float, float]:
    best = (np.inf, np.inf)
    for a in itertools.product(*[np.flatnonzero(ok[k]) for k in range(t.shape[0])]):
        load = np.zeros(t.shape[1])
        for k, c in enumerate(a):
            load[c] += t[k, c]
        total = sum(t[k, c] for k, c in enumerate(a))
        best = min(best, (load.max(), total))
    return best


def test_comm_time_eq3() -> None:
    # 3 hops × 2 GB at 256 GB/s.
    assert comm_time_s(3, 2e9, 256.0) == pytest.approx(3 * 2e9 / 256e9)
    assert comm_time_s(0, 1e9, 128.0) == 0.0


@pytest.mark.parametrize("seed", range(40))
def test_equals_brute_force_on_small_instances(seed: int) -> None:
    t, ok = _random_instance(np.random.default_rng(seed))
    m = map_tasks(t, ok)
    best_max, best_total = _brute(t, ok)
    assert m.optimal
    assert m.bottleneck_s == pytest.approx(best_max, rel=1e-12)
    # Among bottleneck-optimal mappings the total cost is minimal too.
    assert m.total_s == pytest.approx(best_total, rel=1e-9)
    assert all(ok[k, c] for k, c in enumerate(m.assign))
    assert bottleneck_s(t, m.assign) == pytest.approx(m.bottleneck_s)


def test_not_worse_than_round_robin_and_heuristic_alone() -> None:
    rng = np.random.default_rng(1)
    for _ in range(30):
        t, ok = _random_instance(rng, k_max=30, c_max=10)
        rr = round_robin_mapping(t, ok)
        fast = map_tasks(t, ok, exact=False)
        full = map_tasks(t, ok, node_limit=1000)
        assert fast.bottleneck_s <= rr.bottleneck_s + 1e-12
        assert full.bottleneck_s <= fast.bottleneck_s + 1e-12
        mins = [t[k][ok[k]].min() for k in range(t.shape[0])]
        lower = max(max(mins), sum(mins) / t.shape[1])  # no mapping can beat these
        assert full.bottleneck_s >= lower - 1e-12


def test_identical_chiplets_balance_perfectly() -> None:
    # 12 equal tasks on 4 identical chiplets: 3 each.
    t = np.ones((12, 4))
    m = map_tasks(t)
    assert m.bottleneck_s == 3.0 and m.optimal
    assert sorted(np.bincount(m.assign, minlength=4)) == [3, 3, 3, 3]


def test_components_are_independent() -> None:
    # Attention tasks only on chiplets 0-1, Mamba tasks only on 2-4: solved separately, both balanced.
    t = np.ones((10, 5))
    ok = np.zeros((10, 5), dtype=bool)
    ok[:4, :2] = True
    ok[4:, 2:] = True
    m = map_tasks(t, ok)
    assert m.load_s == (2.0, 2.0, 2.0, 2.0, 2.0)


def test_communication_term_steers_to_near_chiplet() -> None:
    # Same compute everywhere; chiplet 1 is 4 hops from the block's memory, chiplet 0 is 1 hop.
    comp = np.full((1, 2), 1e-3)
    comm = comm_time_s(np.array([[1, 4]]), 1e8, 256.0)
    m = map_tasks(comp + comm)
    assert m.assign == (0,)


def test_deterministic() -> None:
    rng = np.random.default_rng(4)
    t, ok = _random_instance(rng, k_max=25, c_max=8)
    assert map_tasks(t, ok) == map_tasks(t.copy(), ok.copy())


def test_errors() -> None:
    with pytest.raises(ValueError):
        map_tasks(np.ones((2, 2)), np.array([[True, False], [False, False]]))
    with pytest.raises(ValueError):
        map_tasks(np.ones(3))
    with pytest.raises(ValueError):
        map_tasks(-np.ones((2, 2)))
    with pytest.raises(ValueError):
        map_tasks(np.ones((2, 2)), np.ones((3, 2), dtype=bool))
    # inf cost = incompatible.
    m = map_tasks(np.array([[np.inf, 1.0], [1.0, np.inf]]))
    assert m.assign == (1, 0)
