"""Package grid: node ids, ring, distances."""

from __future__ import annotations

import itertools

import pytest

from hydra_opt.system.package import Package


def test_default_grid() -> None:
    p = Package()
    assert (p.width, p.height, p.n_slots) == (6, 4, 24)
    assert p.n_ring == 16  # why HYDRA's HBM count is at most 16
    assert p.interior_nodes == tuple(p.node_id(x, y) for x in range(1, 5) for y in (1, 2))
    assert p.n_links == 6 * 3 + 4 * 5


def test_node_ids_follow_artifact_convention() -> None:
    p = Package()
    assert p.node_id(0, 0) == 0 and p.node_id(0, 3) == 3 and p.node_id(1, 0) == 4 and p.node_id(5, 3) == 23
    for n in range(p.n_slots):
        assert p.node_id(*p.coords(n)) == n
    with pytest.raises(ValueError):
        p.node_id(6, 0)
    with pytest.raises(ValueError):
        p.coords(24)


@pytest.mark.parametrize("w,h", [(1, 1), (2, 2), (3, 5), (6, 4), (8, 8)])
def test_ring_count_closed_form(w: int, h: int) -> None:
    p = Package(w, h, 100.0)
    expected = w * h if min(w, h) <= 2 else 2 * w + 2 * h - 4
    assert p.n_ring == expected
    assert len(p.ring_nodes) + len(p.interior_nodes) == w * h


def test_manhattan_is_a_metric_and_neighbours_are_at_distance_one() -> None:
    p = Package()
    nodes = range(p.n_slots)
    for a, b in itertools.product(nodes, nodes):
        assert p.manhattan(a, b) == p.manhattan(b, a) >= 0
        assert (p.manhattan(a, b) == 0) == (a == b)
    for a, b, c in itertools.product(nodes, nodes, nodes):
        assert p.manhattan(a, c) <= p.manhattan(a, b) + p.manhattan(b, c)
    for a in nodes:
        nb = p.neighbors(a)
        assert all(p.manhattan(a, b) == 1 for b in nb)
        assert len(nb) == sum(1 for b in nodes if p.manhattan(a, b) == 1)
    assert p.manhattan(p.node_id(0, 0), p.node_id(5, 3)) == 8


def test_interposer_area() -> None:
    assert Package(6, 4, 121.0).interposer_area_mm2() == pytest.approx(2904.0)
