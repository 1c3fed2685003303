"""The product path end to end with the real estimator and simulator (slow: a few simulations).

A study's COMPLETE trial holds exactly what ``simulate`` gives for its exported design; estimates are stored for
every feasible trial; artifacts (design, NoI heatmap, per-request CSV) are uploaded for promoted trials."""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_real_study_values_reproduce_with_simulate(tmp_path: Path) -> None:
    from optuna.trial import TrialState

    from hydra_opt.dse.report import export_design
    from hydra_opt.dse.runner import RunOptions, run_study
    from hydra_opt.dse.spec import load_study_spec
    from hydra_opt.evaluate import simulate
    from hydra_opt.system.design import load_design

    doc = yaml.safe_load((ROOT / "studies" / "quickstart.yaml").read_text())
    doc.update(
        search_space=str(ROOT / "search_spaces" / "quickstart.yaml"),
        objectives=str(ROOT / "objectives" / "throughput_ttft.yaml"),
        workload=str(ROOT / "studies" / "workloads" / "quickstart-chat.yaml"),
        budget={"n_trials": 3},
        pruner="none",
        sampler="random",
    )
    path = tmp_path / "real.yaml"
    path.write_text(yaml.safe_dump(doc))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study, summary = run_study(load_study_spec(path), RunOptions())
    assert summary.finished == 3
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    assert done, "pruner: none simulates every feasible trial"
    t = done[0]
    assert t.user_attrs["est_throughput_tok_s"] > 0 and t.user_attrs["est_ttft_s"] > 0
    design = load_design(export_design(study, t.number, tmp_path / "d.yaml"))
    r = simulate(design, "llama-3-8b", str(ROOT / "studies" / "workloads" / "quickstart-chat.yaml"), seed=0)
    assert t.values == [pytest.approx(r.throughput_tok_s, rel=1e-12), pytest.approx(r.ttft_mean_s, rel=1e-12)]
    art = list((tmp_path / "artifacts" / doc["name"]).iterdir())
    heads = [p.read_bytes()[:4] for p in art]
    assert any(h.startswith(b"\x89PNG") for h in heads), "NoI heatmap uploaded"
    gz = [p for p, h in zip(art, heads) if h.startswith(b"\x1f\x8b")]
    assert gz and gzip.decompress(gz[0].read_bytes()).count(b"\n") > 10, "per-request CSV uploaded"
