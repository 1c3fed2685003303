"""Pure helpers of the Fig. 8 / Table V reproductions: fronts, B*/M_T, sampling, candidate selection, the
artifact's published fronts, Spearman over published designs, and Table V's top-k / recovery (no simulation)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hydra_opt.experiments.fronts import (
    artifact_design,
    artifact_front_path,
    bstar_mt,
    front_mask,
    load_artifact_front,
    pick_along_front,
    select_candidates,
    spearman,
    stratified_sample,
    stratum_key,
)
from hydra_opt.experiments.hydra_table5 import recovery_of, top_k


def test_front_mask_excludes_dominated_and_unserved():
    tp = np.array([100.0, 200.0, 150.0, 0.0, 300.0, np.nan])
    ttft = np.array([1.0, 2.0, 3.0, 0.1, 5.0, 0.5])
    m = front_mask(tp, ttft)
    # 150 @ 3 s is dominated by 200 @ 2 s; 0 tok/s and NaN never count, even with the lowest TTFT.
    assert m.tolist() == [True, True, False, False, True, False]


def test_bstar_mt_uses_the_floor():
    tp = np.array([100.0, 200.0, 300.0, 400.0])
    ttft = np.array([0.5, 1.0, 2.0, 8.0])
    b, m = bstar_mt(tp, ttft)
    assert m == 3
    # mean = 250: only 300 and 400 qualify; 300/2 = 150 > 400/8 = 50.
    assert b == 2
    # A lower floor lets the 100 tok/s @ 0.5 s design (ratio 200) win.
    assert bstar_mt(tp, ttft, average_tp=50.0)[0] == 0
    assert bstar_mt(np.array([0.0]), np.array([np.nan])) == (-1, -1)


def _designs():
    return [{"max_batch": b, "d2d_bw_gbps": bw, "n_mem": m, "chiplets": {"tscs_p": p, "tscs_d": 24 - m - p}}
            for b in (2, 8) for bw in (256, 512) for m in (2, 6, 10) for p in (1, 3, 5)]


def test_stratified_sample_covers_strata_and_is_seeded():
    ds = _designs()
    n_strata = len({stratum_key(d) for d in ds})
    idx = stratified_sample(ds, n_strata, seed=0)
    assert len(idx) == n_strata == len(set(idx))
    assert {stratum_key(ds[i]) for i in idx} == {stratum_key(d) for d in ds}  # one per stratum
    assert idx == stratified_sample(ds, n_strata, seed=0)
    assert idx != stratified_sample(ds, n_strata, seed=1)
    assert len(stratified_sample(ds, 10_000)) == len(ds)


def test_pick_along_front_keeps_both_ends():
    tp = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])
    picks = pick_along_front(tp, tp / 10, np.arange(6), 3)
    assert picks[0] == 0 and picks[-1] == 5 and len(picks) == 3


def test_select_candidates_starts_with_estimated_bstar_and_mt():
    est_tp = np.array([100.0, 200.0, 300.0, 400.0, 150.0, 250.0, np.nan])
    est_tt = np.array([0.5, 1.0, 2.0, 8.0, 3.0, 4.0, 1.0])
    picks = select_candidates(est_tp, est_tt, 3)
    b, m = bstar_mt(est_tp, est_tt)
    assert {b, m} <= set(picks) and len(picks) == 3
    assert 6 not in picks  # not estimable → never proposed
    # More picks than the front holds: the next layer is used, still no duplicates.
    many = select_candidates(est_tp, est_tt, 6)
    assert len(many) == len(set(many)) == 6


def test_spearman_over_published_designs_tiny_case():
    published = [100.0, 200.0, 300.0, 400.0]
    assert spearman(published, [1.0, 2.0, 3.0, 4.0]) == pytest.approx(1.0)
    assert spearman(published, [4.0, 3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    assert spearman(published, [1.0, 3.0, 2.0, np.nan]) == pytest.approx(0.5)  # 3 finite pairs
    assert math.isnan(spearman([1.0, 2.0], [1.0, 2.0]))


def test_artifact_row_to_design_and_published_front(tmp_path: Path):
    row = {"batchsize": "16", "Num M": "6", "Num Mp": "0", "Num Md": "0", "Num Ap": "6", "Num Ad": "12",
           "NoI_bw(GBps)": "384", "tokens_per_sec": "1189.69", "TTFT(s)": "2.09", "placer": "bw", "is_pareto": "True"}
    d = artifact_design(row)
    assert d["chiplets"] == {"tscs_d": 12, "tscs_p": 6} and d["n_mem"] == 6 and d["placement"] == "cp"
    assert sum(d["chiplets"].values()) + d["n_mem"] == 24
    from hydra_opt.system.design import DesignPoint

    assert DesignPoint.from_dict(d).max_batch == 16
    csv_path = tmp_path / "front.csv"
    cols = list(row)
    lines = [",".join(cols), ",".join(row[c] for c in cols),
             ",".join({**row, "batchsize": "2", "tokens_per_sec": "50", "is_pareto": "False"}[c] for c in cols)]
    csv_path.write_text("\n".join(lines) + "\n")
    pts = load_artifact_front(csv_path)
    assert len(pts) == 1 and pts[0].throughput_tok_s == pytest.approx(1189.69)
    assert artifact_front_path("nemotron-h-4b@hydra", "hydra-chat", tmp_path) is None
    lw = artifact_front_path("llama-3-8b@hydra", "hydra-longwriter", tmp_path)
    assert lw.parent == tmp_path and lw.name.endswith("LLAMA3-LW_bw_static_static.csv")


def test_table5_top_k_and_recovery():
    scores = np.array([5.0, np.nan, 9.0, 9.0, 1.0])
    assert top_k(scores, 2) == [2, 3]
    assert top_k(scores, 10) == [2, 3, 0, 4]
    assert recovery_of([50.0, np.nan, 80.0], 100.0) == pytest.approx(0.8)
    assert recovery_of([], 100.0) == 0.0


def test_ladder_summary_groups_offset_and_agreeing_fronts():
    from hydra_opt.experiments.hydra_fig8 import _ladder_summary

    def art(tag, pub, ours, last):
        return dict(tag=tag, pub_mt_tp=pub, ours_at_pub_mt_tp=ours, ladder={"steps": [("ours", ours, 1.0),
                                                                                    ("prefill_fit", last, 2.0)]})

    text = _ladder_summary([art("A", 100.0, 150.0, 95.0), art("B", 100.0, 110.0, 60.0), art("C", 100.0, 60.0, 101.0)])
    assert "on the 2 published M_T designs" in text and "×0.95–×1.01 (A ×0.95, C ×1.01)" in text
    assert "on the 1 that already agree within 25 % at ×0.60–×0.60 (B ×0.60)" in text


def test_artifact_comparison_is_skipped_without_the_shared_data(tmp_path: Path) -> None:
    from hydra_opt.experiments.hydra_fig8 import compare_artifact
    from hydra_opt.experiments.paths import ExperimentPaths

    paths = ExperimentPaths.default(Path(__file__).resolve().parents[1], tmp_path / "no_shared")
    assert compare_artifact("llama3", "hydra-chat", n_designs=2, horizon_s=1.0, log=lambda *a: None,
                            paths=paths) is None
