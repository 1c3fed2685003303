"""Compatibility module: the names of the former ``study.py``, now in :mod:`hydra_opt.dse.spec` (study files),
:mod:`hydra_opt.dse.objective` (the trial objective), :mod:`hydra_opt.dse.callbacks` (the runner's callbacks) and
:mod:`hydra_opt.dse.runner` (workers and the study runner). New code imports from those modules or from
:mod:`hydra_opt.dse`.
"""

from __future__ import annotations

from hydra_opt.dse.callbacks import REVISIT_ATTR
from hydra_opt.dse.objective import FINISHED_STATES, PLAN_ATTR, DseObjective, TrialReport
from hydra_opt.dse.runner import (
    SPEC_ATTR,
    RunOptions,
    RunSummary,
    apply_options,
    count_finished,
    load_study_by_name,
    open_study,
    run_study,
    run_worker,
    summarize,
)
from hydra_opt.dse.spec import PLAN_POOL_MAX, PLAN_POOLS, PrunerSpec, StudySpec, design_key, load_study_spec, parse_study_spec

__all__ = [
    "StudySpec",
    "PrunerSpec",
    "RunOptions",
    "RunSummary",
    "DseObjective",
    "TrialReport",
    "load_study_spec",
    "parse_study_spec",
    "run_study",
    "run_worker",
    "open_study",
    "load_study_by_name",
    "apply_options",
    "count_finished",
    "summarize",
    "design_key",
    "FINISHED_STATES",
    "SPEC_ATTR",
    "PLAN_ATTR",
    "REVISIT_ATTR",
    "PLAN_POOLS",
    "PLAN_POOL_MAX",
]
