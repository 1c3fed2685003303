"""Compatibility module: the names of the former ``study.py``, now in :mod:`hydra_opt.dse.spec` (study files),
:mod:`hydra_opt.dse.objective` (the trial objective), :mod:`hydra_opt.dse.callbacks` (the runner's callbacks) and
:mod:`hydra_opt.dse.runner` (workers and the study runner). New code imports from those modules or from
:mod:`hydra_opt.dse`.
"""

from __future__ import annotations

from hydra_opt.dse import callbacks, objective, runner, spec
from hydra_opt.dse.callbacks import *  # noqa: F403
from hydra_opt.dse.objective import *  # noqa: F403
from hydra_opt.dse.runner import *  # noqa: F403
from hydra_opt.dse.spec import *  # noqa: F403

__all__ = [*spec.__all__, *objective.__all__, *callbacks.__all__, *runner.__all__]
