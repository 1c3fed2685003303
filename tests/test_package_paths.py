"""The installed package reads nothing by a machine's path (issue 16): no absolute home/work path in any of its text
files, no module climbing out of ``hydra_opt/`` with ``Path(__file__).parents[k]``, and the paper experiments live
in ``hydra_opt/experiments`` (``hydra_opt/dse/reproduce`` is gone). Inputs outside the package come from
parameters (``experiments.paths.ExperimentPaths``) or package data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "hydra_opt"
#: Prefixes of absolute paths that exist only on some machine.
MACHINE_PREFIXES = ("/work/", "/home/", "/root/", "/Users/", "/tmp/", "C:\\")
TEXT = sorted(p for p in PKG.rglob("*") if p.is_file() and p.suffix in (".py", ".pyx", ".pxd", ".yaml", ".yml", ".json",
                                                                          ".csv", ".md", ".txt", ".cfg", ".toml"))
PARENTS = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]")


def _machine_paths(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if any(p in line for p in MACHINE_PREFIXES)]


@pytest.mark.parametrize("path", TEXT, ids=lambda p: str(p.relative_to(PKG)))
def test_no_absolute_machine_path(path: Path) -> None:
    assert not _machine_paths(path.read_text(encoding="utf-8", errors="replace")), path.relative_to(PKG)


@pytest.mark.parametrize("path", [p for p in TEXT if p.suffix == ".py"], ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_reaches_out_of_the_package(path: Path) -> None:
    for k in PARENTS.findall(path.read_text(encoding="utf-8")):
        target = path.parents[int(k)]
        assert target == PKG or PKG in target.parents, f"{path.relative_to(PKG)}: parents[{k}] is {target}"


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    assert _machine_paths("x = '/work/shared/fronts'\ny = 'relative/path'") == ["x = '/work/shared/fronts'"]
    assert PARENTS.findall("ROOT = Path(__file__).resolve().parents[3]") == ["3"]


def test_paper_experiments_are_out_of_the_optuna_layer() -> None:
    assert not (PKG / "dse" / "reproduce").exists()
    assert (PKG / "experiments" / "hydra_fig10.py").is_file()
