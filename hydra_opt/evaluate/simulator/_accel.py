"""Which simulator modules run compiled, and the guard against stale compiled modules (docs/simulator.md).

``pip install`` compiles ``engine.py`` and ``flows.py`` with Cython when a C compiler is there (``setup.py``); the
list of compiled modules of every package and the guard live in :mod:`hydra_opt.evaluate._accel`; this module is
the simulator's view of them.
"""

from __future__ import annotations

from hydra_opt.evaluate import _accel as _shared
from hydra_opt.evaluate._accel import source_sha

__all__ = ["COMPILED_MODULES", "compiled_modules", "guard", "source_sha"]

_PACKAGE = __name__.rsplit(".", 1)[0]
#: Simulator modules the build may compile (see setup.py).
COMPILED_MODULES = _shared.COMPILED_MODULES[_PACKAGE]


def guard() -> None:
    """Import the sources of the compiled simulator modules if any of them is stale or disabled."""
    _shared.guard(_PACKAGE)


def compiled_modules() -> dict[str, bool]:
    """``{module: True if it runs compiled}`` for the simulator modules the build may compile (imports them)."""
    return _shared.compiled_modules(_PACKAGE)
