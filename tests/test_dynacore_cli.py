"""``python -m hydra_opt dynacore check/sweep``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hydra_opt.cli.dynacore_cmd import parse_batches
from hydra_opt.cli.main import main
from hydra_opt.config import ConfigError


def _check(capsys, *extra: str) -> dict:
    assert main(["dynacore", "check", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_check_paper_parameters(capsys) -> None:
    rep = _check(capsys)
    assert rep["gemv_compute_over_weight_stream"] == 31.25
    assert rep["pyramid_packing"]["meus"] == ["4x4", "4x4", "2x8", "1x16"]
    assert set(rep["decode_saturation_batch"]) == {"systolic", "planaria", "sara", "dynacore"}
    assert set(rep["decode_latency_ms"]["dynacore"]) == {"1", "256"}
    assert rep["speedup_vs_systolic"]["systolic"] == 1.0
    assert rep["parameters"]["baseline_policy"] == "w8a8" and rep["parameters"]["policy"] == "disaggregated"
    # Saturation knees follow the MEU floors (paper Fig. 11: 128, 32, 4, 1).
    assert rep["decode_saturation_batch"] == {"systolic": 128, "planaria": 32, "sara": 4, "dynacore": 1}
    # Batch-256 SA at W8A8 is compute bound: MACs / (2·16384·f) plus its fill overhead (< 15 %).
    from hydra_opt.workload.models import block_gemms, load_model

    model = load_model("llama-3-8b")
    macs_256 = sum(g.macs for b in model.blocks for g in block_gemms(b, [0] * 256, [1] * 256) if g.weight)
    floor_ms = macs_256 / (2 * 16384 * 500e6) * 1e3
    assert floor_ms <= rep["decode_latency_ms"]["systolic"]["256"] <= 1.15 * floor_ms


def test_check_policies_change_datapaths(capsys) -> None:
    same = _check(capsys, "--baseline-policy", "disaggregated")
    # Same W4A16 datapath on every array: the batch-1 speedup is the PE-utilisation ratio, bounded by the W4 stream.
    assert same["speedup_vs_systolic"]["dynacore"] > 100
    assert main(["dynacore", "check", "--policy", "w2a2"]) == 2


@pytest.mark.parametrize(
    ("args", "expected"), [(("--array", "64"), 62.5), (("--clock-mhz", "1000"), 15.625), (("--dram-tbps", "8"), 62.5)]
)
def test_check_recomputes_formula(capsys, args, expected) -> None:
    assert _check(capsys, *args)["gemv_compute_over_weight_stream"] == expected


def test_check_bad_array_exits_2(capsys) -> None:
    assert main(["dynacore", "check", "--array", "100"]) == 2
    assert "--array" in capsys.readouterr().err


def test_sweep_writes_csv_and_png(tmp_path, capsys) -> None:
    out = tmp_path / "fig11.csv"
    assert main(["dynacore", "sweep", "--model", "llama-3-8b", "--batch", "1,2,4", "--csv", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 4 * 3
    assert {r["architecture"] for r in rows} == {"systolic", "planaria", "sara", "dynacore"}
    assert all(float(r["latency_ms"]) > 0 for r in rows)
    png = out.with_suffix(".png")
    assert png.exists() and png.read_bytes()[:4] == b"\x89PNG"


def test_parse_batches() -> None:
    assert parse_batches("1,2,4,...,256") == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert parse_batches("8,16,...,40") == [8, 16, 32, 40]  # integer ratio -> geometric
    assert parse_batches("3,5,...,11") == [3, 5, 7, 9, 11]  # otherwise arithmetic
    assert parse_batches("3,1") == [1, 3]
    for bad in ("", "0", "a,b", "1,...,4"):
        with pytest.raises(ConfigError):
            parse_batches(bad)


def test_check_columns_are_named_apart_and_batch_256_points_to_its_cause(capsys) -> None:
    assert main(["dynacore", "check"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("architecture"))
    assert header.count("paper") == 2 and "paper sat." in header and "paper b=256 (ms)" in header
    note = next(line for line in out.splitlines() if line.startswith("note:"))
    assert "236.4 ms" in note and "60.7 ms" in note and "docs/dynacore.md §3" in note
    doc = (Path(__file__).resolve().parents[1] / "docs" / "dynacore.md").read_text(encoding="utf-8")
    assert "## 3. Results against the paper" in doc and "Batch 256 does not reproduce" in doc


@pytest.mark.parametrize("model", ["llama-3-8b", "a/very/long/path/to/some/model-file-with-a-long-name-v2.yaml"])
def test_sweep_title_fits_in_the_figure(model) -> None:
    from hydra_opt.cli.dynacore_cmd import sweep_figure

    rows = [{"architecture": a, "batch": b, "latency_ms": float(b * (i + 1))}
            for i, a in enumerate(("systolic", "planaria", "sara", "dynacore", "simd", "figlut", "bitfusion"))
            for b in (1, 2, 4)]
    fig = sweep_figure(rows, f"{model} decode step latency vs batch size (DynaCore Fig. 11)",
                       "DynaCore disaggregated, baselines w8a8, 128x128 PEs")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box, title = fig.bbox, fig.axes[0].title.get_window_extent(renderer)
    assert box.x0 <= title.x0 and title.x1 <= box.x1 and title.y1 <= box.y1
    legend = fig.axes[0].get_legend().get_window_extent(renderer)
    assert legend.x1 <= box.x1  # the legend beside the axes is not cut off either


def test_checks_compute_without_the_cli() -> None:
    from hydra_opt.hardware.dynacore.checks import CheckSetup, check_report, sweep_rows

    setup = CheckSetup(array=64)
    rows = sweep_rows(setup, ["figlut", "dynacore"], [1, 4])
    assert [r["datapath"] for r in rows] == ["w4a16", "w4a16", "w4a16", "w4a16"]  # FIGLUT is W4A16 whatever
    assert sweep_rows(CheckSetup(policy="w8a8"), ["dynacore"], [1])[0]["datapath"] == "w8a8"
    assert check_report(setup)["gemv_compute_over_weight_stream"] == 62.5
    with pytest.raises(ConfigError, match="not an architecture"):
        setup.architecture("tpu")
