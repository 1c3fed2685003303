"""dse layer: the Optuna plugin (the only package that imports optuna).

Search spaces (YAML → Optuna distributions → design dicts), objectives, the promotion pruner, samplers by name,
storages by URL, the study runner, artifacts, reports and the exhaustive mode. See ``docs/dse.md``.
"""

from __future__ import annotations

from hydra_opt.dse.evaluators import Evaluator, HydraEvaluator, SimOutcome
from hydra_opt.dse.exhaustive import ExhaustiveResult, recovery, run_exhaustive, screen
from hydra_opt.dse.objectives import METRICS, Metric, ObjectiveSpec, load_objectives
from hydra_opt.dse.pruner import Promotion, PromotionPruner
from hydra_opt.dse.report import export_design, format_front_table, front_rows, write_report
from hydra_opt.dse.runner import RunOptions, RunSummary, open_study, run_study
from hydra_opt.dse.samplers import SamplerSpec, make_sampler, worker_seed
from hydra_opt.dse.search_space import SearchSpace, load_search_space
from hydra_opt.dse.spec import StudySpec, load_study_spec
from hydra_opt.dse.storages import make_storage, redact_url

__all__ = [
    "Evaluator",
    "HydraEvaluator",
    "SimOutcome",
    "ExhaustiveResult",
    "recovery",
    "run_exhaustive",
    "screen",
    "METRICS",
    "Metric",
    "ObjectiveSpec",
    "load_objectives",
    "Promotion",
    "PromotionPruner",
    "export_design",
    "format_front_table",
    "front_rows",
    "write_report",
    "SamplerSpec",
    "make_sampler",
    "worker_seed",
    "SearchSpace",
    "load_search_space",
    "make_storage",
    "redact_url",
    "RunOptions",
    "RunSummary",
    "StudySpec",
    "load_study_spec",
    "open_study",
    "run_study",
]
