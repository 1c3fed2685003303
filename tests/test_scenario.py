"""One run description (issue 16 steps 1–2): the scenario, design overrides, ``estimate --paper``, materialise.

* ``--max-batch 64`` is the same run as a design file with ``max_batch: 64``, for ``simulate`` and ``estimate``
  (every metric; before the fix the override reached only the engine, not placement and Ω).
* In a study trial the estimator and the simulator receive the same ``Scenario`` object.
* ``estimate --paper`` equals the study's estimate (``scenario: {preset: paper}``) for every Fig. 10 design.
* The estimator reads the scenario's token budget, library preset and fixed arrivals (it once hard-coded them).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from hydra_opt.cli.main import main
from hydra_opt.config import ConfigError
from hydra_opt.evaluate import Scenario
from hydra_opt.evaluate.evaluators import HydraEvaluator
from hydra_opt.system.design import load_design

ROOT = Path(__file__).resolve().parents[1]
FIG10 = sorted((ROOT / "studies" / "designs").glob("fig10-*.yaml"))
B64 = ROOT / "studies" / "designs" / "fig10-nemotron-h-4b-chat-mt-cp.yaml"  # CP, max_batch 64
MODEL, WORKLOAD = "nemotron-h-4b@hydra", "hydra-chat"


def _json(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    out.pop("wall_s", None)
    return out


def _other_batch(tmp_path: Path, path: Path, max_batch: int) -> Path:
    data = yaml.safe_load(path.read_text())
    assert data["max_batch"] != max_batch
    data["max_batch"] = max_batch
    p = tmp_path / path.name
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.mark.parametrize("cmd", ["estimate", "simulate"])
def test_max_batch_override_is_the_design_field(cmd: str, tmp_path: Path, capsys) -> None:
    assert load_design(B64).max_batch == 64
    other = _other_batch(tmp_path, B64, 4)
    run = [cmd, "--model", MODEL, "--workload", WORKLOAD, "--paper", "--json"]
    if cmd == "simulate":
        run += ["--seconds", "3", "--requests", "300"]
    ref = _json(capsys, run + ["--design", str(B64)])
    got = _json(capsys, run + ["--design", str(other), "--max-batch", "64"])
    assert got == ref  # every metric, and for simulate the placement/Ω record (options.build) too
    if cmd == "simulate":
        assert ref["tokens_emitted"] > 0  # a run that says something
    plain = _json(capsys, run + ["--design", str(other)])
    assert plain != ref  # the override changes the run (so the equality above is not vacuous)


def test_override_rejects_bad_values(capsys) -> None:
    assert main(["estimate", "--design", str(B64), "--model", MODEL, "--workload", WORKLOAD, "--max-batch", "0"]) == 2
    assert "--max-batch" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="overridable"):
        load_design(B64).with_overrides({"n_mem": 2})


def test_study_trial_gives_both_evaluators_the_same_scenario(tmp_path: Path, monkeypatch) -> None:
    import hydra_opt.evaluate as ev_mod
    import hydra_opt.evaluate.estimator as est_mod
    from hydra_opt.dse.storages import sqlite_url_for
    from hydra_opt.dse.runner import RunOptions, run_study
    from hydra_opt.dse.spec import load_study_spec

    seen: dict[str, list] = {"estimate": [], "simulate": []}
    real_est, real_sim = est_mod.estimate, ev_mod.simulate

    def est(*a, scenario=None, **k):
        seen["estimate"].append(scenario)
        return real_est(*a, scenario=scenario, **k)

    def sim(*a, scenario=None, **k):
        seen["simulate"].append(scenario)
        return real_sim(*a, scenario=scenario, **k)

    monkeypatch.setattr(est_mod, "estimate", est)
    monkeypatch.setattr(ev_mod, "simulate", sim)
    spec = load_study_spec(ROOT / "studies" / "paper" / "table5_quick.yaml")
    assert spec.scenario == {"preset": "paper", "horizon_s": 10}
    spec = dataclasses.replace(spec, storage=sqlite_url_for(tmp_path / "s.db"), n_trials=2, timeout_s=None,
                               artifact_dir=None, scenario={**spec.scenario, "n_requests": 4, "horizon_s": None},
                               pruner=dataclasses.replace(spec.pruner, n_warmup_trials=2))
    _, summary = run_study(spec, RunOptions(quiet=True))
    assert summary.finished == 2
    assert seen["estimate"] and seen["simulate"], seen
    first = seen["estimate"][0]
    assert isinstance(first, Scenario) and first.paper_preset and first.n_requests == 4
    assert all(s is first for s in seen["estimate"] + seen["simulate"])


@pytest.mark.parametrize("path", FIG10, ids=lambda p: p.stem)
def test_cli_estimate_paper_equals_the_study_estimate(path: Path, capsys) -> None:
    ev = HydraEvaluator(scenario={"preset": "paper"})
    dsg = load_design(path)
    wl = "hydra-" + {"lw": "longwriter"}.get(path.stem.split("-")[4], path.stem.split("-")[4])
    model, workload = ev.load(MODEL, wl)
    study = ev.estimate(ev.design(dsg.to_dict()), model, workload)
    cli = _json(capsys, ["estimate", "--paper", "--json", "--design", str(path), "--model", MODEL, "--workload", wl])
    assert cli["scenario"] == Scenario.paper().to_dict()
    for k in ("throughput_tok_s", "ttft_mean_s", "tpot_mean_s", "capacity_tok_s"):
        assert float(cli[k]) == study[k] or (study[k] != study[k] and cli[k] == "nan"), k


def test_estimate_and_simulate_print_the_same_header(capsys) -> None:
    argv = ["--design", str(B64), "--model", MODEL, "--workload", WORKLOAD, "--paper", "--seconds", "1",
            "--requests", "10", "--max-batch", "8"]
    assert main(["estimate", *argv]) == 0
    est = capsys.readouterr().out.splitlines()[:2]
    assert main(["simulate", *argv]) == 0
    sim = capsys.readouterr().out.splitlines()[:2]
    assert est == sim
    assert "max_batch 8" in est[0] and est[1].startswith("scenario paper: horizon 1 s, requests 10")


def test_estimator_reads_the_scenario_it_once_ignored() -> None:
    from hydra_opt.evaluate import estimate

    d = load_design(ROOT / "studies" / "designs" / "fig10-nemotron-h-4b-chat-bstar-cp.yaml").with_overrides(
        {"batching": "continuous", "scheduler": "fcfs"})
    base = Scenario(horizon_s=30.0, n_requests=400)
    e0 = estimate(d, MODEL, "chat", scenario=base)
    # Fixed arrivals every 10 ms replace the workload's (Poisson, ~0.8 req/s) arrivals, as in the simulator.
    fixed = estimate(d, MODEL, "chat", scenario=base.with_(arrival_interval_s=0.01))
    assert fixed.diagnostics["arrival_per_s"] == pytest.approx(100.0)
    assert e0.diagnostics["arrival_per_s"] < 5.0
    # The token budget is the scenario's (the estimator once hard-coded 8192): the default equals an explicit 8192,
    # and with chunked prefill a 256-token budget cuts ArXiv prompts (~2.7k tokens) into ~11 chunks, one a pass,
    # each paying the pass's weight streaming again: the first token comes later.
    d64 = load_design(B64).with_overrides({"batching": "chunked", "scheduler": "fcfs"})
    big = estimate(d64, MODEL, "arxiv", scenario=base)
    assert estimate(d64, MODEL, "arxiv", scenario=base.with_(token_budget=8192)).to_dict() == big.to_dict()
    small = estimate(d64, MODEL, "arxiv", scenario=base.with_(token_budget=256))
    assert small.ttft_mean_s > 1.1 * big.ttft_mean_s


def test_scenario_block_errors_are_located() -> None:
    with pytest.raises(ConfigError, match="scenario.warp"):
        HydraEvaluator(scenario={"warp": 1}, file="s.yaml")
    with pytest.raises(ConfigError, match="scenario.preset"):
        HydraEvaluator(scenario={"preset": "fancy"}, file="s.yaml")
    with pytest.raises(ConfigError, match="window"):
        Scenario(window="forever")


@pytest.mark.parametrize("case", ["scenario_unknown_key", "scenario_disagrees", "simulate_unknown_option"])
def test_validate_checks_the_run_description(case: str, capsys) -> None:
    path = ROOT / "tests" / "fixtures" / "hostile" / f"{case}.yaml"
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{case}.yaml" in err[0]


def test_materialise_is_what_every_consumer_prices() -> None:
    from hydra_opt.hardware.chiplets import ChipletLibrary
    from hydra_opt.system.materialise import materialise

    d = load_design(B64)
    hw = materialise(d)
    assert hw.names == tuple(n for n, k in d.counts if k > 0)
    lib = ChipletLibrary.default()
    for (name, _), ct in zip(hw.counts, hw.chiplets):
        assert ct == lib.get(name, d.d2d_bw_gbps, d.slot_area_mm2, settings=d.dynacore)
    mesh = hw.mesh()
    assert (mesh.width, mesh.height, mesh.link_bw_gbps) == (d.grid_w, d.grid_h, d.d2d_bw_gbps)
    assert materialise(d, ChipletLibrary.default("paper")).library.preset == "paper"
