"""No import circles among hydra_opt's modules.

Every ``import`` / ``from … import`` counts — at module level and inside functions alike: a function-level import
only defers a circle to call time, and the two modules still cannot be understood, tested or moved apart. An import
of ``pkg.mod`` or ``from pkg import mod`` is an edge to that module; ``from pkg import name`` (a name defined in
``pkg/__init__.py``) an edge to the package's ``__init__``. The implicit import of parent packages is not counted
(every module would then be in a circle with a package ``__init__`` that re-exports it).
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "hydra_opt"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a hydra_opt module."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in mods:
            return cand
    return None


def import_graph() -> dict[str, set[str]]:
    """module -> the hydra_opt modules it imports (anywhere in its body)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in mods else src for a in node.names]
            for t in targets:
                r = _resolve(t, mods) if t.startswith("hydra_opt") else None
                if r is not None and r != mod:
                    graph[mod].add(r)
    return graph


def import_cycles(graph: dict[str, set[str]] | None = None) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted; sorted by first module."""
    graph = import_graph() if graph is None else graph
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_cycle_finder_finds_a_planted_circle() -> None:
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_cycles(g) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_graph_sees_function_level_imports() -> None:
    g = import_graph()
    # cli/report_cmd.py imports the experiments inside a function only.
    assert "hydra_opt.experiments" in g["hydra_opt.cli.report_cmd"]


def test_no_import_cycles() -> None:
    cycles = import_cycles()
    assert cycles == [], "import circles: " + "; ".join(" <-> ".join(c) for c in cycles)
