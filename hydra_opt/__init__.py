"""hydra_opt — design-space exploration of heterogeneous chiplet LLM-serving systems, as an Optuna plugin.

Layers (imports point down only): ``workload`` → ``hardware`` → ``system`` → ``runtime`` → ``evaluate`` → ``dse``;
``cli`` and ``run`` sit on top. Only ``hydra_opt.dse`` imports Optuna.

The Python API lives in :mod:`hydra_opt.dse`; its main names are also reachable here (``hydra_opt.DseObjective``),
imported on first use so that ``import hydra_opt`` stays light and Optuna-free.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

#: Names of :mod:`hydra_opt.dse` offered at the top level (resolved lazily, PEP 562).
_DSE_NAMES: tuple[str, ...] = (
    "DseObjective",
    "PromotionPruner",
    "SearchSpace",
    "ObjectiveSpec",
    "StudySpec",
    "load_study_spec",
    "run_study",
)

__all__ = ["__version__", *_DSE_NAMES]


def __getattr__(name: str) -> Any:
    if name in _DSE_NAMES:
        import hydra_opt.dse

        return getattr(hydra_opt.dse, name)
    raise AttributeError(f"module 'hydra_opt' has no attribute {name!r}")
