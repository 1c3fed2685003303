"""Samplers by name: constraints wiring for every sampler kind, argument validation, per-worker seeds."""

from __future__ import annotations

import importlib.util
import warnings

import optuna
import pytest

from hydra_opt.config import ConfigError
from hydra_opt.dse.samplers import ConstraintRecordingSampler, SamplerSpec, make_sampler


@pytest.mark.parametrize("name", ["tpe", "nsga2", "nsga3", "random", "qmc", "bruteforce", "TPESampler"])
def test_every_sampler_records_the_constraints_attribute(name: str) -> None:
    sampler = make_sampler(SamplerSpec(name), seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)

    def objective(t: optuna.Trial):
        x = t.suggest_int("x", 0, 3)
        t.set_user_attr("constraints", [float(x == 0)])
        if x == 1:
            raise optuna.TrialPruned()
        return float(x), float(-x)

    study.optimize(objective, n_trials=6, catch=())
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)):
        assert list(t.system_attrs["constraints"]) == [float(t.params["x"] == 0)]  # what optuna-dashboard reads
    wrapped = isinstance(sampler, ConstraintRecordingSampler)
    assert wrapped == (name in ("random", "qmc", "bruteforce"))


@pytest.mark.parametrize(
    "name,args,key",
    [("annealing", {}, "sampler.name"), ("tpe", {"n_startup": 3}, "sampler.args.n_startup"),
     ("tpe", {"seed": 1}, "sampler.args.seed"), ("nsga2", {"constraints_func": None}, "sampler.args.constraints_func")],
)
def test_bad_sampler_specs_are_located(name: str, args: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        SamplerSpec(name, args, file="s.yaml")
    assert info.value.key == key and info.value.file == "s.yaml"


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed")
def test_gp_without_torch_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="PyTorch"):
        SamplerSpec("gp", file="s.yaml")


def test_seeded_samplers_are_reproducible() -> None:
    def run(seed: int) -> list[int]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study = optuna.create_study(sampler=make_sampler(SamplerSpec("tpe", {"n_startup_trials": 3}), seed=seed))
        study.optimize(lambda t: float(t.suggest_int("x", 0, 100)), n_trials=8)
        return [t.params["x"] for t in study.trials]

    assert run(5) == run(5) and run(5) != run(6)
