"""The API reference (``docs/api``, Sphinx autodoc + napoleon) builds from the docstrings with warnings as errors,
every cross-reference resolving, into a temporary folder; it documents every public name of ``hydra_opt.dse``."""

from __future__ import annotations

import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "docs" / "api"


def _inventory(path: Path) -> set[str]:
    """Object names in a Sphinx ``objects.inv`` (four header lines, then zlib-compressed ``name domain:role ...``)."""
    raw = path.read_bytes()
    body = zlib.decompress(raw.split(b"\n", 4)[4]).decode()
    return {line.split(" ", 1)[0] for line in body.splitlines() if line}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sphinx")  # in the test extra: CI installs it, so this runs there
    out = tmp_path_factory.mktemp("api")
    before = sorted(p.relative_to(SOURCE) for p in SOURCE.rglob("*"))
    res = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-E", "-q", "-b", "html",
         "-d", str(out / "doctrees"), str(SOURCE), str(out / "html")],
        capture_output=True, text=True, cwd=out, timeout=300,
    )
    assert res.returncode == 0, res.stderr[-4000:]
    assert "WARNING" not in res.stderr, res.stderr[-4000:]
    assert sorted(p.relative_to(SOURCE) for p in SOURCE.rglob("*")) == before, "the build wrote into docs/api"
    return out / "html"


def test_reference_documents_the_public_api(built: Path) -> None:
    import hydra_opt.dse as dse

    names = _inventory(built / "objects.inv")
    for name in dse.__all__:
        obj = getattr(dse, name)
        module = getattr(obj, "__module__", None)
        qualified = f"{module}.{name}" if module and not isinstance(obj, (dict, tuple)) else None
        assert qualified in names or any(n.endswith(f".{name}") for n in names), f"{name} is not documented"
    assert "hydra_opt.dse.objective.DseObjective.from_objects" in names
    assert "hydra_opt.dse.pruner.PromotionPruner" in names
    page = (built / "dse.html").read_text(encoding="utf-8")
    assert "Parameters" in page and "search_space" in page  # napoleon turned Args: into a field list


def test_a_broken_docstring_fails_the_build(tmp_path: Path) -> None:
    pytest.importorskip("sphinx")
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text((SOURCE / "conf.py").read_text().replace(
        "ROOT = Path(__file__).resolve().parents[2]", f"ROOT = Path({str(ROOT)!r})"))
    (src / "bad.py").write_text('def f(x):\n    """Do.\n\n    Args:\n        x: See :func:`hydra_opt.nope`.\n    """\n')
    (src / "index.rst").write_text("T\n=\n\n.. autofunction:: bad.f\n")
    res = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-n", "-q", "-b", "html", "-d",
                          str(tmp_path / "d"), str(src), str(tmp_path / "html")],
                         capture_output=True, text=True, cwd=src, timeout=300,
                         env={"PYTHONPATH": f"{src}:{ROOT}", "PATH": "/usr/bin:/bin"})
    assert res.returncode != 0 and "hydra_opt.nope" in res.stderr
