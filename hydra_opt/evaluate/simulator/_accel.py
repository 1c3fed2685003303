"""Which simulator modules run compiled, and a guard against stale compiled modules (docs/simulator.md).

``pip install`` compiles ``engine.py`` and ``flows.py`` with Cython when a C compiler is there (``setup.py``); the
extension modules sit next to the sources and Python imports them first. An extension built from an older
source (say, after editing ``engine.py`` in an editable install without re-installing) would silently run old
code, so before the simulator is imported each extension's recorded source hash (of its .py and .pxd, in
``_compiled_sources.json``, written by the build with :func:`source_sha`) is compared with the sources on disk; on a
mismatch the sources of all of them are imported instead, with a warning (all or none: the engine uses the flow
model's C types). ``HYDRA_OPT_PURE_PYTHON=1`` in the environment imports the sources in any case (results are identical;
the compiled modules are only faster).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path

__all__ = ["COMPILED_MODULES", "compiled_modules", "guard", "source_sha"]

#: Simulator modules the build may compile (see setup.py).
COMPILED_MODULES = ("flows", "engine")
_HERE = Path(__file__).resolve().parent
_PACKAGE = __name__.rsplit(".", 1)[0]


def _extension_file(name: str) -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        p = _HERE / f"{name}{suffix}"
        if p.exists():
            return p
    return None


def source_sha(src: Path) -> str:
    """SHA-256 of a module's .py and, when present, its augmenting .pxd (``setup.py`` records it at build time)."""
    h = hashlib.sha256(src.read_bytes())
    pxd = src.with_suffix(".pxd")
    if pxd.exists():
        h.update(pxd.read_bytes())
    return h.hexdigest()


def _import_source(fullname: str, src: Path) -> None:
    spec = importlib.util.spec_from_file_location(fullname, src)
    module = importlib.util.module_from_spec(spec)
    sys.modules[fullname] = module
    spec.loader.exec_module(module)


def guard() -> None:
    """Import the sources of the compiled simulator modules if any of them is stale or disabled (call before
    importing them).

    All or none: the compiled engine uses the compiled flow model's C types (``cimport``), so one stale module
    sends every module back to its source.
    """
    pure = os.environ.get("HYDRA_OPT_PURE_PYTHON") == "1"
    try:
        manifest = json.loads((_HERE / "_compiled_sources.json").read_text())
    except (OSError, ValueError):
        manifest = {}
    todo = []
    stale = []
    for name in COMPILED_MODULES:
        fullname = f"{_PACKAGE}.{name}"
        if fullname in sys.modules or _extension_file(name) is None:
            continue
        src = _HERE / f"{name}.py"
        if not src.exists():
            continue  # an installed wheel without sources: the extension is all there is
        todo.append((fullname, src))
        if manifest.get(name) != source_sha(src):
            stale.append(name)
    if not pure and not stale:
        return
    for name in stale if not pure else ():
        warnings.warn(
            f"hydra_opt: the compiled {name} module is older than {name}.py; running the pure-Python sources of "
            f"{', '.join(COMPILED_MODULES)} (re-run `pip install -e .` to rebuild them)", RuntimeWarning, stacklevel=2)
    for fullname, src in todo:  # COMPILED_MODULES order: a module's dependencies come first
        _import_source(fullname, src)


def compiled_modules() -> dict[str, bool]:
    """``{module: True if it runs compiled}`` for the simulator modules the build may compile (imports them)."""
    import importlib

    out = {}
    for name in COMPILED_MODULES:
        mod = importlib.import_module(f"{_PACKAGE}.{name}")
        out[name] = not str(getattr(mod, "__file__", "")).endswith(".py")
    return out
