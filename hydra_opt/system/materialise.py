"""Materialise a design: its chiplet types, memory type and NoI mesh, built in one place.

A :class:`~hydra_opt.system.design.DesignPoint` names its hardware (chiplet library names, a memory name, a D2D
bandwidth, a package). Every consumer — feasibility, placement, the estimator, the simulator, the CLI and the study
artifacts — needs the built objects: a :class:`~hydra_opt.hardware.types.ChipletType` per chiplet name (from the
chiplet library at the design's D2D bandwidth and slot area, DynaCore settings passed to the hook), the
:class:`~hydra_opt.hardware.types.MemoryType` and the :class:`~hydra_opt.hardware.noi.Mesh`. They are built here
and nowhere else, so the estimator and the simulator price the same chiplets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_HOP_LATENCY_S", "Materialised", "chiplet_type", "design_mesh", "materialise", "memory_type"]

#: Per-hop NoI latency, s (the HYDRA artifact's 10 ns link latency; UCIe-class D2D links are a few ns).
DEFAULT_HOP_LATENCY_S = 10e-9


def _library(library: Any) -> Any:
    if library is not None:
        return library
    from hydra_opt.hardware.chiplets import ChipletLibrary

    return ChipletLibrary.default()


def chiplet_type(design: Any, name: str, library: Any = None) -> Any:
    """The ``ChipletType`` of library chiplet ``name`` in ``design``'s slots at its D2D bandwidth.

    Raises:
        ConfigError: For an unknown name or a chiplet that cannot be built (feasibility turns it into a reason).
    """
    return _library(library).get(name, design.d2d_bw_gbps, design.slot_area_mm2, settings=design.dynacore)


def memory_type(design: Any) -> Any:
    """The design's ``MemoryType`` (``design.memory`` is a memory name, or already a ``MemoryType``)."""
    from hydra_opt.hardware.memory import get_memory

    m = design.memory
    return get_memory(m) if isinstance(m, str) else m


def design_mesh(design: Any, hop_latency_s: float = DEFAULT_HOP_LATENCY_S) -> Any:
    """The design's NoI: a ``grid_w`` × ``grid_h`` mesh of ``d2d_bw_gbps`` links with ``hop_latency_s`` per hop."""
    from hydra_opt.hardware.noi import Mesh

    return Mesh(design.grid_w, design.grid_h, design.d2d_bw_gbps, hop_latency_s)


@dataclass(frozen=True)
class Materialised:
    """The built hardware of one design.

    Attributes:
        design: The design.
        counts: ``(chiplet name, count)`` with count > 0, in the design's (sorted) order.
        chiplets: The ``ChipletType`` of each entry of ``counts``.
        memory: The memory chiplets' ``MemoryType``.
        library: The chiplet library the types came from.
    """

    design: Any
    counts: tuple[tuple[str, int], ...]
    chiplets: tuple[Any, ...]
    memory: Any
    library: Any

    def chiplet(self, name: str) -> Any:
        """The ``ChipletType`` of chiplet ``name`` (one of :attr:`counts`' names)."""
        for (n, _), ct in zip(self.counts, self.chiplets):
            if n == name:
                return ct
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        """Chiplet names of :attr:`counts`."""
        return tuple(n for n, _ in self.counts)

    def mesh(self, hop_latency_s: float = DEFAULT_HOP_LATENCY_S) -> Any:
        """The design's NoI mesh (:func:`design_mesh`)."""
        return design_mesh(self.design, hop_latency_s)


def materialise(design: Any, library: Any = None) -> Materialised:
    """Build ``design``'s chiplet types and memory type from ``library`` (default: the shipped library).

    Raises:
        ConfigError: For a chiplet or memory that cannot be built (``feasibility`` reports these as reasons).
    """
    lib = _library(library)
    c = design.counts
    items = c.items() if isinstance(c, dict) else c
    counts = tuple((str(n), int(k)) for n, k in items if int(k) > 0)
    chips = tuple(chiplet_type(design, n, lib) for n, _ in counts)
    return Materialised(design=design, counts=counts, chiplets=chips, memory=memory_type(design), library=lib)
