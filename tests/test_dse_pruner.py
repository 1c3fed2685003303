"""PromotionPruner on hand-built trial sets: promotes non-dominated, prunes dominated, warm-up, ε and k-rank rules,
and identical decisions from two storages holding the same trials."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import optuna
import pytest
from optuna.study import StudyDirection
from optuna.trial import TrialState, create_trial

from hydra_opt.dse.pruner import PromotionPruner, nondominated_rank, within_epsilon

MAXMIN = ["maximize", "minimize"]
MAXMIN_DIRS = [StudyDirection.MAXIMIZE, StudyDirection.MINIMIZE]
METRICS = ("throughput_tok_s", "ttft_s")


def _trial(tp: float | None, ttft: float | None, state: TrialState = TrialState.PRUNED) -> optuna.trial.FrozenTrial:
    attrs = {}
    if tp is not None:
        attrs["est_throughput_tok_s"] = tp
    if ttft is not None:
        attrs["est_ttft_s"] = ttft
    values = [tp, ttft] if state == TrialState.COMPLETE else None
    return create_trial(state=state, values=values, user_attrs=attrs)


def _study(points, storage=None, directions=MAXMIN) -> optuna.Study:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = optuna.create_study(directions=directions, storage=storage)
    study.add_trials([_trial(tp, ttft) for tp, ttft in points])
    return study


def _decide(pruner: PromotionPruner, study: optuna.Study, number: int):
    trial = next(t for t in study.get_trials(deepcopy=False) if t.number == number)
    return pruner.decide(study, trial)


# A hand-built set: front = (100, 1.0), (200, 2.0), (300, 4.0); dominated = (90, 1.5) by (100,1.0); (150, 3.0) by (200,2.0)
POINTS = [(100.0, 1.0), (200.0, 2.0), (300.0, 4.0), (90.0, 1.5), (150.0, 3.0), (50.0, 5.0)]


def test_promotes_nondominated_and_prunes_dominated() -> None:
    study = _study(POINTS)
    pruner = PromotionPruner(METRICS, rule="rank", k_ranks=1, n_warmup_trials=0)
    decisions = [_decide(pruner, study, i) for i in range(len(POINTS))]
    assert [d.promoted for d in decisions] == [True, True, True, False, False, False]
    assert decisions[0].reason == "rank" and decisions[0].rank == 0
    assert decisions[3].reason == "dominated"
    # prune() is the negation of the decision.
    trials = study.get_trials(deepcopy=False)
    assert pruner.prune(study, trials[3]) is True and pruner.prune(study, trials[1]) is False


def test_k_ranks_promotes_the_second_front() -> None:
    study = _study(POINTS)
    # Second front (after removing the first): (90, 1.5) and (150, 3.0); third: (50, 5.0).
    pruner = PromotionPruner(METRICS, rule="rank", k_ranks=2, n_warmup_trials=0)
    got = [_decide(pruner, study, i) for i in range(len(POINTS))]
    assert [d.promoted for d in got] == [True, True, True, True, True, False]
    assert got[3].rank == 1 and got[5].rank == 2


def test_warmup_promotes_everything_until_enough_estimates() -> None:
    pts = [(100.0, 1.0), (200.0, 2.0), (300.0, 4.0), (10.0, 9.0)]  # the last is dominated by all
    pruner = PromotionPruner(METRICS, rule="rank", n_warmup_trials=4)
    d = _decide(pruner, _study(pts), 3)
    assert d.promoted and d.reason == "warmup"  # only 3 other estimated trials < 4
    pts.append((120.0, 1.1))
    d = _decide(pruner, _study(pts), 3)
    assert not d.promoted and d.reason == "dominated"


def test_warmup_ignores_trials_without_estimates() -> None:
    pts = [(100.0, 1.0), (200.0, 2.0), (300.0, 4.0), (10.0, 9.0), (None, None), (None, 2.0)]
    pruner = PromotionPruner(METRICS, rule="rank", n_warmup_trials=4)
    assert _decide(pruner, _study(pts), 3).reason == "warmup"
    assert _decide(pruner, _study(pts), 4).reason == "no-estimate"


def test_epsilon_rule() -> None:
    # (97, 1.03) is dominated by (100, 1.0) by 3 % in each metric.
    pts = [(100.0, 1.0), (200.0, 2.0), (97.0, 1.03)]
    d5 = _decide(PromotionPruner(METRICS, rule="epsilon", epsilon=0.05, n_warmup_trials=0), _study(pts), 2)
    d1 = _decide(PromotionPruner(METRICS, rule="epsilon", epsilon=0.01, n_warmup_trials=0), _study(pts), 2)
    assert d5.promoted and d5.reason == "epsilon"
    assert not d1.promoted
    # "either" = rank or epsilon: the same trial is promoted with ε = 5 %.
    assert _decide(PromotionPruner(METRICS, rule="either", epsilon=0.05, n_warmup_trials=0), _study(pts), 2).promoted


def test_epsilon_closed_form_boundary() -> None:
    # The other design has throughput 100 and half the TTFT (better even after the ε bonus), so the candidate x is
    # within ε exactly when its improved throughput x·(1+ε) exceeds 100.
    maximized = np.array([True, False])
    for x, eps, expect in [(95.0, 0.05, False), (95.3, 0.05, True), (90.9, 0.1, False), (91.0, 0.1, True)]:
        pts = np.array([[-x, 1.0], [-100.0, 0.5]])
        assert within_epsilon(pts, 0, eps, maximized) is expect, (x, eps)


def test_directions_are_respected() -> None:
    # Minimising both metrics flips who is dominated.
    pts = [(100.0, 1.0), (200.0, 2.0)]
    pruner = PromotionPruner(METRICS, rule="rank", n_warmup_trials=0)
    assert _decide(pruner, _study(pts, directions=["maximize", "minimize"]), 0).promoted
    assert _decide(pruner, _study(pts, directions=["maximize", "minimize"]), 1).promoted
    assert _decide(pruner, _study(pts, directions=["minimize", "minimize"]), 0).promoted
    assert not _decide(pruner, _study(pts, directions=["minimize", "minimize"]), 1).promoted


def test_nondominated_rank_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    pts = rng.integers(0, 6, size=(40, 2)).astype(float)  # ties and duplicates on purpose

    def brute_ranks(p: np.ndarray) -> np.ndarray:
        ranks = np.full(len(p), -1)
        alive = set(range(len(p)))
        r = 0
        while alive:
            front = {i for i in alive if not any(
                np.all(p[j] <= p[i]) and np.any(p[j] < p[i]) for j in alive if j != i)}
            for i in front:
                ranks[i] = r
            alive -= front
            r += 1
        return ranks

    expect = brute_ranks(pts)
    for i in range(len(pts)):
        assert nondominated_rank(pts, i, 100) == expect[i]
        assert nondominated_rank(pts, i, 2) == min(expect[i], 2)


def test_identical_decisions_from_two_storages(tmp_path) -> None:
    rng = np.random.default_rng(7)
    tp = rng.uniform(50, 500, 40)
    ttft = 0.2 + 3.0 * (tp / 500) ** 2 * rng.uniform(0.8, 1.6, 40)
    pts = list(zip(tp.tolist(), ttft.tolist()))
    mem = _study(pts)
    sql = _study(pts, storage=f"sqlite:///{tmp_path / 'p.db'}")
    # A third storage with the same trials inserted in another order.
    perm = rng.permutation(len(pts))
    shuffled = _study([pts[i] for i in perm])
    stored = {name: st.get_trials(deepcopy=False) for name, st in (("mem", mem), ("sql", sql), ("shuffled", shuffled))}

    def decisions(pruner: PromotionPruner, name: str) -> list[bool]:
        trials = sorted(stored[name], key=lambda t: t.number)
        return [pruner.decide_among(trials, t, MAXMIN_DIRS).promoted for t in trials]

    for rule, k, eps in itertools.product(("rank", "epsilon", "either"), (1, 2), (0.0, 0.05)):
        pruner = PromotionPruner(METRICS, rule=rule, k_ranks=k, epsilon=eps, n_warmup_trials=5)
        a, b, sh = decisions(pruner, "mem"), decisions(pruner, "sql"), decisions(pruner, "shuffled")
        c = [None] * len(pts)
        for new, old in enumerate(perm):
            c[old] = sh[new]
        assert a == b == c, (rule, k, eps)
        assert 0 < sum(a) < len(pts)  # the set discriminates: some promoted, some pruned
    # The study-level entry point reads the same storage content.
    pruner = PromotionPruner(METRICS, n_warmup_trials=5)
    for i in (0, 17, 39):
        assert _decide(pruner, mem, i) == _decide(pruner, sql, i)


def test_decision_counts_failed_and_running_estimates() -> None:
    # Estimates of FAIL / RUNNING trials are real estimates; a design dominated by them is not promoted.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = optuna.create_study(directions=MAXMIN)
    study.add_trial(_trial(300.0, 0.5, TrialState.FAIL))
    study.add_trial(_trial(10.0, 9.0))
    pruner = PromotionPruner(METRICS, rule="rank", n_warmup_trials=0)
    assert not _decide(pruner, study, 1).promoted


@pytest.mark.parametrize("kwargs", [dict(rule="best"), dict(k_ranks=0), dict(epsilon=-1.0), dict(n_warmup_trials=-1)])
def test_bad_arguments(kwargs) -> None:
    with pytest.raises(ValueError):
        PromotionPruner(METRICS, **kwargs)


def test_objective_count_mismatch() -> None:
    study = _study(POINTS)
    with pytest.raises(ValueError):
        PromotionPruner(("throughput_tok_s",), n_warmup_trials=0).decide(study, study.trials[0])


def test_is_an_optuna_pruner() -> None:
    assert isinstance(PromotionPruner(METRICS), optuna.pruners.BasePruner)
    assert StudyDirection.MAXIMIZE  # directions come from the study, not the pruner


def test_min_estimates_collects_before_promoting() -> None:
    pts = [(100.0, 1.0), (200.0, 2.0), (300.0, 4.0), (400.0, 0.5)]  # the last dominates everything
    pruner = PromotionPruner(METRICS, rule="rank", n_warmup_trials=0, min_estimates=4)
    d = _decide(pruner, _study(pts), 3)
    assert not d.promoted and d.reason == "collecting"  # only 3 others: still collecting, even on the front
    pts.append((50.0, 9.0))
    assert _decide(pruner, _study(pts), 3).promoted
    # Warm-up comes first: with n_warmup_trials above the pool size the trial is promoted.
    assert _decide(PromotionPruner(METRICS, n_warmup_trials=10, min_estimates=20), _study(pts), 4).reason == "warmup"
