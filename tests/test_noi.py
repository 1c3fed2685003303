"""Network on interposer: mesh numbering, XY routing, max-min fair sharing, event timing, accounting."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from hydra_opt.hardware.noi import FlowNetwork, Mesh, plot_link_heatmap

GB = 1e9


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)


def test_node_numbering_and_link_count() -> None:
    m = Mesh(6, 4, 256, 1e-8)
    assert m.n_nodes == 24
    assert m.node(1, 0) == 4 and m.node(0, 3) == 3 and m.xy(23) == (5, 3)  # x·height + y
    assert m.n_links == 2 * (5 * 4 + 6 * 3)
    for lk in range(m.n_links):
        assert m.hops(int(m.link_src[lk]), int(m.link_dst[lk])) == 1
    ring = [n for n in range(24) if m.is_ring(n)]
    assert len(ring) == 16


@pytest.mark.parametrize("w,h", [(6, 4), (3, 5), (1, 4), (5, 1), (2, 2)])
def test_routes_are_minimal_xy_and_connected(w: int, h: int) -> None:
    m = Mesh(w, h, 100, 0.0)
    for s, d in itertools.product(range(m.n_nodes), repeat=2):
        r = m.route(s, d)
        assert len(r) == m.hops(s, d)
        nodes = m.route_nodes(s, d)
        assert nodes[0] == s and nodes[-1] == d
        for lk, (a, b) in zip(r, itertools.pairwise(nodes)):
            assert (m.link_src[lk], m.link_dst[lk]) == (a, b)
        # XY: x changes first, then y; never both after a y move.
        xs = [m.xy(n) for n in nodes]
        moved_y = False
        for (x0, y0), (x1, y1) in itertools.pairwise(xs):
            if y0 != y1:
                moved_y = True
            else:
                assert not moved_y, "x move after a y move"
        assert m.route(s, d) is r  # cached


@pytest.mark.parametrize("routing", ["yx", "o1turn"])
def test_other_routings_are_minimal_and_dimension_ordered(routing: str) -> None:
    m = Mesh(5, 4, 100, 0.0, routing=routing)
    orders = set()
    for s, d in itertools.product(range(m.n_nodes), repeat=2):
        nodes = m.route_nodes(s, d)
        assert len(nodes) - 1 == m.hops(s, d) and nodes[0] == s and nodes[-1] == d
        axes = ["x" if a // 4 != b // 4 else "y" for a, b in itertools.pairwise(nodes)]
        assert axes == sorted(axes) or axes == sorted(axes, reverse=True)  # one turn at most
        if "x" in axes and "y" in axes:
            orders.add(axes[0])
    assert orders == ({"y"} if routing == "yx" else {"x", "y"})
    with pytest.raises(ValueError):
        Mesh(2, 2, 1.0, routing="adaptive")


def test_o1turn_spreads_egress_of_an_edge_node() -> None:
    # A left-edge node sending to every other column: XY funnels everything through its one +x link.
    for routing, expect_links in (("xy", 1), ("o1turn", 3)):
        m = Mesh(6, 4, 100, 0.0, routing=routing)
        src = m.node(0, 1)
        first = {m.route(src, m.node(x, y))[0] for x in range(1, 6) for y in range(4)}
        assert len(first) == expect_links


def test_bisection() -> None:
    assert Mesh(6, 4, 100).bisection_bw_gbps() == 400.0
    assert Mesh(4, 6, 100).bisection_bw_gbps(bidirectional=True) == 800.0
    assert Mesh(1, 1, 100).bisection_links() == 0


@pytest.mark.parametrize("src,dst", [(0, 23), (5, 18), (9, 9), (3, 4)])
def test_lone_flow_takes_bytes_over_bw_plus_hop_latency(src: int, dst: int) -> None:
    m = Mesh(6, 4, 384, 7e-9)
    net = FlowNetwork(m)
    nbytes = 3.7e8
    net.add_flow("f", src, dst, nbytes, 0.25)
    hops = m.hops(src, dst)
    expect_drain = 0.25 + (nbytes / (384 * GB) if hops else 0.0)
    t, fid = net.next_completion()
    assert fid == "f" and _close(t, expect_drain)
    (done,) = net.advance(t)
    assert _close(done.delivered_s - 0.25, m.transfer_time_s(src, dst, nbytes))
    assert _close(done.delivered_s, 0.25 + (nbytes / (384 * GB) if hops else 0) + hops * 7e-9)
    assert net.n_active == 0 and net.next_completion() is None


def test_two_flows_sharing_a_link_each_get_half() -> None:
    m = Mesh(4, 1, 100, 0.0)
    net = FlowNetwork(m)
    net.add_flow("a", 0, 3, 1e9, 0.0)  # links 0→1→2→3
    net.add_flow("b", 1, 2, 0.5e9, 0.0)  # shares link 1→2
    assert _close(net.rate_gbps("a"), 50.0) and _close(net.rate_gbps("b"), 50.0)
    # b drains at 0.5e9/50e9 = 0.01 s; a then has 0.5e9 left at the full 100 GB/s → 0.015 s.
    t, fid = net.next_completion()
    assert fid == "b" and _close(t, 0.01)
    assert [d.flow_id for d in net.advance(t)] == ["b"]
    assert _close(net.rate_gbps("a"), 100.0)
    t, fid = net.next_completion()
    assert fid == "a" and _close(t, 0.015)


def test_opposite_directions_do_not_share() -> None:
    net = FlowNetwork(Mesh(2, 1, 100, 0.0))
    net.add_flow("ab", 0, 1, 1e9, 0.0)
    net.add_flow("ba", 1, 0, 1e9, 0.0)
    assert _close(net.rate_gbps("ab"), 100.0) and _close(net.rate_gbps("ba"), 100.0)


def test_maxmin_textbook_example() -> None:
    # Bertsekas & Gallager style: link L1 = 0→1 carries {A, B}; L2 = 1→2 carries {A, C, D}; unit capacity.
    # Progressive filling saturates L2 first at 1/3 (A, C, D frozen), then B takes the rest of L1: 2/3.
    net = FlowNetwork(Mesh(3, 1, 1.0, 0.0))
    net.add_flow("A", 0, 2, 1.0, 0.0)
    net.add_flow("B", 0, 1, 1.0, 0.0)
    net.add_flow("C", 1, 2, 1.0, 0.0)
    net.add_flow("D", 1, 2, 1.0, 0.0)
    rates = {f: net.rate_gbps(f) for f in "ABCD"}
    for f in "ACD":
        assert _close(rates[f], 1 / 3)
    assert _close(rates["B"], 2 / 3)


def test_maxmin_is_feasible_and_every_flow_has_a_saturated_bottleneck() -> None:
    # Defining property of max-min fairness: each flow crosses a saturated resource on which its rate is maximal.
    rng = np.random.default_rng(7)
    m = Mesh(4, 3, 50, 0.0)
    for trial in range(30):
        net = FlowNetwork(m, port_gbps={0: 80.0, 5: 30.0})
        k = int(rng.integers(2, 15))
        flows = []
        for i in range(k):
            s, d = (int(v) for v in rng.integers(0, m.n_nodes, 2))
            if s == d:
                d = (s + 1) % m.n_nodes
            cap = float(rng.uniform(5, 60)) if rng.random() < 0.3 else None
            net.add_flow(i, s, d, 1e6, 0.0, cap_gbps=cap)
            flows.append((i, s, d, cap))
        rate = {i: net.rate_gbps(i) for i, *_ in flows}
        res = {i: net.flow_resources(i) for i, *_ in flows}
        load: dict[int, float] = {}
        for i, r in res.items():
            for x in r:
                load[x] = load.get(x, 0.0) + rate[i]
        caps = [net.resource_capacity_gbps(r) for r in range(net.n_resources)]
        for x, v in load.items():
            assert v <= caps[x] * (1 + 1e-9)
        for i, s, d, cap in flows:
            if cap is not None and math.isclose(rate[i], cap, rel_tol=1e-9):
                continue
            ok = any(
                math.isclose(load[x], caps[x], rel_tol=1e-9)
                and all(rate[j] <= rate[i] * (1 + 1e-9) for j in res if x in res[j])
                for x in res[i]
            )
            assert ok, f"trial {trial}: flow {i} has no bottleneck"


def test_port_and_flow_caps() -> None:
    m = Mesh(3, 1, 100, 0.0)
    net = FlowNetwork(m, port_gbps={0: 60.0})
    net.add_flow("a", 0, 1, 1e9, 0.0)
    net.add_flow("b", 0, 2, 1e9, 0.0)
    net.add_flow("c", 1, 2, 1e9, 0.0, cap_gbps=10.0)
    assert _close(net.rate_gbps("a"), 30.0) and _close(net.rate_gbps("b"), 30.0)
    assert _close(net.rate_gbps("c"), 10.0)
    r = net.add_resource("shared", 8.0)
    net.add_flow("d", 2, 1, 1e9, 0.0, via=[r])
    assert _close(net.rate_gbps("d"), 8.0)


def test_sharing_modes_order() -> None:
    # equal ≤ maxmin ≤ none, flow by flow, on the textbook example.
    rates = {}
    for mode in ("equal", "maxmin", "none"):
        net = FlowNetwork(Mesh(3, 1, 1.0, 0.0), sharing=mode)
        for f, s, d in (("A", 0, 2), ("B", 0, 1), ("C", 1, 2), ("D", 1, 2)):
            net.add_flow(f, s, d, 1.0, 0.0)
        rates[mode] = np.array([net.rate_gbps(f) for f in "ABCD"])
    assert np.all(rates["equal"] <= rates["maxmin"] + 1e-12)
    assert np.all(rates["maxmin"] <= rates["none"] + 1e-12)
    assert _close(rates["equal"][1], 0.5)  # B's fair share of L1 is not topped up in "equal"


def test_bytes_are_conserved_and_utilisation_binned() -> None:
    m = Mesh(3, 2, 10, 0.0)
    net = FlowNetwork(m, bin_s=0.05)
    rng = np.random.default_rng(1)
    t = 0.0
    total_link_bytes = 0.0
    finished = []
    for i in range(40):
        t += float(rng.exponential(0.02))
        finished += net.advance(t)  # drains up to t must be processed before adding
        s, d = (int(v) for v in rng.choice(m.n_nodes, 2, replace=False))
        nb = float(rng.uniform(1e7, 5e8))
        net.add_flow(i, s, d, nb, t)
        total_link_bytes += nb * m.hops(s, d)
    while (nx := net.next_completion()) is not None:
        finished += net.advance(nx[0])
    assert sorted(d.flow_id for d in finished) == list(range(40))
    carried = net.carried_bytes()[: m.n_links].sum()
    assert math.isclose(carried, total_link_bytes, rel_tol=1e-9)
    _, util = net.utilisation_series()
    assert util.shape[1] == m.n_links and np.all(util <= 1 + 1e-9) and np.all(util >= 0)
    assert math.isclose((util * 10e9 * 0.05).sum(), total_link_bytes, rel_tol=1e-9)
    assert np.all(net.link_utilisation() <= 1 + 1e-9)


def test_every_flow_completes_once_and_drains_in_order() -> None:
    m = Mesh(4, 4, 64, 1e-8)
    net = FlowNetwork(m)
    rng = np.random.default_rng(3)
    for i in range(25):
        s, d = (int(v) for v in rng.integers(0, 16, 2))
        net.add_flow(i, s, d, float(rng.uniform(0, 1e8)), 0.0)
    seen = []
    last = 0.0
    while (nx := net.next_completion()) is not None:
        for d in net.advance(nx[0]):
            assert d.drained_s >= last - 1e-15
            last = d.drained_s
            seen.append(d.flow_id)
    assert sorted(seen) == list(range(25))


def test_adding_after_a_missed_drain_raises_and_remove_returns_rest() -> None:
    net = FlowNetwork(Mesh(2, 1, 100, 0.0))
    net.add_flow("a", 0, 1, 1e9, 0.0)  # drains at 0.01
    with pytest.raises(RuntimeError):
        net.add_flow("b", 0, 1, 1e9, 0.02)
    net.advance(0.004)
    assert math.isclose(net.remove_flow("a", 0.004), 0.6e9, rel_tol=1e-12)
    assert net.n_active == 0
    with pytest.raises(ValueError):
        net.advance(0.001)


def test_heatmap_png(tmp_path) -> None:
    m = Mesh(6, 4, 256, 1e-8)
    out = tmp_path / "noi.png"
    plot_link_heatmap(m, np.linspace(0, 1, m.n_links), str(out), node_labels=["n"] * 24, title="t")
    assert out.stat().st_size > 1000
    with pytest.raises(ValueError):
        plot_link_heatmap(m, np.zeros(3), str(out))


@pytest.mark.parametrize("mode", ["maxmin", "equal", "none"])
def test_incremental_rates_equal_a_fresh_computation(mode: str) -> None:
    # Rates are re-computed only for the component (maxmin) / neighbours (equal) of each change; after any
    # sequence of starts and drains they must equal a from-scratch computation over the active flows.
    m = Mesh(5, 4, 40, 1e-9)
    ports = {0: 30.0, 7: 55.0, 19: 25.0}
    net = FlowNetwork(m, port_gbps=ports, sharing=mode)
    rng = np.random.default_rng(42)
    t = 0.0
    meta = {}
    for i in range(120):
        t += float(rng.exponential(2e-4))
        net.advance(t)
        s, d = (int(v) for v in rng.choice(m.n_nodes, 2, replace=False))
        cap = float(rng.uniform(5, 50)) if rng.random() < 0.25 else None
        net.add_flow(i, s, d, float(rng.uniform(1e5, 5e6)), t, cap_gbps=cap)
        meta[i] = (s, d, cap)
        if i % 7 == 0:
            fresh = FlowNetwork(m, port_gbps=ports, sharing=mode)
            active = [j for j in meta if j in net]
            for j in active:
                s2, d2, c2 = meta[j]
                fresh.add_flow(j, s2, d2, 1.0, 0.0, cap_gbps=c2)
            for j in active:
                assert math.isclose(net.rate_gbps(j), fresh.rate_gbps(j), rel_tol=1e-9), (mode, i, j)


def test_deterministic_accounting() -> None:
    def run() -> tuple[list, np.ndarray]:
        m = Mesh(4, 4, 64, 1e-8)
        net = FlowNetwork(m, port_gbps={0: 100.0, 15: 100.0}, bin_s=1e-3)
        rng = np.random.default_rng(9)
        t, out = 0.0, []
        for i in range(200):
            t += float(rng.exponential(1e-4))
            out += [(d.flow_id, d.drained_s) for d in net.advance(t)]
            s, d = (int(v) for v in rng.choice(16, 2, replace=False))
            net.add_flow(i, s, d, float(rng.uniform(1e4, 1e7)), t)
        while (nx := net.next_completion()) is not None:
            out += [(d.flow_id, d.drained_s) for d in net.advance(nx[0])]
        return out, net.utilisation_series()[1]

    a, ua = run()
    b, ub = run()
    assert a == b and np.array_equal(ua, ub)
