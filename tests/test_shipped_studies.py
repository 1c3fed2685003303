"""Every shipped study validates and survives a tiny run; the accuracy-cost objective every design can produce.

A study that only fails mid-run (an objective the evaluator never produces, as ``accuracy_cost`` once did for
``studies/llama3_dynacore.yaml``; designs the system layer rejects; a broken artifact upload) fails here: each
``studies/*.yaml`` and each ``kind: study`` file of ``studies/paper/`` is validated by the CLI and run for 2 trials
on a temporary SQLite storage, both trials promoted (warm-up), with the study's scenario cut to 4 requests and no
horizon (served until done), so estimates are finite and simulations short; estimator and simulator read that one
scenario (paper preset etc.), and the study keeps its artifact setting. The
other ``studies/paper/*.yaml`` are ``kind: paper_experiment`` inputs of ``hydra_opt.experiments`` (tested there).
Whole file: about 50 s at load 5 on the 2-core machine.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import yaml

from hydra_opt.dse.objective import trial_design
from hydra_opt.cli.main import main
from hydra_opt.evaluate.evaluators import HydraEvaluator
from hydra_opt.hardware.dynacore.accuracy import design_accuracy_cost, pair_accuracy_cost
from hydra_opt.dse.storages import sqlite_url_for
from hydra_opt.dse.runner import RunOptions, run_study
from hydra_opt.dse.spec import StudySpec, load_study_spec
from hydra_opt.system.design import DesignPoint

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "studies"


def _kind(path: Path) -> str | None:
    data = yaml.safe_load(path.read_text())
    return data.get("kind") if isinstance(data, dict) else None


STUDY_FILES = sorted(STUDIES.glob("*.yaml")) + [p for p in sorted((STUDIES / "paper").glob("*.yaml")) if _kind(p) == "study"]

#: Requests of the tiny estimates and simulations.
TINY_REQUESTS = 4


def _tiny(spec: StudySpec, tmp_path: Path) -> StudySpec:
    scenario = {**(spec.scenario or {}), "n_requests": TINY_REQUESTS, "horizon_s": None}
    return dataclasses.replace(
        spec,
        storage=sqlite_url_for(tmp_path / "study.db"),
        n_trials=2,
        timeout_s=None,
        artifact_dir=(tmp_path / "artifacts") if spec.artifact_dir is not None else None,
        scenario=scenario,
        pruner=dataclasses.replace(spec.pruner, n_warmup_trials=max(spec.pruner.n_warmup_trials, 2)),
    )


def test_every_shipped_study_file_is_covered() -> None:
    assert all(_kind(p) == "study" for p in STUDIES.glob("*.yaml"))
    others = {p.name: _kind(p) for p in (STUDIES / "paper").glob("*.yaml") if p not in STUDY_FILES}
    assert set(others.values()) <= {"paper_experiment"}, others  # a new kind must be added to this test
    names = {p.name for p in STUDY_FILES}
    assert {"quickstart.yaml", "llama3_dynacore.yaml", "table5_quick.yaml"} <= names


@pytest.mark.parametrize("path", STUDY_FILES, ids=lambda p: str(p.relative_to(STUDIES)))
def test_shipped_study_validates_and_runs_tiny(path: Path, tmp_path: Path) -> None:
    assert main(["validate", str(path)]) == 0
    spec = _tiny(load_study_spec(path), tmp_path)
    study, summary = run_study(spec, RunOptions(quiet=True))
    assert summary.finished == 2 and summary.failed == 0, summary
    names = [m.name for m in spec.objectives.needed()]
    simulated = 0
    for t in study.trials:
        if "infeasible" in t.user_attrs:
            continue
        assert all(f"est_{n}" in t.user_attrs for n in names), (t.number, t.user_attrs)
        if "sim_wall_s" in t.user_attrs:
            simulated += 1
            assert all(f"sim_{n}" in t.user_attrs for n in names), (t.number, t.user_attrs)
        if "accuracy_cost" in names:  # the objective comes from the design, in estimates and simulations alike
            want = design_accuracy_cost(DesignPoint.from_dict(trial_design(t)))
            assert t.user_attrs["est_accuracy_cost"] == want
            assert t.user_attrs.get("sim_accuracy_cost", want) == want
    # Seeds are fixed, so this is deterministic; if a space change makes both first designs infeasible, raise
    # n_trials rather than losing the simulation path's coverage.
    assert simulated >= 1, f"{path.name}: no trial reached the simulator"


# -- the accuracy-cost objective (DynaCore Sec. 8.2 table, hydra_opt.evaluate.evaluators) ----------------------------
@pytest.mark.parametrize(
    "prefill,decode,want",
    [
        ("fp16", "fp16", 0.0),  # measured policies
        ("w8a8", "w4a16", 0.07),
        ("w8a8", "w8a8", 0.09),
        ("w4a8", "w4a8", 1.51),
        ("w4a16", "w4a16", 2.81),  # measured, although W4A8 (fewer activation bits) measured lower
        ("int8", "int8", 0.09),  # alias of W8A8
        ("bf16", "bf16", 0.0),
        ("fp8", "fp8", 0.09),  # assumed W8A8
        ("fp16", "w4a16", 0.07),  # unmeasured: best measured pair at most as precise in both phases
        ("fp16", "w8a8", 0.09),
        ("w8a8", "fp16", 0.07),
        ("fp16", "w4a8", 1.51),
    ],
)
def test_pair_accuracy_cost(prefill: str, decode: str, want: float) -> None:
    assert pair_accuracy_cost(prefill, decode) == want


def _design(chiplets: dict, **kw) -> DesignPoint:
    return DesignPoint.from_dict({"chiplets": chiplets, "n_mem": 4, **kw})


def test_design_accuracy_cost_takes_the_worst_prefill_decode_pair() -> None:
    assert design_accuracy_cost(_design({"tscs_p": 4, "tscs_d": 8})) == 0.09  # HYDRA int8
    assert design_accuracy_cost(_design({"tscs_p": 4, "tscs_d": 8}, precision="fp16")) == 0.0
    assert design_accuracy_cost(_design({"tscs_p": 4, "tscs_d": 8}, precision="w4a16")) == 2.81
    # tscs_p prefills at int8 and DynaCore decodes at W4A16: the paper's disaggregated pair.
    assert design_accuracy_cost(_design({"tscs_p": 4, "dynacore": 8})) == 0.07
    fp16_dc = {"prefill_precision": "fp16", "decode_precision": "fp16"}
    assert design_accuracy_cost(_design({"dynacore": 8}, dynacore=fp16_dc)) == 0.0
    # An int8 prefill chiplet still meets the FP16 decode: (int8, fp16) is bounded by the disaggregated 0.07.
    assert design_accuracy_cost(_design({"tscs_p": 4, "dynacore": 8}, dynacore=fp16_dc)) == 0.07
    # An int8 decode chiplet next to FP16 DynaCore chiplets: requests may decode at W8A8.
    assert design_accuracy_cost(_design({"tscs_d": 4, "dynacore": 8}, dynacore=fp16_dc)) == 0.09
    # DynaCore settings without DynaCore chiplets do not count; a study's simulate precision overrides the design's.
    assert design_accuracy_cost(_design({"tscs_p": 4, "tscs_d": 8}, dynacore=fp16_dc), precision="fp16") == 0.0


def test_evaluator_metrics_carry_accuracy_cost_with_the_forced_precision() -> None:
    from hydra_opt.evaluate.evaluators import _metrics_of

    d = _design({"tscs_p": 4, "tscs_d": 8}, precision="fp16")
    assert _metrics_of({"throughput_tok_s": 1.0}, d)["accuracy_cost"] == 0.0
    assert _metrics_of({"throughput_tok_s": 1.0}, d, "int8")["accuracy_cost"] == 0.09
    ev = HydraEvaluator(scenario={"preset": "paper"})
    assert ev.scenario.precision == "int8"  # the paper preset runs int8
    assert math.isclose(_metrics_of({"accuracy_cost": 0.5}, d)["accuracy_cost"], 0.5)  # a result's own value wins


def test_evaluator_exposes_the_resolved_scenario_and_options():
    from hydra_opt.evaluate import Scenario, SimOptions
    from hydra_opt.evaluate.estimator import EstimatorOptions

    ev = HydraEvaluator(scenario={"preset": "paper", "horizon_s": 30})
    assert ev.scenario == Scenario.paper(horizon_s=30) and ev.scenario.paper_preset
    assert ev.sim_options == SimOptions() and ev.est_options == EstimatorOptions()
    assert HydraEvaluator().scenario == Scenario()


def test_old_simulate_and_estimate_blocks_map_onto_one_scenario():
    """An older study's ``simulate: {preset: paper}`` + ``estimate: {...}`` is the same run as ``scenario:``."""
    from hydra_opt.config import ConfigError
    from hydra_opt.evaluate import Scenario

    old = HydraEvaluator(simulate_options={"preset": "paper", "horizon_s": 30, "sharing": "equal", "max_batch": 8},
                         estimate_options={"placement_preset": "paper", "ttft_from": "batch_start",
                                           "n_requests": 5000, "n_samples": 100})
    assert old.scenario == Scenario.paper(horizon_s=30)
    assert old.sim_options.sharing == "equal" and old.est_options.n_samples == 100
    assert old.design_overrides == {"max_batch": 8}
    with pytest.raises(ConfigError, match="disagrees"):
        HydraEvaluator(simulate_options={"horizon_s": 30}, estimate_options={"horizon_s": 20})
    with pytest.raises(ConfigError, match="warp_speed"):
        HydraEvaluator(simulate_options={"warp_speed": 9})
