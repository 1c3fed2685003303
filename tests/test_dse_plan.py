"""The calibrated simulation plan (hydra_opt.dse.plan): front extremes first, then the estimator's error learned
from the simulations; and the study runner spending a `budget.plan: calibrated` budget at the end of the study."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from hydra_opt.dse.objective import trial_design
from hydra_opt.config import ConfigError
from hydra_opt.dse.plan import calibrated_values, design_features, front_phase_size, plan_next, spread_order
from hydra_opt.dse.runner import RunOptions, run_study
from hydra_opt.dse.spec import load_study_spec

from test_dse_study import SPACE, _journal


def test_front_phase_size() -> None:
    assert [front_phase_size(k) for k in (1, 2, 3, 4, 9, 10)] == [1, 1, 1, 2, 3, 4]


def test_spread_order_takes_both_ends_then_the_middle() -> None:
    # minimisation orientation: -throughput, ttft; a front from (tp 100, ttft 1.0) to (tp 10, ttft 0.1)
    tp = np.array([10.0, 40.0, 55.0, 70.0, 100.0])
    ttft = np.array([0.1, 0.4, 0.55, 0.7, 1.0])
    order = spread_order(np.column_stack([-tp, ttft]))
    assert order[:3] == [4, 0, 2]
    assert sorted(order) == [0, 1, 2, 3, 4]


def test_design_features_one_hot_and_normalised() -> None:
    f = design_features([{"a": 1, "b": {"c": 10}, "p": "x", "k": 5}, {"a": 3, "b": {"c": 10}, "p": "y", "k": 5}])
    # a → [0, 1]; p=x, p=y one-hot; b.c and k constant → dropped
    assert f.shape == (2, 3)
    assert np.allclose(sorted(map(tuple, f.T)), [(0.0, 1.0), (0.0, 1.0), (1.0, 0.0)])


def test_calibration_learns_a_systematic_error() -> None:
    # The estimate ignores x; the simulation grows with x: simulated = est · (1 + x).
    x = np.linspace(0.0, 1.0, 11)
    est = np.full(11, 100.0) + 0.5 * np.arange(11)[::-1]  # the estimator prefers small x
    truth = est * (1.0 + x)
    sim = np.full(11, np.nan)
    sim[[0, 5]] = truth[[0, 5]]
    corrected = calibrated_values(est, sim, x[:, None])
    assert np.argmax(corrected) == 10 and np.argmax(est) == 0
    assert corrected[10] > corrected[5] > corrected[0]


def test_plan_next_front_then_calibrated() -> None:
    # 2 objectives (max tp, min ttft). Estimated front: rows 0..2; rows 3..5 dominated in estimates but the
    # simulator rates them higher the larger feature x is.
    est = np.array([[100.0, 1.0], [60.0, 0.5], [20.0, 0.1], [90.0, 1.2], [89.0, 1.3], [88.0, 1.4]])
    x = np.array([0.0, 0.0, 0.0, 0.6, 0.8, 1.0])[:, None]
    truth = est * np.column_stack([1.0 + x[:, 0], np.ones(6)])
    sim = np.full_like(est, np.nan)
    picks = []
    for _ in range(5):
        row, reason = plan_next(est, sim, x, [True, False], n_budget=6)
        picks.append((row, reason))
        sim[row] = truth[row]
    # ceil(6/3) = 2 front picks: max throughput end, then min TTFT end
    assert picks[:2] == [(0, "plan-front"), (2, "plan-front")]
    assert all(r == "plan-calibrated" for _, r in picks[2:])
    assert 5 in [p for p, _ in picks], "the calibrated phase follows the learned error to the best design"
    sim[:] = truth
    assert plan_next(est, sim, x, [True, False], n_budget=6) is None


def _study(tmp_path: Path, budget: dict) -> Path:
    doc = {"kind": "study", "name": "plan", "model": "llama-3-8b", "workload": "chat", "search_space": SPACE,
           "sampler": {"name": "random"}, "pruner": {"rule": "rank", "n_warmup_trials": 0}, "budget": budget,
           "evaluator": "dse_fakes:make", "seed": 1, "storage": _journal(tmp_path), "artifacts": False}
    p = tmp_path / "plan.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def _run(tmp_path: Path, budget: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_study(load_study_spec(_study(tmp_path, budget)), RunOptions(quiet=True))


def test_study_spends_a_calibrated_budget_at_the_end(tmp_path: Path) -> None:
    study, s = _run(tmp_path, {"n_trials": 30, "max_simulations": 4, "plan": "calibrated", "plan_pool": "estimated"})
    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    assert s.finished == 30
    simulated = [t for t in trials if "sim_wall_s" in t.user_attrs]
    assert len({t.user_attrs["design_key"] for t in simulated}) == 4 == s.simulated
    assert [t.number for t in simulated] == [26, 27, 28, 29], "simulations are spent on the last trials"
    assert [t.user_attrs["promotion"] for t in simulated] == ["plan-front"] * 2 + ["plan-calibrated"] * 2
    feasible_early = [t for t in trials[:26] if "infeasible" not in t.user_attrs]
    assert feasible_early and all(t.user_attrs["promotion"] == "deferred" for t in feasible_early)
    by_number = {t.number: t for t in trials}
    for t in simulated:  # a planned trial re-proposes an estimated design
        assert trial_design(t) == trial_design(by_number[t.user_attrs["revisit_of"]])


def test_calibrated_plan_needs_a_simulation_budget(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="max_simulations"):
        load_study_spec(_study(tmp_path, {"n_trials": 30, "plan": "calibrated"}))
    with pytest.raises(ConfigError):
        load_study_spec(_study(tmp_path, {"n_trials": 30, "max_simulations": 3, "plan": "lucky"}))


def test_plan_pool_space_picks_designs_no_trial_proposed(tmp_path: Path) -> None:
    """``plan_pool: space``: the plan estimates the whole (enumerable) space and enqueues the designs it picks even
    when no trial proposed them; the first pick is the best estimated throughput of the whole space."""
    from dse_fakes import closed_form

    from hydra_opt.dse.search_space import parse_search_space
    from hydra_opt.config import Node

    study, s = _run(tmp_path, {"n_trials": 10, "max_simulations": 3, "plan": "calibrated", "plan_pool": "space"})
    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    simulated = [t for t in trials if "sim_wall_s" in t.user_attrs]
    assert [t.number for t in simulated] == [7, 8, 9] and s.simulated == 3
    space = parse_search_space(Node(SPACE, file="t.yaml"))
    best_tp = max(closed_form(d)[0] for d in space.enumerate() if d["n_mem"] > 2)
    assert simulated[0].user_attrs["est_throughput_tok_s"] == pytest.approx(best_tp)
    proposed = {t.user_attrs["design_key"] for t in trials[:7] if "design_key" in t.user_attrs}
    assert any(t.user_attrs["design_key"] not in proposed and "revisit_of" not in t.user_attrs for t in simulated)


def test_plan_pool_space_checks(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="plan: calibrated"):
        load_study_spec(_study(tmp_path, {"n_trials": 30, "max_simulations": 3, "plan": "greedy",
                                          "plan_pool": "space"}))
    with pytest.raises(ConfigError, match="estimated, space|estimated"):
        load_study_spec(_study(tmp_path, {"n_trials": 30, "max_simulations": 3, "plan": "calibrated",
                                          "plan_pool": "everything"}))


def test_plan_auto_defaults(tmp_path: Path) -> None:
    """``auto``: a study with a simulation budget plans it over the whole (small) space; without one it is greedy."""
    spec = load_study_spec(_study(tmp_path, {"n_trials": 30, "max_simulations": 3}))
    assert (spec.plan, spec.plan_pool) == ("calibrated", "space")
    spec = load_study_spec(_study(tmp_path, {"n_trials": 30}))
    assert (spec.plan, spec.plan_pool) == ("greedy", "estimated")
    spec = load_study_spec(_study(tmp_path, {"n_trials": 30, "max_simulations": 3, "plan": "greedy"}))
    assert (spec.plan, spec.plan_pool) == ("greedy", "estimated")
