"""system layer."""

from __future__ import annotations

from hydra_opt.system.design import DesignPoint, DynaCoreSettings, load_design, save_design
from hydra_opt.system.feasibility import feasibility
from hydra_opt.system.package import Package
from hydra_opt.system.space import DesignSpace, llama3_space, mamba2_space, nemotron_h_space, paper_space
from hydra_opt.system.placement import (
    PLACEMENT_POLICIES,
    BlockSpec,
    ComputeSpec,
    Placement,
    PlacementError,
    PlacementProblem,
    place,
    place_problem,
    placement_problem,
)

__all__: list[str] = [
    "DesignPoint",
    "DesignSpace",
    "DynaCoreSettings",
    "Package",
    "feasibility",
    "llama3_space",
    "load_design",
    "mamba2_space",
    "nemotron_h_space",
    "paper_space",
    "save_design",
    "BlockSpec",
    "ComputeSpec",
    "PLACEMENT_POLICIES",
    "Placement",
    "PlacementError",
    "PlacementProblem",
    "place",
    "place_problem",
    "placement_problem",
]
