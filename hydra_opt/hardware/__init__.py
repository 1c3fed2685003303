"""hardware layer."""

from __future__ import annotations

from hydra_opt.hardware.area import AreaBreakdown, Composition, composition_area, package_area_mm2
from hydra_opt.hardware.chiplets import ChipletLibrary, ChipletSpec, compose, register_chiplet_provider
from hydra_opt.hardware.memory import get_memory, list_memories
from hydra_opt.hardware.types import FAMILIES, PHASES, ChipletType, MemoryType
from hydra_opt.hardware.noi import ROUTINGS, SHARING_MODES, FlowDone, FlowNetwork, Mesh, plot_link_heatmap

__all__: list[str] = [
    "AreaBreakdown",
    "ChipletLibrary",
    "ChipletSpec",
    "ChipletType",
    "Composition",
    "FAMILIES",
    "MemoryType",
    "PHASES",
    "compose",
    "composition_area",
    "get_memory",
    "list_memories",
    "package_area_mm2",
    "register_chiplet_provider",
    "FlowDone",
    "FlowNetwork",
    "Mesh",
    "SHARING_MODES",
    "plot_link_heatmap",
    "ROUTINGS",
]
