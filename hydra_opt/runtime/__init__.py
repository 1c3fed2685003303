"""runtime layer."""

from __future__ import annotations
from hydra_opt.runtime.batching import ContinuousBatcher, PagedMemory, StaticBatcher
from hydra_opt.runtime.mapping import Mapping, map_tasks, round_robin_mapping, spatial_pipeline_mapping
from hydra_opt.runtime.scheduling import (
    SCHEDULERS,
    ChipletView,
    ElasticScheduler,
    FcfsScheduler,
    StaticScheduler,
    TaskScheduler,
    WorkStealingScheduler,
    make_scheduler,
)

__all__: list[str] = [
    "map_tasks",
    "Mapping",
    "round_robin_mapping",
    "spatial_pipeline_mapping",
    "PagedMemory",
    "StaticBatcher",
    "ContinuousBatcher",
    "SCHEDULERS",
    "ChipletView",
    "TaskScheduler",
    "StaticScheduler",
    "FcfsScheduler",
    "WorkStealingScheduler",
    "ElasticScheduler",
    "make_scheduler",
]
