"""The study runner with a closed-form evaluator: estimate → promote → simulate, constraints, resume-to-budget,
refusing a changed study, per-worker seeds, reports and the CLI's error handling."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import optuna
import pytest
import yaml
from optuna.trial import TrialState

from hydra_opt.dse.objective import trial_design
from hydra_opt.config import ConfigError
from hydra_opt.dse.report import front_rows, write_report, export_design
from hydra_opt.evaluate.front import hypervolume_2d, select_bstar_mt
from hydra_opt.dse.samplers import worker_seed
from hydra_opt.dse.storages import redact_url
from hydra_opt.dse.runner import RunOptions, run_study
from hydra_opt.dse.spec import load_study_spec

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent

SPACE = {
    "kind": "search_space",
    "name": "small",
    "slots": 24,
    "chiplets": {"tscs_p": {"min": 1, "max": 21}, "tscs_d": {"min": 1, "max": 21}},
    "memory": {"count": {"min": 2, "max": 8}},  # n_mem = 2 is infeasible for the fake evaluator
    "d2d_bw_gbps": [256, 512],
    "max_batch": [4, 8, 16],
}


def _study_file(tmp_path: Path, name: str = "s", sampler="tpe", n_trials: int = 20, space=None, **extra) -> Path:
    doc = {
        "kind": "study",
        "name": name,
        "model": "llama-3-8b",
        "workload": "chat",
        "search_space": space or SPACE,
        "sampler": sampler,
        "pruner": {"n_warmup_trials": 4, "epsilon": 0.02},
        "budget": {"n_trials": n_trials},
        "evaluator": "dse_fakes:make",
        "seed": 3,
    }
    doc.update(extra)
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def _run(path: Path, **opts) -> tuple[optuna.Study, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_study(load_study_spec(path), RunOptions(**opts))


def _journal(tmp_path: Path) -> str:
    # Journal-file storage: the same Optuna semantics as SQLite, ~6x less overhead per trial on a loaded machine.
    return f"journal:///{tmp_path / 'j.log'}"


def test_trials_are_estimated_promoted_and_simulated(tmp_path: Path) -> None:
    study, summary = _run(_study_file(tmp_path, n_trials=30, storage=_journal(tmp_path)))
    trials = study.get_trials(deepcopy=False)
    assert summary.finished == 30 == sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
    assert study.metric_names == ["throughput [tok/s]", "TTFT [s]"]
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    pruned = [t for t in trials if t.state == TrialState.PRUNED and "infeasible" not in t.user_attrs]
    infeasible = [t for t in trials if "infeasible" in t.user_attrs]
    assert complete and pruned, "the pruner must both promote and prune on this space"
    for t in complete:
        assert t.values == [t.user_attrs["sim_throughput_tok_s"], t.user_attrs["sim_ttft_s"]]
        assert "est_throughput_tok_s" in t.user_attrs and t.user_attrs["promotion"] in ("warmup", "rank", "epsilon")
        assert "duplicate_of" not in t.user_attrs, "a duplicate is no second front candidate (dashboard best trials)"
        assert t.system_attrs["constraints"] == (0.0,) or list(t.system_attrs["constraints"]) == [0.0]
    by_number = {t.number: t for t in trials}
    for t in pruned:
        if t.user_attrs["promotion"] == "duplicate":  # PRUNED, with the simulated trial's values copied
            original = by_number[t.user_attrs["duplicate_of"]]
            assert original.state == TrialState.COMPLETE and trial_design(original) == trial_design(t)
            assert t.user_attrs["sim_ttft_s"] == original.user_attrs["sim_ttft_s"]
            continue
        assert t.user_attrs["promotion"] == "dominated"
        assert "est_ttft_s" in t.user_attrs and "sim_ttft_s" not in t.user_attrs
    for t in infeasible:
        assert trial_design(t)["n_mem"] == 2
        assert list(t.system_attrs["constraints"])[0] > 0  # what optuna-dashboard reads
    # The first n_warmup_trials feasible estimated trials are always promoted.
    simulated = [t for t in complete if "sim_wall_s" in t.user_attrs]
    assert summary.promotion_rate == pytest.approx(len(simulated) / (len(complete) + len(pruned)))


def test_constraints_recorded_with_a_sampler_without_constraints_func(tmp_path: Path) -> None:
    study, _ = _run(_study_file(tmp_path, sampler="random", n_trials=25, seed=5, storage=_journal(tmp_path)))
    finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
    assert all("constraints" in t.system_attrs for t in finished)
    assert any(list(t.system_attrs["constraints"])[0] > 0 for t in finished)


def test_resume_stops_at_the_total_budget(tmp_path: Path) -> None:
    path = _study_file(tmp_path, n_trials=6)  # default storage: SQLite next to the study file
    study, s1 = _run(path)
    assert s1.finished == 6 and s1.finished_before == 0 and (tmp_path / "s.db").exists()
    study, s2 = _run(path)  # same command again: nothing more to do
    assert s2.finished_before == 6 and s2.finished == 6
    study, s3 = _run(path, n_trials=9)  # a larger total budget: exactly 3 more
    assert s3.finished == 9
    numbers = [t.number for t in study.get_trials(deepcopy=False)]
    assert numbers == sorted(set(numbers))


def test_a_changed_study_is_not_resumed(tmp_path: Path) -> None:
    path = _study_file(tmp_path, n_trials=3)
    _run(path)
    other = dict(SPACE, max_batch=[2, 4])
    doc = yaml.safe_load(path.read_text())
    doc["search_space"] = other
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match="different search space"):
        _run(path)


def test_invalid_study_creates_no_storage(tmp_path: Path) -> None:
    path = _study_file(tmp_path, n_trials=3, budget_typo=1)
    with pytest.raises(ConfigError) as info:
        load_study_spec(path)
    assert info.value.key == "budget_typo" and str(path) in info.value.format()
    assert not (tmp_path / "s.db").exists()


def test_grid_sampler_study_enumerates(tmp_path: Path) -> None:
    space = dict(SPACE, chiplets={"tscs_p": {"min": 1, "max": 2}, "tscs_d": {"min": 1, "max": 21}},
                 memory={"count": {"min": 3, "max": 4}}, max_batch=8, d2d_bw_gbps=256)
    study, s = _run(_study_file(tmp_path, sampler="grid", n_trials=50, space=space, pruner={"enabled": False},
                                storage=_journal(tmp_path)))
    keys = {t.user_attrs["design_key"] for t in study.get_trials(deepcopy=False)}
    assert s.finished == 4 and len(keys) == 4  # (mem 3: p 1|2; mem 4: p 1|2) — the grid ends the study


def test_worker_seeds() -> None:
    seeds = {worker_seed(0, i) for i in range(64)}
    assert len(seeds) == 64
    assert worker_seed(7, 3, 10) == worker_seed(7, 3, 10)
    assert worker_seed(7, 3, 10) != worker_seed(7, 3, 11)  # a resumed run does not replay the first run


@pytest.mark.parametrize(
    "text,expect",
    [
        ("postgresql://alice:s3cret@db:5432/test", "postgresql://alice:***@db:5432/test"),
        ("mysql+pymysql://root:p%40ss@127.0.0.1/test", "mysql+pymysql://root:***@127.0.0.1/test"),
        ("redis://:tok@host:6379/0", "redis://:***@host:6379/0"),
        ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
        ("postgresql://h/db?user=a&password=zz&x=1", "postgresql://h/db?user=a&password=***&x=1"),
        ("error: could not connect to postgresql://u:pw@h/db", "error: could not connect to postgresql://u:***@h/db"),
    ],
)
def test_redact_url(text: str, expect: str) -> None:
    assert redact_url(text) == expect


def test_bstar_and_mt_by_hand() -> None:
    tp = np.array([100.0, 200.0, 300.0, 150.0, 50.0])
    ttft = np.array([1.0, 1.5, 6.0, 3.0, 0.5])
    front = np.array([True, True, True, False, True])
    # average tp = 160; front designs above it: 200 (ratio 133) and 300 (ratio 50) -> B* = index 1; M_T = index 2.
    assert select_bstar_mt(tp, ttft, front) == (1, 2)


def test_hypervolume_2d_closed_form() -> None:
    # Maximise x, minimise y; reference (0, 10). Points (2, 4) and (4, 6): union of [0,2]x[4,10] and [0,4]x[6,10].
    pts = np.array([[2.0, 4.0], [4.0, 6.0]])
    assert hypervolume_2d(pts, (0.0, 10.0), (True, False)) == pytest.approx(2 * 6 + 2 * 4)
    assert hypervolume_2d(np.array([[5.0, 11.0]]), (0.0, 10.0), (True, False)) == 0.0


def test_report_and_export(tmp_path: Path) -> None:
    study, _ = _run(_study_file(tmp_path, n_trials=20, storage=_journal(tmp_path)))
    rows, facts = front_rows(study)
    assert rows and facts["mt"] is not None and facts["bstar"] is not None
    best_tp = max(t.values[0] for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    assert next(r for r in rows if r.number == facts["mt"]).values[0] == best_tp
    paths = write_report(study, tmp_path / "out")
    for p in paths.values():
        assert p.exists() and p.stat().st_size > 0
    assert "B*" in paths["summary"].read_text() and "M_T" in paths["front"].read_text()
    out = export_design(study, facts["mt"], tmp_path / "mt.yaml")
    from hydra_opt.system.design import load_design

    d = load_design(out)
    assert d.n_mem == next(t for t in study.trials if t.number == facts["mt"]).system_attrs["design"]["n_mem"]
    with pytest.raises(ConfigError):
        export_design(study, 10_000, tmp_path / "none.yaml")


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    from hydra_opt.cli.main import main

    code = main(["run", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_runs_and_prints_front_and_dashboard(tmp_path: Path, capsys) -> None:
    path = _study_file(tmp_path, n_trials=8)
    code, out, err = _cli(capsys, str(path), "--quiet")
    assert code == 0, err
    assert "M_T" in out and "optuna-dashboard sqlite:///" in out and "--artifact-dir" in out
    code, out, err = _cli(capsys, str(path), "--n-trials", "10")
    assert code == 0 and "promoted" in out and "tok/s" in out and "finished trials: 10 of budget 10" in out


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--n-trials", "abc"], "--n-trials"),
        (["--n-trials", "0"], "--n-trials"),
        (["--timeout", "nan"], "--timeout"),
        (["--workers", "100000"], "--workers"),
        (["--storage", "ftp://x/y"], "--storage"),
        (["--storage", "postgresql://alice:hunter2@127.0.0.1:1/test"], "storage"),
    ],
)
def test_cli_bad_arguments_exit_2_without_secrets(tmp_path: Path, capsys, args: list[str], fragment: str) -> None:
    path = _study_file(tmp_path, n_trials=3)
    code, out, err = _cli(capsys, str(path), *args)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hydra_opt: error:") and fragment in lines[0]
    assert "hunter2" not in out + err
    assert not (tmp_path / "s.db").exists()


@pytest.mark.slow
def test_two_workers_share_the_budget_exactly(tmp_path: Path) -> None:
    path = _study_file(tmp_path, n_trials=16)
    study, s = _run(path, workers=2)
    trials = study.get_trials(deepcopy=False)
    assert s.finished == 16
    assert sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials) == 16
    assert len({t.number for t in trials}) == len(trials)


def test_simulation_cap(tmp_path: Path) -> None:
    path = _study_file(tmp_path, n_trials=16, storage=_journal(tmp_path), budget={"n_trials": 16, "max_simulations": 3, "plan": "greedy"})
    study, s = _run(path)
    trials = study.get_trials(deepcopy=False)
    simulated = {t.user_attrs["design_key"] for t in trials if "sim_wall_s" in t.user_attrs}
    assert s.finished == 16 and len(simulated) == 3
    assert any(t.user_attrs.get("promotion") == "simulation-budget" for t in trials)


def test_estimate_only_phase_then_revisit_the_estimated_front(tmp_path: Path) -> None:
    path = _study_file(tmp_path, n_trials=24, storage=_journal(tmp_path),
                       pruner={"rule": "rank", "n_warmup_trials": 0, "min_estimates": 12})
    study, s = _run(path)
    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    assert s.finished == 24
    collecting = [t for t in trials if t.user_attrs.get("promotion") == "collecting"]
    assert collecting and all("sim_wall_s" not in t.user_attrs for t in collecting)
    revisits = [t for t in trials if "revisit_of" in t.user_attrs]
    assert revisits, "collected designs on the estimated front are proposed again"
    by_number = {t.number: t for t in trials}
    for t in revisits:
        assert trial_design(t) == trial_design(by_number[t.user_attrs["revisit_of"]])
