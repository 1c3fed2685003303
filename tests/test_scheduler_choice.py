"""benchmarks/scheduler_choice.py: the elastic-vs-static agreement it reports, on hand-made designs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import scheduler_choice as sc  # noqa: E402


def _frame(sim_el, sim_st, est_el, est_st):
    n = len(sim_el)
    return pd.DataFrame(dict(model=["m"] * n, dataset=["d"] * n, policy=["continuous"] * n,
                             design=[f"x{i}" for i in range(n)], sim_capacity_req_s_el=sim_el,
                             sim_capacity_req_s_st=sim_st, est_capacity_req_s_el=est_el, est_capacity_req_s_st=est_st))


def test_agreement_counts_sides_of_one_and_simulated_ties():
    # Designs: elastic wins in both; static wins in both; sim elastic wins, est static; a simulated tie (1.02).
    m = _frame([2.0, 1.0, 3.0, 1.02], [1.0, 2.0, 1.0, 1.0], [4.0, 1.0, 1.0, 1.0], [1.0, 3.0, 2.0, 2.0])
    (r,) = sc.summary(m, tie=0.05)
    assert r["n"] == 4
    assert r["sim_elastic_wins"] == 2 and r["sim_static_wins"] == 1
    assert r["agree"] == pytest.approx(3 / 4)  # the third design disagrees; the tie counts as agreed
    assert r["sim_ratio"] == pytest.approx(np.median([2.0, 0.5, 3.0, 1.02]))


def test_pooled_rho_is_one_when_the_estimate_is_a_monotone_map_of_the_simulation():
    sim_el, sim_st = [1.0, 3.0, 5.0, 7.0], [2.0, 4.0, 6.0, 8.0]
    m = _frame(sim_el, sim_st, [v ** 2 for v in sim_el], [v ** 2 for v in sim_st])
    (r,) = sc.summary(m, tie=0.0)
    assert r["rho_pooled"] == pytest.approx(1.0) and r["agree"] == 1.0
    swapped = sc.summary(_frame(sim_el, sim_st, sim_st, sim_el), tie=0.0)[0]
    assert swapped["agree"] == 0.0 and swapped["rho_pooled"] < 1.0


@pytest.mark.parametrize("out", ["../elsewhere", "sub/dir", ".hidden", ""])
def test_out_must_be_a_plain_report_name(out, capsys):
    with pytest.raises(SystemExit) as info:
        sc.main(["--out", out])
    assert info.value.code == 2 and "--out: a plain file name" in capsys.readouterr().err
