"""system layer."""

from __future__ import annotations

from hydra_opt.system.design import DesignPoint, DynaCoreSettings, load_design, save_design
from hydra_opt.system.feasibility import feasibility
from hydra_opt.system.materialise import Materialised, design_mesh, materialise
from hydra_opt.system.package import Package
from hydra_opt.system.policies import BATCHINGS, PLACEMENTS, SCHEDULERS
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
    "BATCHINGS",
    "PLACEMENTS",
    "SCHEDULERS",
    "Materialised",
    "design_mesh",
    "materialise",
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
