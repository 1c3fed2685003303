"""Which estimator modules run compiled (``_kernels``), and the guard against a stale compiled one
(:mod:`hydra_opt.evaluate._accel`, docs/estimator.md "Speed")."""

from __future__ import annotations

from hydra_opt.evaluate import _accel as _shared

__all__ = ["COMPILED_MODULES", "compiled_modules", "guard"]

_PACKAGE = __name__.rsplit(".", 1)[0]
#: Estimator modules the build may compile (see setup.py).
COMPILED_MODULES = _shared.COMPILED_MODULES[_PACKAGE]


def guard() -> None:
    """Import the sources of the compiled estimator modules if any of them is stale or disabled."""
    _shared.guard(_PACKAGE)


def compiled_modules() -> dict[str, bool]:
    """``{module: True if it runs compiled}`` for the estimator modules the build may compile (imports them)."""
    return _shared.compiled_modules(_PACKAGE)
