"""Optional compiled build of the hot loops (docs/simulator.md "Compiled hot loop", docs/estimator.md "Speed").

Everything is declared in pyproject.toml; this file only adds the Cython extension modules. The modules are
ordinary Python (the simulator's ``engine.py``, ``flows.py``; the estimator's ``_kernels.py``) compiled as they are
— no separate .pyx — so the pure-Python package is the same code and the fallback when no C compiler is present
(or ``HYDRA_OPT_PURE_PYTHON=1`` at build time). Each build writes ``_compiled_sources.json`` (SHA-256 of the .py and
.pxd sources it compiled) next to the extensions, so the package can tell a stale extension from a fresh one at
import time. The module list and the hash come from ``hydra_opt/evaluate/_accel.py`` itself (stdlib only, loaded by
path: the build must not import the package and its dependencies), so the build and the import-time check cannot
disagree.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def _load_accel():
    spec = importlib.util.spec_from_file_location("hydra_opt.evaluate._accel", ROOT / "hydra_opt/evaluate/_accel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_ACCEL = _load_accel()
#: Modules compiled from their .py sources (``hydra_opt.evaluate._accel.COMPILED_MODULES``).
COMPILED = tuple(f"{pkg}.{name}" for pkg, names in _ACCEL.COMPILED_MODULES.items() for name in names)


class OptionalBuildExt(build_ext):
    """Build the extensions if a compiler is there; otherwise warn and keep the pure-Python package."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any compiler/toolchain failure means "use pure Python"
            self._skip(exc)
            return
        self._write_manifest()

    def build_extension(self, ext) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._skip(exc)

    @staticmethod
    def _skip(exc: Exception) -> None:
        print(f"hydra_opt: compiled modules not built ({type(exc).__name__}: {exc}); using pure Python",
              file=sys.stderr)

    def _write_manifest(self) -> None:
        by_dir: dict[Path, dict[str, str]] = {}
        for ext in self.extensions:
            out = Path(self.get_ext_fullpath(ext.name))
            if not out.exists():
                continue
            src = ROOT / (ext.name.replace(".", "/") + ".py")
            by_dir.setdefault(out.parent, {})[ext.name.rsplit(".", 1)[1]] = _ACCEL.source_sha(src)
        for d, shas in by_dir.items():
            (d / "_compiled_sources.json").write_text(json.dumps(shas, indent=1, sort_keys=True) + "\n")


def _extensions() -> list:
    if os.environ.get("HYDRA_OPT_PURE_PYTHON") == "1":
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        if sys.argv[1:2] == ["build_ext"]:  # asked for the extensions by name: say why none is built, and fail
            raise SystemExit("hydra_opt: setup.py build_ext needs Cython to compile " + ", ".join(COMPILED)
                             + " (pip install Cython); nothing was built")
        print("hydra_opt: Cython not available; using the pure-Python simulator", file=sys.stderr)
        return []
    from setuptools import Extension

    # -ffp-contract=off: never fuse a*b+c into one FMA (a -march with FMA would otherwise allow it), so the typed C
    # doubles round exactly as the pure-Python floats do.
    flags = [] if sys.platform == "win32" else ["-ffp-contract=off"]
    exts = [Extension(name, [name.replace(".", "/") + ".py"], extra_compile_args=flags) for name in COMPILED]
    # annotation_typing=False: the annotations are documentation, not C types — the compiled module must compute
    # exactly what the Python one does (Python floats and ints, same operations, same order).
    return cythonize(exts, build_dir="build/cython", quiet=True,
                     compiler_directives={"language_level": 3, "annotation_typing": False, "binding": True})


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
