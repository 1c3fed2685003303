"""The package: a W x H grid of chiplet slots on a passive interposer with a 2-D mesh NoI (HYDRA Sec. VI-A).

Node ids follow the HYDRA artifact's convention, ``id = x * height + y`` (x = column in [0, width), y = row in
[0, height)), so a 6 x 4 grid numbers column by column. Memory chiplets sit on the outer ring (Sec. IV-A step 1):
a 6 x 4 grid has 16 ring slots, which is why the paper's HBM count is at most 16.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from hydra_opt.hardware.area import package_area_mm2

__all__ = ["DEFAULT_GRID_H", "DEFAULT_GRID_W", "Package"]

DEFAULT_GRID_W = 6
DEFAULT_GRID_H = 4


@dataclass(frozen=True)
class Package:
    """A grid of equal chiplet slots.

    Attributes:
        width: Slots along x (columns).
        height: Slots along y (rows).
        slot_area_mm2: Die-area budget of one slot, mm².
    """

    width: int = DEFAULT_GRID_W
    height: int = DEFAULT_GRID_H
    slot_area_mm2: float = 144.0

    def __post_init__(self) -> None:
        if self.width < 1 or self.height < 1:
            raise ValueError(f"grid must be at least 1 x 1, got {self.width} x {self.height}")
        if not self.slot_area_mm2 > 0:
            raise ValueError(f"slot area must be positive, got {self.slot_area_mm2}")

    @property
    def n_slots(self) -> int:
        """Number of slots."""
        return self.width * self.height

    def node_id(self, x: int, y: int) -> int:
        """Node id of slot (x, y)."""
        if not (0 <= x < self.width and 0 <= y < self.height):
            raise ValueError(f"slot ({x}, {y}) is outside the {self.width} x {self.height} grid")
        return x * self.height + y

    def coords(self, node: int) -> tuple[int, int]:
        """(x, y) of a node id."""
        if not 0 <= node < self.n_slots:
            raise ValueError(f"node {node} is outside 0..{self.n_slots - 1}")
        return divmod(node, self.height)

    def is_ring(self, node: int) -> bool:
        """Whether the node is on the outer ring."""
        x, y = self.coords(node)
        return x in (0, self.width - 1) or y in (0, self.height - 1)

    @cached_property
    def ring_nodes(self) -> tuple[int, ...]:
        """Outer-ring node ids, ascending."""
        return tuple(n for n in range(self.n_slots) if self.is_ring(n))

    @property
    def n_ring(self) -> int:
        """Number of outer-ring slots (2W + 2H - 4 for W, H >= 2)."""
        return len(self.ring_nodes)

    @cached_property
    def interior_nodes(self) -> tuple[int, ...]:
        """Node ids not on the ring, ascending."""
        return tuple(n for n in range(self.n_slots) if not self.is_ring(n))

    def manhattan(self, a: int, b: int) -> int:
        """Hop count between two nodes on the mesh (dimension-order routes are minimal)."""
        ax, ay = self.coords(a)
        bx, by = self.coords(b)
        return abs(ax - bx) + abs(ay - by)

    def neighbors(self, node: int) -> tuple[int, ...]:
        """Mesh neighbours of a node (2-4), ascending."""
        x, y = self.coords(node)
        out = []
        for dx, dy in ((-1, 0), (0, -1), (0, 1), (1, 0)):
            nx, ny = x + dx, y + dy
            if 0 <= nx < self.width and 0 <= ny < self.height:
                out.append(self.node_id(nx, ny))
        return tuple(sorted(out))

    @property
    def n_links(self) -> int:
        """Bidirectional mesh links: W(H-1) + H(W-1)."""
        return self.width * (self.height - 1) + self.height * (self.width - 1)

    def interposer_area_mm2(self, gap_mm: float = 0.0) -> float:
        """Interposer area, mm² (see :func:`hydra_opt.hardware.area.package_area_mm2`)."""
        return package_area_mm2(self.width, self.height, self.slot_area_mm2, gap_mm=gap_mm)
