"""Beyond-the-papers study (hydra_opt.experiments.beyond): accuracy cost, Pareto filter, a tiny run."""

from __future__ import annotations

import numpy as np
import pytest

from hydra_opt.experiments import beyond as B
from hydra_opt.experiments.common import Section


def test_design_accuracy_cost():
    tstc = {"chiplets": {"tscs_p": 4, "tscs_d": 4}}
    assert B.design_accuracy_cost(tstc) == pytest.approx(0.09)
    dyn = {"chiplets": {"dynacore": 8}, "dynacore": {"prefill_precision": "w8a8", "decode_precision": "w4a16"}}
    assert B.design_accuracy_cost(dyn) == pytest.approx(0.07)
    dyn["dynacore"] = {"prefill_precision": "fp16", "decode_precision": "fp16"}
    assert B.design_accuracy_cost(dyn) == 0.0
    # Mixed with TSTC chiplets: the worst quantisation applied anywhere.
    assert B.design_accuracy_cost({**dyn, "chiplets": {"dynacore": 4, "tscs_p": 2}}) == pytest.approx(0.09)
    # DynaCore settings do not matter when the design has no DynaCore chiplet.
    assert B.design_accuracy_cost({**dyn, "chiplets": {"dynacore": 0, "tscs_p": 2}}) == pytest.approx(0.09)


def test_pareto_mask():
    v = np.array([[10.0, 1.0], [8.0, 0.5], [9.0, 2.0], [10.0, 1.0], [5.0, 5.0]])
    m = B.pareto_mask(v, (True, False))
    # (9, 2) is dominated by (10, 1); (5, 5) by everything; duplicates both stay.
    assert m.tolist() == [True, True, False, True, False]


def test_tiny_run(tmp_path, monkeypatch):
    space = tmp_path / "space.yaml"
    space.write_text(
        "kind: search_space\nname: tiny\nslots: 24\n"
        "chiplets:\n  tscs_p: [4]\n  tscs_d: [0, 4]\n  dynacore: [0, 4]\n"
        "memory:\n  type: hbm3\n  count: {min: 2, max: 16}\n"
        "d2d_bw_gbps: [512]\nmax_batch: [16]\nplacement: cp\nbatching: static\nscheduler: static\n"
        "package: {grid_w: 6, grid_h: 4, slot_area_mm2: 144}\n"
        "dynacore:\n  core_size: 32\n  meu: [adaptive]\n  prefill_precision: [w8a8]\n  decode_precision: [w4a16]\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(B, "SPACE_FILE", str(space))
    monkeypatch.setattr(B, "QUICK_TRIALS", 8)
    s = B.run(True, tmp_path / "figs", seed=0)
    assert isinstance(s, Section) and s.key == "beyond"
    assert (tmp_path / "figs" / s.figures[0]).stat().st_size > 1000
    rows = {r.item: r for r in s.rows}
    assert rows["trials (designs sampled)"].ours == 8
    # The TSTC-only reference holds the one composition with tscs_d = 4 and dynacore = 0.
    assert "all 1 TSTC-only designs" in rows["unique feasible designs estimated"].comment
    assert rows["3-objective front: designs / with DynaCore chiplets"].ours >= 1
    assert all(r.paper is None for r in s.rows)  # a new question: no paper values, nothing flagged
