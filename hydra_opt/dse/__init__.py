"""dse layer: the Optuna plugin (the only package that imports optuna).

Search spaces (YAML or Python → Optuna parameters → design dicts), the objective
(:class:`~hydra_opt.dse.objective.DseObjective`: estimate → promote → simulate), the promotion pruner, samplers
by name, storages by URL, the study runner, artifacts, reports and the exhaustive mode. See ``docs/dse.md``.
What needs no Optuna lives below and is re-exported here for one-import use: the evaluators and objectives
(``hydra_opt.evaluate``) and the search-space grammar (``hydra_opt.system.space_spec``).

Python use::

    import optuna
    from hydra_opt.dse import DseObjective, PromotionPruner

    objective = DseObjective.from_objects("llama-3-8b", "studies/workloads/quickstart-chat.yaml",
                                          "search_spaces/quickstart.yaml")
    study = optuna.create_study(directions=objective.directions,
                                pruner=PromotionPruner(objective.metrics, n_warmup_trials=4))
    study.optimize(objective, n_trials=12)
"""

from __future__ import annotations

from hydra_opt.dse.exhaustive import ExhaustiveResult, recovery, run_exhaustive, screen
from hydra_opt.dse.objective import DseObjective, TrialReport, trial_design
from hydra_opt.dse.pruner import Promotion, PromotionPruner
from hydra_opt.dse.report import export_design, format_front_table, front_rows, write_report
from hydra_opt.dse.runner import RunOptions, RunSummary, open_study, run_study
from hydra_opt.dse.samplers import SamplerSpec, constraints_from_user_attrs, make_sampler, worker_seed
from hydra_opt.dse.search_space import SearchSpace, load_search_space
from hydra_opt.dse.spec import PrunerSpec, StudySpec, load_study_spec
from hydra_opt.dse.storages import make_storage, redact_url
from hydra_opt.evaluate.evaluators import Evaluator, HydraEvaluator, SimOutcome
from hydra_opt.evaluate.objectives import METRICS, Constraint, Metric, ObjectiveSpec, load_objectives
from hydra_opt.system.space_spec import Composition, Part, ScalarDim

__all__ = [
    "DseObjective",
    "TrialReport",
    "trial_design",
    "Evaluator",
    "HydraEvaluator",
    "SimOutcome",
    "ExhaustiveResult",
    "recovery",
    "run_exhaustive",
    "screen",
    "METRICS",
    "Constraint",
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
    "constraints_from_user_attrs",
    "make_sampler",
    "worker_seed",
    "Composition",
    "Part",
    "ScalarDim",
    "SearchSpace",
    "load_search_space",
    "make_storage",
    "redact_url",
    "RunOptions",
    "RunSummary",
    "PrunerSpec",
    "StudySpec",
    "load_study_spec",
    "open_study",
    "run_study",
]
