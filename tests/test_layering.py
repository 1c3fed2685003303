"""Imports point down only: workload → hardware → system → runtime → evaluate → dse; only dse imports optuna."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "hydra_opt"
ORDER = ["config", "workload", "hardware", "system", "runtime", "evaluate", "dse", "cli"]


def _layer(path: Path) -> str | None:
    rel = path.relative_to(PKG).parts
    return rel[0] if len(rel) > 1 and rel[0] in ORDER else None


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
    return out


FILES = sorted(p for p in PKG.rglob("*.py") if _layer(p) is not None)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_imports_point_down(path: Path) -> None:
    layer = _layer(path)
    assert layer is not None
    rank = ORDER.index(layer)
    for mod in _imports(path):
        parts = mod.split(".")
        if parts[0] == "optuna" or parts[0] == "optuna_dashboard":
            assert layer == "dse", f"{path.name} imports {mod}: only hydra_opt.dse may import optuna"
        if parts[0] == "hydra_opt" and len(parts) > 1 and parts[1] in ORDER:
            assert ORDER.index(parts[1]) <= rank, f"{path.relative_to(PKG)} imports higher layer {mod}"
