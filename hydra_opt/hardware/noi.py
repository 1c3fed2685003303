"""Network on interposer (NoI): a 2-D mesh with XY routing and max-min fair sharing of link bandwidth.

Definitions (docs/noi_placement.md):

* Nodes are the slots of a ``width × height`` grid; node id = ``x·height + y`` (column-major, as the HYDRA
  artifact numbers its 6×4 mesh and as ``hydra_opt.system.placement`` numbers slots).
* Every pair of 4-neighbour nodes is joined by two *directed* links (one per direction), each with bandwidth
  ``link_bw_gbps`` (GB/s, 1 GB = 1e9 bytes) and traversal latency ``hop_latency_s``.
* Routing is dimension-order (XY): first along x to the destination column, then along y. It is minimal
  (``hops = |dx| + |dy|``) and deadlock-free.
* Contention (:class:`FlowNetwork`): concurrent flows are fluids that share every resource they cross (links and
  optional node ports such as an HBM's interface) by **max-min fairness**, computed by progressive filling and
  recomputed whenever a flow starts or drains. A flow's data drains at its current rate; its last byte is
  delivered ``hops · hop_latency_s`` after it drains (cut-through pipelining: header latency is paid once).
  So a lone flow on an idle mesh takes exactly ``nbytes / bw + hops · hop_latency_s``.

The event-driven engine drives a :class:`FlowNetwork` with :meth:`~FlowNetwork.add_flow`,
:meth:`~FlowNetwork.next_completion` and :meth:`~FlowNetwork.advance`; see their docstrings.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ROUTINGS",
    "SHARING_MODES",
    "FlowDone",
    "FlowNetwork",
    "Mesh",
    "plot_link_heatmap",
]

#: Bandwidth-sharing models of :class:`FlowNetwork`.
#: ``maxmin``: max-min fair (progressive filling; work-conserving; the default).
#: ``equal``: each resource is split equally among the flows crossing it and a flow gets the minimum of its
#: shares (one vectorised pass, no redistribution of unused share: a pessimistic, cheaper approximation).
#: ``none``: no contention, every flow runs at its own bottleneck capacity (an optimistic bound).
SHARING_MODES: tuple[str, ...] = ("maxmin", "equal", "none")

#: Minimal, deterministic routing functions of :class:`Mesh`.
#: ``xy``: dimension order, x first (the default). ``yx``: y first.
#: ``o1turn``: static O1TURN — a flow takes XY when ``(src + dst)`` is even and YX otherwise, so traffic out of
#: (or into) one node is spread over both of its first (last) links instead of funnelled through one.
ROUTINGS: tuple[str, ...] = ("xy", "yx", "o1turn")

# Directions, in the order links are numbered for each node.
_DIRS: tuple[tuple[int, int], ...] = ((1, 0), (-1, 0), (0, 1), (0, -1))


class Mesh:
    """A ``width × height`` 2-D mesh of directed links with dimension-order (XY) routing.

    Args:
        width: Number of columns (x extent), ≥ 1.
        height: Number of rows (y extent), ≥ 1.
        link_bw_gbps: Bandwidth of every directed link, GB/s (> 0).
        hop_latency_s: Latency of one link traversal, s (≥ 0).
        routing: One of :data:`ROUTINGS` (default ``"xy"``).

    Attributes:
        n_nodes: ``width·height``.
        n_links: Number of directed links, ``2·((width−1)·height + width·(height−1))``.
        link_src, link_dst: ``int64`` arrays (n_links,) with each link's endpoints.
    """

    def __init__(
        self, width: int, height: int, link_bw_gbps: float, hop_latency_s: float = 0.0, routing: str = "xy"
    ) -> None:
        if int(width) != width or int(height) != height or width < 1 or height < 1:
            raise ValueError(f"mesh size must be positive integers, got {width}x{height}")
        if not (link_bw_gbps > 0 and math.isfinite(link_bw_gbps)):
            raise ValueError(f"link_bw_gbps must be a positive finite number, got {link_bw_gbps}")
        if not (hop_latency_s >= 0 and math.isfinite(hop_latency_s)):
            raise ValueError(f"hop_latency_s must be a non-negative finite number, got {hop_latency_s}")
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}, got {routing!r}")
        self.routing = routing
        self.width = int(width)
        self.height = int(height)
        self.link_bw_gbps = float(link_bw_gbps)
        self.hop_latency_s = float(hop_latency_s)
        self.n_nodes = self.width * self.height
        src: list[int] = []
        dst: list[int] = []
        self._link_of: dict[tuple[int, int], int] = {}
        for n in range(self.n_nodes):
            x, y = self.xy(n)
            for dx, dy in _DIRS:
                nx, ny = x + dx, y + dy
                if 0 <= nx < self.width and 0 <= ny < self.height:
                    m = self.node(nx, ny)
                    self._link_of[(n, m)] = len(src)
                    src.append(n)
                    dst.append(m)
        self.n_links = len(src)
        self.link_src = np.asarray(src, dtype=np.int64)
        self.link_dst = np.asarray(dst, dtype=np.int64)
        self._routes: dict[tuple[int, int], tuple[int, ...]] = {}

    def __repr__(self) -> str:
        return (
            f"Mesh(width={self.width}, height={self.height}, link_bw_gbps={self.link_bw_gbps}, "
            f"hop_latency_s={self.hop_latency_s}, routing={self.routing!r})"
        )

    # -- coordinates -------------------------------------------------------------------------------------------
    def node(self, x: int, y: int) -> int:
        """Node id of column ``x``, row ``y`` (``x·height + y``)."""
        if not (0 <= x < self.width and 0 <= y < self.height):
            raise ValueError(f"({x}, {y}) is outside the {self.width}x{self.height} mesh")
        return x * self.height + y

    def xy(self, node: int) -> tuple[int, int]:
        """(x, y) of a node id."""
        if not 0 <= node < self.n_nodes:
            raise ValueError(f"node {node} is outside the {self.width}x{self.height} mesh")
        return divmod(int(node), self.height)

    def hops(self, src: int, dst: int) -> int:
        """Manhattan distance between two nodes = number of links on any minimal route."""
        (x0, y0), (x1, y1) = self.xy(src), self.xy(dst)
        return abs(x0 - x1) + abs(y0 - y1)

    def distance_matrix(self) -> np.ndarray:
        """``(n_nodes, n_nodes)`` int64 matrix of Manhattan distances."""
        xs, ys = np.divmod(np.arange(self.n_nodes), self.height)
        return np.abs(xs[:, None] - xs[None, :]) + np.abs(ys[:, None] - ys[None, :])

    def is_ring(self, node: int) -> bool:
        """Whether a node is on the outer ring (first/last column or row)."""
        x, y = self.xy(node)
        return x in (0, self.width - 1) or y in (0, self.height - 1)

    def link(self, src: int, dst: int) -> int:
        """Id of the directed link from node ``src`` to its neighbour ``dst``."""
        try:
            return self._link_of[(int(src), int(dst))]
        except KeyError:
            raise ValueError(f"nodes {src} and {dst} are not neighbours") from None

    # -- routing -----------------------------------------------------------------------------------------------
    def route(self, src: int, dst: int) -> tuple[int, ...]:
        """Link ids of the route from ``src`` to ``dst`` under :attr:`routing` (empty when equal); cached."""
        key = (int(src), int(dst))
        r = self._routes.get(key)
        if r is None:
            x_first = self.routing == "xy" or (self.routing == "o1turn" and (key[0] + key[1]) % 2 == 0)
            r = self._dim_order(key[0], key[1], x_first)
            self._routes[key] = r
        return r

    def _dim_order(self, src: int, dst: int, x_first: bool) -> tuple[int, ...]:
        (x, y), (x1, y1) = self.xy(src), self.xy(dst)
        links: list[int] = []
        n = src
        for axis in ("x", "y") if x_first else ("y", "x"):
            if axis == "x":
                while x != x1:
                    x += 1 if x1 > x else -1
                    m = self.node(x, y)
                    links.append(self._link_of[(n, m)])
                    n = m
            else:
                while y != y1:
                    y += 1 if y1 > y else -1
                    m = self.node(x, y)
                    links.append(self._link_of[(n, m)])
                    n = m
        return tuple(links)

    def route_nodes(self, src: int, dst: int) -> tuple[int, ...]:
        """Nodes visited by :meth:`route`, both ends included."""
        return (int(src), *(int(self.link_dst[lk]) for lk in self.route(src, dst)))

    # -- capacity summaries ------------------------------------------------------------------------------------
    def bisection_links(self) -> int:
        """Directed links crossing the mesh's bisection, per direction.

        The cut is the straight line across the longer dimension through its middle (for an odd extent the
        halves differ by one column/row), so it crosses ``min(width, height)`` links in each direction (the
        shorter extent). A 1×1 mesh has none.
        """
        if self.n_nodes == 1:
            return 0
        if self.width >= self.height:
            return self.height if self.width > 1 else 0
        return self.width

    def bisection_bw_gbps(self, *, bidirectional: bool = False) -> float:
        """Bisection bandwidth, GB/s: links across the bisection × link bandwidth (one direction by default)."""
        return self.bisection_links() * self.link_bw_gbps * (2 if bidirectional else 1)

    def transfer_time_s(self, src: int, dst: int, nbytes: float) -> float:
        """Time of a lone flow on an idle mesh: ``nbytes / link_bw + hops · hop_latency``, s."""
        h = self.hops(src, dst)
        if h == 0:
            return 0.0
        return float(nbytes) / (self.link_bw_gbps * 1e9) + h * self.hop_latency_s


@dataclass(frozen=True)
class FlowDone:
    """A flow whose data has drained.

    Attributes:
        flow_id: The caller's id of the flow.
        drained_s: Time its last byte left the source (it stops using bandwidth), s.
        delivered_s: Time its last byte arrives, ``drained_s + hops · hop_latency_s``, s.
        nbytes: Bytes it carried.
        start_s: Time it was added, s.
    """

    flow_id: Hashable
    drained_s: float
    delivered_s: float
    nbytes: float
    start_s: float


class _Flow:
    """Mutable state of an active flow: ``rem`` bytes were left at time ``t_upd``; it drains at ``drain_t``."""

    __slots__ = (
        "cap",
        "drain_t",
        "flow_id",
        "hops",
        "nbytes",
        "nrate",
        "rate",
        "rem",
        "res",
        "seq",
        "start_s",
        "t_upd",
        "ver",
    )  # fmt: skip

    def __init__(self, flow_id, res, nbytes, start_s, hops, cap, seq) -> None:
        self.flow_id = flow_id
        self.res: tuple[int, ...] = res
        self.nbytes: float = nbytes
        self.start_s: float = start_s
        self.hops: int = hops
        self.cap: float = cap  # bytes/s, inf when uncapped
        self.rem: float = nbytes
        self.t_upd: float = start_s
        self.rate: float = 0.0
        self.nrate: float = 0.0
        self.drain_t: float = math.inf
        self.ver: int = 0
        self.seq: int = seq


class FlowNetwork:
    """Concurrent flows on a :class:`Mesh` sharing link (and optional port) bandwidth.

    Resources are the mesh's directed links (ids ``0 … n_links−1``), then one *port* per node listed in
    ``port_gbps`` (e.g. an HBM's interface bandwidth, crossed by every flow that starts or ends at that node),
    then any resource added with :meth:`add_resource`. A flow crosses the links of its XY route, the ports of
    its two end nodes and the extra resources it names, and may have its own rate cap.

    Rates are recomputed exactly (not time-stepped) whenever flows start or drain, lazily (once per instant),
    and *incrementally*: a max-min allocation decomposes over the connected components of the flow–resource
    graph, so only the component(s) touched by the change are refilled (``equal``: only the flows sharing a
    resource with the changed ones; ``none``: only the new flow). Each flow keeps its own drain time in a heap,
    so :meth:`next_completion` is O(1) amortised and time advances without touching idle flows.

    Typical engine loop::

        net.add_flow("w3", src=hbm, dst=chiplet, nbytes=2e6, now_s=t)
        t_next, fid = net.next_completion()          # earliest drain with current rates
        ...                                          # (after handling other events that come earlier)
        for done in net.advance(t_next):             # process drains up to t_next, in time order
            engine.schedule(done.delivered_s, done.flow_id)

    Adding or removing a flow changes the rates, so the engine must call :meth:`next_completion` again after
    it. Calling :meth:`add_flow` at a time later than a pending drain raises (the engine skipped an event).

    Args:
        mesh: The mesh.
        port_gbps: Optional node → port bandwidth (GB/s) shared by all flows starting or ending at that node.
        sharing: One of :data:`SHARING_MODES`.
        bin_s: If given, carried bytes per resource are also integrated into time bins of this width (s) for
            utilisation over time (:meth:`utilisation_series`); totals are always recorded.
    """

    def __init__(
        self,
        mesh: Mesh,
        *,
        port_gbps: Mapping[int, float] | None = None,
        sharing: str = "maxmin",
        bin_s: float | None = None,
    ) -> None:
        if sharing not in SHARING_MODES:
            raise ValueError(f"sharing must be one of {SHARING_MODES}, got {sharing!r}")
        if bin_s is not None and not (bin_s > 0 and math.isfinite(bin_s)):
            raise ValueError(f"bin_s must be positive, got {bin_s}")
        self.mesh = mesh
        self.sharing = sharing
        self.bin_s = None if bin_s is None else float(bin_s)
        caps = [mesh.link_bw_gbps * 1e9] * mesh.n_links
        self._names: list[str] = [f"link{lk}:{mesh.link_src[lk]}->{mesh.link_dst[lk]}" for lk in range(mesh.n_links)]
        self._port_of: dict[int, int] = {}
        for node, gbps in sorted((port_gbps or {}).items()):
            mesh.xy(node)  # validates
            if not (gbps > 0):
                raise ValueError(f"port bandwidth of node {node} must be > 0, got {gbps}")
            self._port_of[int(node)] = len(caps)
            caps.append(float(gbps) * 1e9)
            self._names.append(f"port{node}")
        self._cap: list[float] = caps
        self._users: list[set[_Flow]] = [set() for _ in caps]
        self._load: list[float] = [0.0] * len(caps)  # bytes/s carried now
        self._res_t: list[float] = [0.0] * len(caps)  # time up to which ``_bytes``/bins are integrated
        self._bytes: list[float] = [0.0] * len(caps)
        self._bins: list[list[float]] = []  # [bin][resource] carried bytes
        self._flows: dict[Hashable, _Flow] = {}  # insertion order = start order
        self._heap: list[tuple[float, int, int, _Flow]] = []
        self._seq = 0
        self._now = 0.0  # time the caller has advanced to
        self._t_change = 0.0  # time of the pending (not yet re-rated) changes
        self._seeds: set[int] = set()  # resources whose flows need new rates
        self._new: list[_Flow] = []  # flows added since the last re-rating
        self._res_cache: dict[tuple[int, int], tuple[int, ...]] = {}
        self.n_recomputes = 0
        self.n_rerated = 0

    # -- resources ---------------------------------------------------------------------------------------------
    @property
    def n_resources(self) -> int:
        """Links + ports + extra resources."""
        return len(self._cap)

    def resource_name(self, r: int) -> str:
        """Readable name of resource ``r`` (``link7:3->7``, ``port12``, or the name given)."""
        return self._names[r]

    def resource_capacity_gbps(self, r: int) -> float:
        """Capacity of resource ``r``, GB/s."""
        return self._cap[r] / 1e9

    def port(self, node: int) -> int | None:
        """Resource id of a node's port, or None."""
        return self._port_of.get(int(node))

    def flow_resources(self, flow_id: Hashable) -> tuple[int, ...]:
        """Resource ids an active flow crosses (its route's links, end ports, extras)."""
        return self._flows[flow_id].res

    def add_resource(self, name: str, capacity_gbps: float) -> int:
        """Add a shared resource (GB/s) that flows may name in ``via``; returns its id."""
        if not (capacity_gbps > 0):
            raise ValueError(f"capacity of {name!r} must be > 0, got {capacity_gbps}")
        self._cap.append(float(capacity_gbps) * 1e9)
        self._names.append(str(name))
        self._users.append(set())
        self._load.append(0.0)
        self._res_t.append(self._now)
        self._bytes.append(0.0)
        for row in self._bins:
            row.append(0.0)
        return len(self._cap) - 1

    # -- flows -------------------------------------------------------------------------------------------------
    @property
    def now_s(self) -> float:
        """Time the network has been advanced to, s."""
        return self._now

    @property
    def n_active(self) -> int:
        """Flows still draining."""
        return len(self._flows)

    def __contains__(self, flow_id: Hashable) -> bool:
        return flow_id in self._flows

    def add_flow(
        self,
        flow_id: Hashable,
        src: int,
        dst: int,
        nbytes: float,
        now_s: float,
        *,
        cap_gbps: float | None = None,
        via: Iterable[int] = (),
    ) -> None:
        """Start a flow of ``nbytes`` from node ``src`` to node ``dst`` at time ``now_s``.

        Args:
            flow_id: Any hashable id, unique among active flows.
            src, dst: Node ids (equal: a local flow that uses no link, only the ports/caps given).
            nbytes: Bytes to move (≥ 0).
            now_s: Current time, s (≥ the network's time; no drain may be pending before it).
            cap_gbps: Optional cap on this flow's rate, GB/s (e.g. the bandwidth reserved for a task).
            via: Extra resource ids (from :meth:`add_resource`) the flow crosses.
        """
        if flow_id in self._flows:
            raise ValueError(f"flow {flow_id!r} is already active")
        if not (nbytes >= 0 and math.isfinite(nbytes)):
            raise ValueError(f"nbytes must be finite and >= 0, got {nbytes}")
        if cap_gbps is not None and not (cap_gbps > 0):
            raise ValueError(f"cap_gbps must be > 0, got {cap_gbps}")
        self._at(now_s)
        key = (int(src), int(dst))
        res = self._res_cache.get(key)
        if res is None:
            lst = list(self.mesh.route(src, dst))
            for node in (key if key[0] != key[1] else key[:1]):
                p = self._port_of.get(node)
                if p is not None:
                    lst.append(p)
            res = self._res_cache[key] = tuple(lst)
        if via:
            lst = list(res)
            for r in via:
                if not 0 <= r < len(self._cap):
                    raise ValueError(f"unknown resource id {r}")
                if r not in lst:
                    lst.append(int(r))
            res = tuple(lst)
        h = self.mesh.height
        f = _Flow(
            flow_id,
            res,
            float(nbytes),
            self._t_change,
            abs(key[0] // h - key[1] // h) + abs(key[0] % h - key[1] % h),
            math.inf if cap_gbps is None else float(cap_gbps) * 1e9,
            self._seq,
        )
        self._seq += 1
        self._flows[flow_id] = f
        for r in res:
            self._users[r].add(f)
        self._seeds.update(res)
        self._new.append(f)

    def remove_flow(self, flow_id: Hashable, now_s: float) -> float:
        """Cancel an active flow at ``now_s`` (e.g. its task was preempted); returns the bytes not yet sent."""
        f = self._flows.get(flow_id)
        if f is None:
            raise KeyError(f"flow {flow_id!r} is not active")
        self._at(now_s)
        left = f.rem - f.rate * (self._t_change - f.t_upd) if f.rate < math.inf else 0.0
        left = left if left > 0.0 else 0.0
        self._drop(f, self._t_change)
        return left

    def rate_gbps(self, flow_id: Hashable) -> float:
        """Current rate of an active flow, GB/s."""
        self._ensure_rates()
        return self._flows[flow_id].rate / 1e9

    def remaining_bytes(self, flow_id: Hashable) -> float:
        """Bytes an active flow still has to send at the current time :attr:`now_s`."""
        self._ensure_rates()
        f = self._flows[flow_id]
        if f.rate == math.inf:
            return 0.0
        r = f.rem - f.rate * (self._now - f.t_upd)
        return r if r > 0.0 else 0.0

    def next_completion(self) -> tuple[float, Hashable] | None:
        """(time, flow id) of the earliest drain with the current rates, or None when no flow is active.

        Exact until the next :meth:`add_flow`/:meth:`remove_flow` (which change rates): ask again after those.
        The flow is *delivered* ``hops · hop_latency_s`` later (see :class:`FlowDone`).
        """
        if not self._flows:
            return None
        self._ensure_rates()
        top = self._top()
        return None if top is None else (top.drain_t, top.flow_id)

    def advance(self, now_s: float) -> list[FlowDone]:
        """Move time to ``now_s``, processing every drain up to it in time order (rates recomputed after each).

        Returns:
            The flows that drained in ``(previous time, now_s]``, in drain order (ties in start order).
        """
        self._check_time(now_s)
        done: list[FlowDone] = []
        lat = self.mesh.hop_latency_s
        heap = self._heap
        while self._flows:
            self._ensure_rates()
            top = self._top()
            if top is None:
                break
            t_next = top.drain_t
            if t_next > now_s and not _close(t_next, now_s):
                break
            # Everything draining at this instant (within rounding) leaves together.
            lim = t_next + 1e-12 * max(abs(t_next), 1e-9)
            gone = []
            while heap:
                dt, _, ver, f = heap[0]
                if ver != f.ver or f.flow_id not in self._flows or self._flows[f.flow_id] is not f:
                    heapq.heappop(heap)
                    continue
                if dt > lim:
                    break
                heapq.heappop(heap)
                gone.append(f)
            gone.sort(key=lambda f: f.seq)
            for f in gone:
                self._drop(f, t_next)
                done.append(FlowDone(f.flow_id, t_next, t_next + f.hops * lat, f.nbytes, f.start_s))
            self._t_change = t_next
            if t_next > self._now:
                self._now = t_next
        if now_s > self._now:
            self._now = now_s
        if not self._seeds and not self._new:
            self._t_change = self._now
        return done

    # -- accounting --------------------------------------------------------------------------------------------
    def carried_bytes(self) -> np.ndarray:
        """Bytes carried by each resource from t = 0 to :attr:`now_s` (indexed by resource id)."""
        self._ensure_rates()
        now = self._now
        return np.array([b + ld * (now - t) for b, ld, t in zip(self._bytes, self._load, self._res_t)])

    def link_utilisation(self, duration_s: float | None = None) -> np.ndarray:
        """Mean utilisation of each directed link over ``[0, duration_s]`` (default: up to now), fraction 0–1."""
        d = self._now if duration_s is None else float(duration_s)
        n = self.mesh.n_links
        if d <= 0:
            return np.zeros(n)
        return self.carried_bytes()[:n] / (np.asarray(self._cap[:n]) * d)

    def utilisation_series(self, *, links_only: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(bin start times s, utilisation per bin × resource, fraction) from t = 0 to :attr:`now_s`.

        Requires ``bin_s``. The last bin is partial when the current time is inside it; its utilisation is
        over its full width.
        """
        if self.bin_s is None:
            raise ValueError("this FlowNetwork was created without bin_s")
        self._ensure_rates()
        for r in range(len(self._cap)):
            self._settle(r, self._now)
        n = math.ceil(self._now / self.bin_s - 1e-9) if self._now > 0 else 0
        cols = self.mesh.n_links if links_only else len(self._cap)
        b = np.zeros((n, cols))
        m = min(n, len(self._bins))
        if m:
            b[:m] = np.asarray(self._bins[:m])[:, :cols]
        util = b / (np.asarray(self._cap[:cols]) * self.bin_s)
        return np.arange(n) * self.bin_s, util

    # -- internals ---------------------------------------------------------------------------------------------
    def _check_time(self, now_s: float) -> None:
        if now_s < self._now and not _close(now_s, self._now):
            raise ValueError(f"time goes backwards: {now_s} < {self._now}")

    def _at(self, now_s: float) -> None:
        """Make ``now_s`` the time of the next change (no drain may be pending before it)."""
        self._check_time(now_s)
        if now_s > self._t_change and (self._seeds or self._new):
            self._ensure_rates()  # changes pending at an earlier instant take effect there
        if self._flows:
            top = self._top()
            if top is not None and top.drain_t < now_s and not _close(top.drain_t, now_s):
                raise RuntimeError(
                    f"flow {top.flow_id!r} drains at {top.drain_t!r} s, before {now_s!r} s: call advance() first"
                )
        if now_s > self._now:
            self._now = now_s
        if now_s > self._t_change:
            self._t_change = now_s

    def _top(self) -> _Flow | None:
        heap = self._heap
        flows = self._flows
        while heap:
            _, _, ver, f = heap[0]
            if ver == f.ver and flows.get(f.flow_id) is f:
                return f
            heapq.heappop(heap)
        return None

    def _settle(self, r: int, t: float) -> None:
        """Integrate resource ``r``'s carried bytes up to ``t`` with its current load."""
        t0 = self._res_t[r]
        if t <= t0:
            return
        ld = self._load[r]
        if ld > 0.0:
            self._bytes[r] += ld * (t - t0)
            if self.bin_s is not None:
                self._bin_add(r, ld, t0, t)
        self._res_t[r] = t

    def _bin_add(self, r: int, ld: float, t0: float, t1: float) -> None:
        w = self.bin_s
        b0, b1 = int(t0 // w), int(t1 // w)
        bins = self._bins
        while len(bins) <= b1:
            bins.append([0.0] * len(self._cap))
        if b0 == b1:
            bins[b0][r] += ld * (t1 - t0)
            return
        bins[b0][r] += ld * ((b0 + 1) * w - t0)
        for b in range(b0 + 1, b1):
            bins[b][r] += ld * w
        bins[b1][r] += ld * (t1 - b1 * w)

    def _shift_load(self, res: tuple[int, ...], delta: float, t: float) -> None:
        """Add ``delta`` bytes/s to the load of ``res`` at time ``t`` (integrals settled first)."""
        load, res_t, byt, cap = self._load, self._res_t, self._bytes, self._cap
        binned = self.bin_s is not None
        for r in res:
            t0 = res_t[r]
            ld = load[r]
            if t > t0:
                if ld > 0.0:
                    byt[r] += ld * (t - t0)
                    if binned:
                        self._bin_add(r, ld, t0, t)
                res_t[r] = t
            v = ld + delta
            load[r] = v if v > 1e-9 * cap[r] else 0.0  # exact zero when idle (no rounding residue)

    def _set_rate(self, f: _Flow, rate: float, t: float) -> None:
        """Change a flow's rate at time ``t`` (its bytes and its resources' integrals settled first)."""
        old = f.rate
        if rate == old and f.ver:
            return
        if old > 0.0:
            if old == math.inf:
                f.rem = 0.0
            else:
                rem = f.rem - old * (t - f.t_upd)
                f.rem = rem if rem > 0.0 else 0.0
        f.t_upd = t
        fin_old = old if old < math.inf else 0.0
        fin_new = rate if rate < math.inf else 0.0
        if fin_new != fin_old:
            self._shift_load(f.res, fin_new - fin_old, t)
        f.rate = rate
        f.drain_t = t if (f.rem <= 0.0 or rate == math.inf) else t + f.rem / rate
        f.ver += 1
        heapq.heappush(self._heap, (f.drain_t, f.seq, f.ver, f))

    def _drop(self, f: _Flow, t: float) -> None:
        del self._flows[f.flow_id]
        if 0.0 < f.rate < math.inf:
            self._shift_load(f.res, -f.rate, t)
        for r in f.res:
            self._users[r].discard(f)
        f.ver += 1  # invalidates its heap entry
        self._seeds.update(f.res)
        if f in self._new:
            self._new.remove(f)

    def _affected(self) -> list[_Flow]:
        """Flows whose rate may change because of the pending changes, in start order (deterministic)."""
        users = self._users
        new = self._new
        if self.sharing == "none":
            return list(new)
        if self.sharing == "equal":
            out: set[_Flow] = set(new)
            for r in self._seeds:
                out.update(users[r])
            return sorted(out, key=_by_seq) if len(out) > 1 else list(out)
        # maxmin: whole connected components of the flow–resource graph around the changed resources.
        seen_r = set(self._seeds)
        stack = list(seen_r)
        comp: set[_Flow] = set(new)
        for f in new:
            for r in f.res:
                if r not in seen_r:
                    seen_r.add(r)
                    stack.append(r)
        while stack:
            for f in users[stack.pop()]:
                if f not in comp:
                    comp.add(f)
                    for q in f.res:
                        if q not in seen_r:
                            seen_r.add(q)
                            stack.append(q)
        return sorted(comp, key=_by_seq) if len(comp) > 1 else list(comp)

    def _ensure_rates(self) -> None:
        if not self._seeds and not self._new:
            return
        flows = self._affected()
        self._seeds = set()
        self._new = []
        if not flows:  # e.g. the last flow of a component drained: nothing left to re-rate
            return
        t = self._t_change
        self.n_recomputes += 1
        self.n_rerated += len(flows)
        cap = self._cap
        if len(flows) == 1 or self.sharing == "none":  # a lone flow: its own bottleneck (all modes agree)
            for f in flows:
                f.nrate = min(min((cap[r] for r in f.res), default=math.inf), f.cap)
        elif self.sharing == "maxmin":
            _maxmin(flows, cap)
        elif self.sharing == "equal":
            users = self._users
            for f in flows:
                f.nrate = min(min((cap[r] / len(users[r]) for r in f.res), default=math.inf), f.cap)
        for f in flows:
            self._set_rate(f, f.nrate, t)


def _by_seq(f: _Flow) -> int:
    return f.seq


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)


def _maxmin(flows: Sequence[_Flow], cap: Sequence[float]) -> None:
    """Set max-min fair rates (bytes/s) of ``flows`` into ``f.nrate`` by progressive filling.

    ``flows`` must be closed under sharing (every flow crossing one of their resources is in it). All unfrozen
    flows rise together to a common level; when a resource saturates (or a flow reaches its own cap) the flows
    crossing it freeze at that level. Each round freezes ≥ 1 flow, so there are at most ``len(flows)`` rounds
    (a handful in practice). Pure Python: for the tens of flows of a chiplet package this is faster than
    numpy, whose per-call overhead dominates at this size.
    """
    users: dict[int, list[_Flow]] = {}
    for f in flows:
        f.nrate = -1.0  # -1 = not frozen yet
        for r in f.res:
            u = users.get(r)
            if u is None:
                users[r] = [f]
            else:
                u.append(f)
    cnt = {r: len(u) for r, u in users.items()}
    spare = {r: cap[r] for r in users}  # capacity not used by frozen flows
    capped = sorted((f for f in flows if f.cap < math.inf), key=lambda f: f.cap)
    ci = 0
    n_live = len(flows)
    while n_live:
        level = math.inf
        for r, c in cnt.items():
            v = spare[r] / c
            if v < level:
                level = v
        while ci < len(capped) and capped[ci].nrate >= 0.0:
            ci += 1
        if ci < len(capped) and capped[ci].cap <= level:
            level = capped[ci].cap
        if level == math.inf:  # flows that cross nothing and have no cap: unconstrained
            for f in flows:
                if f.nrate < 0.0:
                    f.nrate = math.inf
            return
        lim = level + 1e-12 * level
        freeze = [f for r, c in cnt.items() if spare[r] / c <= lim for f in users[r] if f.nrate < 0.0]
        while ci < len(capped) and capped[ci].cap <= lim:
            if capped[ci].nrate < 0.0:
                freeze.append(capped[ci])
            ci += 1
        for f in freeze:
            if f.nrate >= 0.0:
                continue
            f.nrate = level
            n_live -= 1
            for r in f.res:
                c = cnt[r] - 1
                if c:
                    cnt[r] = c
                    spare[r] -= level
                else:
                    del cnt[r]


def plot_link_heatmap(
    mesh: Mesh,
    link_util: np.ndarray,
    path: str,
    *,
    node_labels: Sequence[str] | None = None,
    title: str | None = None,
    vmax: float = 1.0,
) -> None:
    """Render mean utilisation of every directed link on the mesh as a PNG (as in HYDRA Fig. 11).

    Each directed link is a coloured bar between its nodes, offset to one side so both directions are visible
    (x-links: +x above the centre line, −x below; y-links: +y to the right, −y to the left).

    Args:
        mesh: The mesh.
        link_util: ``(n_links,)`` utilisation per link, fraction 0–1 (shown in %).
        path: Output PNG path.
        node_labels: Optional label per node (e.g. ``"HBM"``, ``"tscs_d"``).
        title: Optional figure title.
        vmax: Utilisation mapped to the top of the colour scale, fraction.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    util = np.asarray(link_util, dtype=float)
    if util.shape != (mesh.n_links,):
        raise ValueError(f"link_util must have shape ({mesh.n_links},), got {util.shape}")
    fig, ax = plt.subplots(figsize=(1.3 * mesh.width + 1.5, 1.3 * mesh.height + 0.6))
    segs = []
    off = 0.09
    for lk in range(mesh.n_links):
        (x0, y0), (x1, y1) = mesh.xy(int(mesh.link_src[lk])), mesh.xy(int(mesh.link_dst[lk]))
        if y0 == y1:
            o = off if x1 > x0 else -off
            segs.append([(x0 + 0.22 * np.sign(x1 - x0), y0 + o), (x1 - 0.22 * np.sign(x1 - x0), y1 + o)])
        else:
            o = off if y1 > y0 else -off
            segs.append([(x0 + o, y0 + 0.22 * np.sign(y1 - y0)), (x1 + o, y1 - 0.22 * np.sign(y1 - y0))])
    norm = matplotlib.colors.Normalize(vmin=0.0, vmax=100.0 * vmax)
    lc = LineCollection(segs, cmap="inferno_r", norm=norm, linewidths=6)
    lc.set_array(100.0 * util)
    ax.add_collection(lc)
    for n in range(mesh.n_nodes):
        x, y = mesh.xy(n)
        label = node_labels[n] if node_labels is not None else str(n)
        ax.add_patch(plt.Rectangle((x - 0.2, y - 0.2), 0.4, 0.4, fc="#dde6f0", ec="#334", lw=0.8))
        ax.text(x, y, label, ha="center", va="center", fontsize=6)
    ax.set_xlim(-0.5, mesh.width - 0.5)
    ax.set_ylim(-0.5, mesh.height - 0.5)
    ax.set_aspect("equal")
    ax.set_xticks(range(mesh.width))
    ax.set_yticks(range(mesh.height))
    ax.set_xlabel("x (column)")
    ax.set_ylabel("y (row)")
    fig.colorbar(lc, ax=ax, label="Link utilisation (%)", fraction=0.04)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
