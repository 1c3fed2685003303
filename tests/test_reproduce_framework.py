"""The reproduction framework (issue 8): rows, flagging, rendering, JSON round-trip, driver and CLI."""

from __future__ import annotations

import json
import math
import sys
import types
from pathlib import Path

import pytest

from hydra_opt.cli.main import main
from hydra_opt.config import ConfigError
from hydra_opt import experiments as reproduce
from hydra_opt.experiments.paths import ExperimentPaths
from hydra_opt.experiments.common import (
    UNSTATED,
    Row,
    Section,
    render_markdown,
    section_from_json,
    section_to_json,
)


def test_ratio_only_for_nonzero_numbers() -> None:
    assert Row("a", 2.0, 3.0, "x").ratio == pytest.approx(1.5)
    assert Row("a", None, 3.0, "x").ratio is None
    assert Row("a", 2.0, None, "x").ratio is None
    assert Row("a", 0.0, 3.0, "x").ratio is None
    assert Row("a", 2.0, math.nan, "x").ratio is None


def test_flag_beyond_25_percent_without_comment() -> None:
    assert Row("a", 1.0, 1.3, "x").flagged
    assert Row("a", 1.0, 0.7, "x").flagged
    assert not Row("a", 1.0, 1.2, "x").flagged
    assert not Row("a", 1.0, 1.3, "x", comment="artifact post-scales by 1.2").flagged
    assert Row("a", 1.0, 1.3, "x", comment="   ").flagged  # whitespace is not a comment


def _section(key: str = "hydra_fig10") -> Section:
    return Section(key=key, title="Fig. X — test", intro_md="Setup text.",
                   rows=[Row("ok row", 1.29, 1.25, "x"), Row("bad row", 1.22, 2.0, "x"),
                         Row("explained", 100.0, 10.0, "tok/s", comment="measured cause | with pipe"),
                         Row("ours only", None, 3.5, "s")],
                   figures=["fig_x.png"], extra_md="Discussion.", wall_s=12.3, quick=True)


def test_render_table_and_flag() -> None:
    md = render_markdown([_section()], commit="abc123", metas={"hydra_fig10": {"commit": "abc123", "date": "d"}})
    assert "| item | paper | hydra_opt | ratio | comment |" in md
    bad = next(line for line in md.splitlines() if line.startswith("| bad row"))
    assert UNSTATED in bad and "1.64" in bad
    ok = next(line for line in md.splitlines() if line.startswith("| ok row"))
    assert UNSTATED not in ok and "0.97" in ok
    assert "measured cause \\| with pipe" in md  # pipes cannot break the table
    assert "| ours only | — | 3.5 s | — |" in md
    assert "![fig_x.png](reproduction/fig_x.png)" in md
    assert "Setup text." in md and "Discussion." in md and "abc123" in md
    assert "1 beyond" not in md and "2 beyond ±25%, 1 of them without a stated cause" in md


def test_json_round_trip() -> None:
    s = _section()
    s.rows.append(Row("nan", 1.0, math.nan, "x"))
    data = json.loads(json.dumps(section_to_json(s, commit="c", date="d"), allow_nan=False))
    assert data["meta"] == {"commit": "c", "date": "d"}
    back = section_from_json(data)
    assert back.rows[:4] == s.rows[:4] and back.rows[4].ours is None
    assert (back.key, back.title, back.figures, back.extra_md, back.wall_s, back.quick) == \
        (s.key, s.title, s.figures, s.extra_md, s.wall_s, s.quick)


def test_missing_module_is_not_built_yet(tmp_path: Path) -> None:
    sec, err = reproduce.run_one("no_such_experiment", True, tmp_path)
    assert err is None and "Not built yet" in sec.intro_md and not sec.rows


def test_driver_runs_stores_and_rerenders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("hydra_opt.experiments.hydra_fig12")
    calls = []

    def run(quick: bool, fig_dir: Path, seed: int = 0, *, paths: ExperimentPaths) -> Section:
        calls.append((quick, seed, paths))
        (fig_dir / "f.png").write_bytes(b"png")
        return Section("hydra_fig12", "Fake Fig. 12", "intro", [Row("r", 1.0, 1.1, "x")], ["f.png"])

    fake.run = run
    monkeypatch.setitem(sys.modules, "hydra_opt.experiments.hydra_fig12", fake)
    paths = ExperimentPaths.default(tmp_path / "clone", tmp_path / "shared")
    md = reproduce.run_reproduction(tmp_path, quick=True, only="hydra_fig12", seed=3, log=lambda *a: None,
                                    paths=paths)
    assert calls == [(True, 3, paths)]
    data = json.loads((tmp_path / "reproduction" / "hydra_fig12.json").read_text())
    assert data["meta"]["quick"] is True and data["meta"]["seed"] == 3 and data["meta"]["commit"]
    text = md.read_text()
    assert "Fake Fig. 12" in text and "| r | 1× | 1.1× | 1.10 |" in text
    # Re-render from JSON only: nothing runs, same content.
    monkeypatch.delitem(sys.modules, "hydra_opt.experiments.hydra_fig12")
    md2 = reproduce.run_reproduction(tmp_path, quick=True, from_results=True, log=lambda *a: None)
    assert calls == [(True, 3, paths)] and "Fake Fig. 12" in md2.read_text()


def test_failing_experiment_is_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("hydra_opt.experiments.beyond")

    def run(quick: bool, fig_dir: Path, seed: int = 0, **kw: object) -> Section:
        raise RuntimeError("boom")

    fake.run = run
    monkeypatch.setitem(sys.modules, "hydra_opt.experiments.beyond", fake)
    failures: list[str] = []
    md = reproduce.run_reproduction(tmp_path, quick=True, only=["beyond"], log=lambda *a: None, failures=failures)
    assert failures == ["beyond"] and "RuntimeError: boom" in md.read_text()


def test_parse_only() -> None:
    assert reproduce.parse_only("hydra_fig12, hydra_fig9") == ("hydra_fig9", "hydra_fig12")
    assert reproduce.parse_only(None) == reproduce.EXPERIMENTS
    with pytest.raises(ConfigError, match="allowed keys: hydra_fig8"):
        reproduce.parse_only("hydra_fig9,nope")


def test_cli_bad_only_key_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["report", "--reproduce", "--only", "fig99", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "fig99" in err and "hydra_table4" in err
    assert not (tmp_path / "reproduction.md").exists()
    assert main(["report", "--quick"]) == 2  # --quick needs --reproduce


def test_cli_from_results_needs_no_storage(tmp_path: Path) -> None:
    assert main(["report", "--reproduce", "--from-results", "--out", str(tmp_path)]) == 0
    assert "Not built yet" in (tmp_path / "reproduction.md").read_text() or \
        "Not run yet" in (tmp_path / "reproduction.md").read_text()


def test_validate_accepts_paper_experiments_and_rejects_a_broken_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(__file__).resolve().parents[1] / "studies" / "paper"
    exps = [p for p in sorted(root.glob("hydra_*.yaml")) if "paper_experiment" in p.read_text()]
    assert exps
    assert main(["validate", *map(str, exps)]) == 0
    bad = tmp_path / "hydra_bad.yaml"
    bad.write_text("kind: paper_experiment\n- not a mapping\n")
    assert main(["validate", str(bad)]) == 2
    assert "hydra_bad.yaml" in capsys.readouterr().err


def test_cli_checkout_without_paper_experiments_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["report", "--reproduce", "--only", "hydra_fig12", "--checkout", str(tmp_path), "--out",
               str(tmp_path / "out")])
    assert rc == 2 and "--checkout" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert main(["report", "--shared", str(tmp_path)]) == 2  # --shared needs --reproduce


def test_experiment_paths_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HYDRA_OPT_SHARED", raising=False)
    monkeypatch.chdir(tmp_path)
    p = ExperimentPaths.default()
    assert p.checkout == tmp_path.resolve() and p.shared == tmp_path.resolve().parent / "shared"
    assert p.paper_dir == p.checkout / "studies" / "paper"
    assert p.artifact_fronts == p.shared / "reference" / "hydra_artifact" / "pareto_fronts"
    monkeypatch.setenv("HYDRA_OPT_SHARED", str(tmp_path / "s"))
    assert ExperimentPaths.default().traces_dir == tmp_path.resolve() / "s" / "data" / "traces"
    assert ExperimentPaths.default(shared=tmp_path / "t").shared == tmp_path.resolve() / "t"  # parameter wins
