"""Which modules run Cython-compiled, and a guard against stale compiled modules (docs/simulator.md "Compiled hot
loop", docs/estimator.md "Speed").

:data:`COMPILED_MODULES` is the one list: ``setup.py`` compiles exactly these modules from their ``.py`` sources
(with the augmenting ``.pxd`` next to each), and the packages guard exactly these at import. Adding a module to
the list (say, the estimator's ``single`` solver) is all a build needs; editing a listed module's source makes
its extension stale, and the guard then imports the sources of its package's listed modules (with a warning) until
the next build. Stdlib only: ``setup.py`` loads this file by path, without importing the package.

The build records the SHA-256 of each source (and its ``.pxd``) it compiled in ``_compiled_sources.json`` next to
the extensions (:func:`source_sha`); :func:`guard` compares it with the sources on disk. ``HYDRA_OPT_PURE_PYTHON=1``
in the environment imports the sources in any case (results are identical; the compiled modules are only faster).
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

#: Package → its modules the build may compile, in import order (a module's compiled dependencies first).
COMPILED_MODULES: dict[str, tuple[str, ...]] = {
    "hydra_opt.evaluate.simulator": ("flows", "engine"),  # the per-task event path
    "hydra_opt.evaluate.estimator": ("_kernels",),  # the solver's scalar kernels (LPT, MVA, static fluid)
}
#: The ``hydra_opt`` package folder (this file is ``hydra_opt/evaluate/_accel.py``).
_PKG = Path(__file__).resolve().parents[1]


def _dir(package: str) -> Path:
    """Folder of a ``hydra_opt.…`` package (inside the package folder: never a path above it)."""
    head, *rest = package.split(".")
    assert head == _PKG.name, package
    return _PKG.joinpath(*rest)


def _extension_file(here: Path, name: str) -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        p = here / f"{name}{suffix}"
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


def guard(package: str) -> None:
    """Import the sources of ``package``'s compiled modules if any of them is stale or disabled (call before
    importing them).

    All or none within a package: the compiled engine uses the compiled flow model's C types (``cimport``), so one
    stale module sends every listed module of its package back to its source.
    """
    here = _dir(package)
    pure = os.environ.get("HYDRA_OPT_PURE_PYTHON") == "1"
    try:
        manifest = json.loads((here / "_compiled_sources.json").read_text())
    except (OSError, ValueError):
        manifest = {}
    todo = []
    stale = []
    names = COMPILED_MODULES[package]
    for name in names:
        fullname = f"{package}.{name}"
        if fullname in sys.modules or _extension_file(here, name) is None:
            continue
        src = here / f"{name}.py"
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
            f"{', '.join(names)} (re-run `pip install -e .` to rebuild them)", RuntimeWarning, stacklevel=3)
    for fullname, src in todo:  # COMPILED_MODULES order: a module's dependencies come first
        _import_source(fullname, src)


def compiled_modules(package: str) -> dict[str, bool]:
    """``{module: True if it runs compiled}`` for ``package``'s modules the build may compile (imports them)."""
    import importlib

    out = {}
    for name in COMPILED_MODULES[package]:
        mod = importlib.import_module(f"{package}.{name}")
        out[name] = not str(getattr(mod, "__file__", "")).endswith(".py")
    return out
