"""The Python API: :class:`DseObjective` built from Python objects or a study file, used with
``optuna.create_study(...).optimize(...)`` and the user's own sampler, storage, callbacks and pruner."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from dse_fakes import FakeEvaluator
from hydra_opt.config import ConfigError
from hydra_opt.dse.objective import trial_design
from hydra_opt.dse.report import front_rows
from hydra_opt.dse import (
    METRICS,
    Composition,
    Constraint,
    DseObjective,
    HydraEvaluator,
    ObjectiveSpec,
    Part,
    PromotionPruner,
    ScalarDim,
    SearchSpace,
    constraints_from_user_attrs,
)
from test_dse_study import SPACE, _study_file

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _quiet() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def _objective(**kw) -> DseObjective:
    kw.setdefault("pruner", PromotionPruner(["throughput_tok_s", "ttft_s"], n_warmup_trials=4, epsilon=0.02))
    kw.setdefault("search_space", SPACE)
    return DseObjective.from_objects("llama-3-8b", "chat", evaluator=FakeEvaluator(), **kw)


def _optimize(objective: DseObjective, n: int, *, seed: int = 3, **study_kw) -> optuna.Study:
    study_kw.setdefault("sampler", optuna.samplers.TPESampler(seed=seed))
    study = optuna.create_study(directions=objective.directions, **study_kw)
    study.optimize(objective, n_trials=n)
    return study


def _rows(study: optuna.Study) -> list[tuple]:
    return [(t.state, t.values, t.user_attrs.get("promotion"), trial_design(t)) for t in study.trials]


def test_from_objects_gives_the_trials_of_the_same_study_file(tmp_path: Path) -> None:
    by_yaml = DseObjective.from_yaml(_study_file(tmp_path), evaluator=FakeEvaluator())
    # The file is written with sorted keys; the chiplets' order is the sampling order of the composition.
    by_objects = _objective(search_space=yaml.safe_load(yaml.safe_dump(SPACE)))
    a, b = _optimize(by_yaml, 24), _optimize(by_objects, 24)
    assert _rows(a) == _rows(b)
    states = {t.state for t in a.trials}
    assert states == {TrialState.COMPLETE, TrialState.PRUNED}
    # The same trial definition (the file names the fake evaluator by module:callable, Python passes it in).
    assert replace(by_yaml.spec, evaluator="").fingerprint() == by_objects.spec.fingerprint()
    assert by_yaml.directions == by_objects.directions == ["maximize", "minimize"]
    assert by_objects.metric_names == ["throughput [tok/s]", "TTFT [s]"]
    # The objective names the study's objectives, so reports read it as they read a runner's study.
    assert b.metric_names == by_objects.metric_names and b.user_attrs["hydra_opt_metrics"] == by_objects.metrics
    rows, facts = front_rows(b)
    assert rows and all(None not in r.est for r in rows) and facts["bstar"] is not None


def test_own_sampler_storage_and_callbacks(tmp_path: Path) -> None:
    space = SearchSpace.from_dict(SPACE).with_encoding("stick_breaking")  # NSGA-II models a static space
    objective = DseObjective.from_objects("llama-3-8b", "chat", space, evaluator=FakeEvaluator(), pruner=False)
    seen: list[int] = []
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(tmp_path / "j.log")))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # constraints_func is deprecated in Optuna 5
        sampler = optuna.samplers.NSGAIISampler(seed=1, population_size=6, constraints_func=constraints_from_user_attrs)
    study = optuna.create_study(directions=objective.directions, sampler=sampler, storage=storage, study_name="own")
    study.optimize(objective, n_trials=14, callbacks=[lambda s, t: seen.append(t.number)])
    assert seen == list(range(14))
    assert all(p.startswith("u_") or p in ("d2d_bw_gbps", "max_batch") for p in study.trials[0].params)
    infeasible = [t for t in study.trials if "infeasible" in t.user_attrs]
    feasible = [t for t in study.trials if "infeasible" not in t.user_attrs]
    assert feasible and all(t.state == TrialState.COMPLETE for t in feasible)  # pruner=False: all simulated
    for t in infeasible:
        assert t.state == TrialState.PRUNED and t.system_attrs["constraints"][0] > 0
    # Resuming from the storage continues the same study.
    again = optuna.load_study(study_name="own", storage=storage, sampler=optuna.samplers.RandomSampler(seed=0))
    again.optimize(objective, n_trials=3)
    assert len(again.trials) == 17


def test_a_study_promotion_pruner_decides_in_place_of_the_objective_s() -> None:
    objective = _objective(pruner=False)
    alone = _optimize(objective, 20)
    feasible = [t for t in alone.trials if "infeasible" not in t.user_attrs]
    assert {t.user_attrs.get("promotion") for t in feasible} <= {"all", "duplicate"}
    pruned = _optimize(objective, 20, pruner=PromotionPruner(objective.metrics, rule="rank", n_warmup_trials=3))
    reasons = [t.user_attrs.get("promotion") for t in pruned.trials if "infeasible" not in t.user_attrs]
    assert "dominated" in reasons and "rank" in reasons and "all" not in reasons
    assert [t.state for t in pruned.trials if t.user_attrs.get("promotion") == "dominated"] == \
        [TrialState.PRUNED] * reasons.count("dominated")


def test_mismatched_pruner_and_directions_are_refused() -> None:
    with pytest.raises(ValueError, match="PromotionPruner reads"):
        _objective(pruner=PromotionPruner(["ttft_s", "throughput_tok_s"]))
    objective = _objective()
    study = optuna.create_study(directions=["maximize"])
    with pytest.raises(ValueError, match=r"directions=\['maximize', 'minimize'\]"):
        study.optimize(objective, n_trials=1)
    study = optuna.create_study(directions=objective.directions, pruner=PromotionPruner(["area_mm2", "ttft_s"]),
                                sampler=optuna.samplers.RandomSampler(seed=0))
    with pytest.raises(ValueError, match="PromotionPruner reads"):
        study.optimize(objective, n_trials=10)  # raised by the first feasible trial
    with pytest.raises(ValueError, match="model and workload, or pairs"):
        DseObjective.from_objects("llama-3-8b", search_space=SPACE, evaluator=FakeEvaluator())
    with pytest.raises(ValueError, match="not both"):
        DseObjective.from_objects("llama-3-8b", "chat", SPACE, pairs=[("a", "b")], evaluator=FakeEvaluator())


def test_search_space_in_python_three_ways_draws_the_same_designs(tmp_path: Path) -> None:
    built = SearchSpace(
        name="small", file="<python>",
        composition=Composition(24, (Part("mem", tuple(range(2, 9))), Part("tscs_p", tuple(range(1, 22))),
                                     Part("tscs_d", tuple(range(1, 22))))),
        scalars=(ScalarDim("memory", ("hbm3",)), ScalarDim("d2d_bw_gbps", (256, 512)),
                 ScalarDim("max_batch", (4, 8, 16))),
    )
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(SPACE, sort_keys=False))
    nokind = {k: v for k, v in SPACE.items() if k != "kind"}
    designs = []
    for space in (built, nokind, path):
        study = _optimize(_objective(search_space=space), 12)
        designs.append([trial_design(t) for t in study.trials])
    assert designs[0] == designs[1] == designs[2]
    with pytest.raises(ConfigError, match="slots"):
        SearchSpace.from_dict({**SPACE, "slots": 1})


def test_objectives_by_metric_names_and_python_constraints() -> None:
    names = _objective(objectives=["throughput_tok_s", "ttft_s"])
    assert names.spec.objectives.metrics == (METRICS["throughput_tok_s"], METRICS["ttft_s"])
    slo = ObjectiveSpec(name="slo", metrics=(METRICS["throughput_tok_s"], METRICS["ttft_s"]),
                        constraints=(Constraint(METRICS["ttft_s"], 0.5, upper=True),))
    study = _optimize(_objective(objectives=slo), 16)
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert done
    for t in done:  # constraint vector: [infeasibility, relative TTFT violation] on the simulated TTFT
        assert t.user_attrs["constraints"][1] == pytest.approx((t.user_attrs["sim_ttft_s"] - 0.5) / 0.5)
    with pytest.raises(ConfigError, match="objectives"):
        _objective(objectives=["throughput_tok_s", "nope"])


def test_from_yaml_leaves_budget_and_sampler_to_the_caller(tmp_path: Path) -> None:
    path = _study_file(tmp_path, n_trials=5, budget={"n_trials": 5, "max_simulations": 3})
    objective = DseObjective.from_yaml(path, evaluator=FakeEvaluator())
    assert objective.budget is None and objective.spec.plan == "greedy"  # calibrated needs the runner's callback
    study = _optimize(objective, 9)
    assert len(study.trials) == 9  # the file's n_trials=5 does not stop the caller's optimize
    assert len({t.user_attrs["design_key"] for t in study.trials if "sim_wall_s" in t.user_attrs}) <= 3


def test_real_evaluator_takes_model_and_workload_objects_and_options_objects() -> None:
    from hydra_opt.evaluate import Scenario, SimOptions
    from hydra_opt.evaluate.estimator import EstimatorOptions
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import load_workload

    sim, scn = SimOptions(sharing="equal"), Scenario(n_requests=8)
    ev = HydraEvaluator(simulate_options=sim, scenario=scn)
    assert ev.sim_options is sim and ev.scenario is scn  # one run description for estimate and simulate
    est = EstimatorOptions(n_samples=500)
    assert HydraEvaluator(estimate_options=est, simulate_options=sim)._est_opts is est

    wl_file = ROOT / "studies/workloads/quickstart-chat.yaml"
    space = ROOT / "search_spaces/quickstart.yaml"
    by_name = DseObjective.from_objects("llama-3-8b", str(wl_file), space, scenario=scn, pruner=False)
    by_object = DseObjective.from_objects(load_model("llama-3-8b"), load_workload(wl_file), space,
                                          scenario={"n_requests": 8}, pruner=False)
    assert by_object.spec.pair_keys == ["llama-3-8b/quickstart-chat"]
    rows = []
    for objective in (by_name, by_object):
        study = optuna.create_study(directions=objective.directions, sampler=optuna.samplers.RandomSampler(seed=2))
        study.optimize(objective, n_trials=1)
        t = study.trials[0]
        rows.append((t.state, t.values, t.user_attrs.get("est_throughput_tok_s"), t.user_attrs.get("infeasible")))
    assert rows[0] == rows[1]
    assert rows[0][0] == TrialState.COMPLETE and rows[0][1][0] > 0


def test_top_level_names_are_lazy() -> None:
    code = ("import sys, hydra_opt; assert 'optuna' not in sys.modules; import hydra_opt.dse as d; "
            "assert hydra_opt.DseObjective is d.DseObjective and hydra_opt.PromotionPruner is d.PromotionPruner; "
            "print(sorted(set(hydra_opt.__all__) - set(d.__all__)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "['__version__']"


def test_several_pairs_aggregate_as_the_objectives_say() -> None:
    worst = {"objectives": ["throughput_tok_s", "ttft_s"], "aggregate": "worst"}
    objective = DseObjective.from_objects(pairs=[("m1", "w1"), ("m2", "w2")], search_space=SPACE, pruner=False,
                                          objectives=worst, evaluator=FakeEvaluator())
    assert objective.spec.pair_keys == ["m1/w1", "m2/w2"]
    study = _optimize(objective, 6)
    t = next(t for t in study.trials if "est_pairs" in t.user_attrs)
    per_pair = t.user_attrs["est_pairs"]
    assert set(per_pair) == {"m1/w1", "m2/w2"}
    assert t.user_attrs["est_throughput_tok_s"] == min(p["throughput_tok_s"] for p in per_pair.values())


def test_grid_sampler_over_the_enumerated_space() -> None:
    space = SearchSpace.from_dict({**SPACE, "memory": {"count": [4, 6]}, "chiplets": {
        "tscs_p": {"min": 1, "max": 21}, "tscs_d": [2, 3]}}).with_encoding("enumerated")
    objective = _objective(search_space=space, pruner=False)
    study = _optimize(objective, 100, sampler=optuna.samplers.GridSampler(space.grid(), seed=0))
    designs = {json.dumps(t.user_attrs["design"], sort_keys=True) for t in study.trials}
    assert len(study.trials) == space.size() == len(designs) == 2 * 2 * 2 * 3  # every design once, then stop


def test_the_capacity_settings_are_part_of_a_capacity_study_fingerprint() -> None:
    # A study whose objectives read capacity_req_s resumed with another window or minimum of requests would mix
    # capacities measured two ways: its fingerprint changes with them; a study without the metric keeps its own.
    from hydra_opt.evaluate.slo import CapacitySettings

    cap = _objective(objectives={"objectives": ["capacity_req_s", "ttft_p90_s"]},
                     pruner=PromotionPruner(["capacity_req_s", "ttft_p90_s"], n_warmup_trials=4)).spec
    fp = cap.fingerprint()
    for other in (CapacitySettings(min_requests=20), CapacitySettings(window_s=60.0)):
        assert replace(cap, objectives=replace(cap.objectives, capacity=other)).fingerprint() != fp
    assert replace(cap, objectives=replace(cap.objectives, capacity=CapacitySettings())).fingerprint() == fp
    plain = _objective().spec
    assert not plain.objectives.needs_capacity
    assert replace(plain, objectives=replace(plain.objectives, capacity=CapacitySettings(min_requests=20))
                   ).fingerprint() == plain.fingerprint()
