"""hydra_opt — design-space exploration of heterogeneous chiplet LLM-serving systems, as an Optuna plugin.

Layers (imports point down only): ``workload`` → ``hardware`` → ``system`` → ``runtime`` → ``evaluate`` → ``dse``;
``cli`` and ``run`` sit on top. Only ``hydra_opt.dse`` imports Optuna.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
