"""runtime layer."""

from __future__ import annotations
from hydra_opt.runtime.mapping import Mapping, map_tasks, round_robin_mapping, spatial_pipeline_mapping

__all__: list[str] = [
    "map_tasks",
    "Mapping",
    "round_robin_mapping",
    "spatial_pipeline_mapping",
]
