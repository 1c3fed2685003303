# cython: boundscheck=False, wraparound=False
# (Compiled only. Every index here is in range by construction and never negative — heap slots below the heap
# size, resource/chiplet/block/request ids, guarded -1 sentinels — so the per-access checks are dropped: -8 % of
# the static+elastic loop's instructions. An indexing bug would no longer raise IndexError: the pure-Python
# sources, run by the tests and the identity check, still do.)
"""A lean, incremental flow model for the engine's hot path: per-resource fair sharing of links and HBM ports.

Every flow crosses resources (directed links of its XY route and the memory's interface port) and has its own
rate cap (its demand: the pace its task consumes data). A flow drains at the minimum over its resources of the
resource's *share*:

* ``waterfill=True`` (``SimOptions.sharing = "fair"``, the default): the share is the resource's max-min
  water-filling level computed from what each flow crossing it can take at most — its own cap and the current
  shares of its *other* resources (one step of constraint propagation): flows that can take less than an equal
  split get that, the rest is split equally among the others. Exact max-min fairness when each flow is limited by
  its own cap or by one resource; otherwise a close approximation (shares of other resources may be one update
  stale).
* ``waterfill=False`` (``"equal"``, as ``hydra_opt.hardware.noi.FlowNetwork(sharing="equal")``): the share is the
  capacity divided by the number of flows (no redistribution at all; more pessimistic).

Rates are recomputed — exactly, not time-stepped — whenever a flow starts or is delivered, only for the flows on
a resource whose share changed; the engine re-times their delivery events with a version number. Exact global
max-min fairness is available through ``FlowNetwork`` (``SimOptions.sharing = "maxmin"``).

Speed (the engine's hot path): a resource whose flows' own caps sum to no more than its capacity is not a
bottleneck — water-filling gives every flow its cap and the level is the capacity — so its level is known without
looking at its flows (the per-resource sum of finite caps and count of uncapped flows are kept incrementally).
Flows are re-timed only when the share of one of their resources changed. Both shortcuts give the same rates as
the full computation.

Each resource keeps its flows twice: as records in a list (what the levels and the re-timing walk, without a
set or dict per visit) and as a set of flow ids. The re-timed flows get consecutive event sequence numbers, so
their order matters only among flows delivered at the same instant: it is the iteration order of the union of
the id sets of the resources whose share changed (the order of the original set-based model). The lists give
the re-timed flows in another order; only when two of them have equal delivery times is that set built and the
order taken from it (see :meth:`EqualShareFlows._retime_changed`). So the lists' own order never matters (a level
sorts the caps; re-timing reads shares already set): a flow leaves its list by a swap with the last record.
"""

from __future__ import annotations

from array import array

__all__ = ["EqualShareFlows", "Flow"]

_INF = float("inf")
try:  # True only inside the Cython-compiled module (setup.py)
    import cython

    _COMPILED = cython.compiled
except ImportError:
    _COMPILED = False
# The shortcut is taken only when the caps fit with a margin, so incremental rounding of the sum cannot flip it.
_SLACK = 1.0 - 1e-9


class Flow:
    """One active flow: a typed record (a C struct when compiled, see flows.pxd) instead of a list.

    Attributes:
        fid: Flow id (an int; sets of ids give the order in which flows due at the same instant are re-timed).
        res: Resource ids it crosses.
        rem: Bytes left at ``t_last``.
        rate: Current rate, bytes/s (0 until first timed).
        t_last: Time of the last rate change, s.
        ver: Version, bumped on every re-timing; -1 once the flow is removed.
        cap: Its own rate cap (demand), bytes/s.
        lat: Delivery latency added to the drain time, s.
        due: Delivery time at the current rate, s.
        task: The caller's payload (the engine's task).
        hpos: The compiled engine's event-heap slot of its delivery event (-1: none; the engine's to keep).
        stamp: The flow model's mark (the last re-timing pass that visited it).
        roff: Where its resource ids start in the flow model's ``rpool`` (``nres`` of them).
        nres: ``len(res)`` (a C integer when compiled).

    Built by :func:`_new_flow`, not by calling the class: compiled, that is a C call with C doubles instead of a
    Python call boxing every argument.
    """

    __slots__ = ("fid", "res", "rem", "rate", "t_last", "ver", "cap", "lat", "due", "task", "hpos", "stamp", "roff",
                 "nres")


def _new_flow(fid, res: tuple, rem: float, now: float, cap: float, lat: float, task) -> Flow:
    """A fresh :class:`Flow` (see its docstring)."""
    f = Flow.__new__(Flow)
    f.fid = fid
    f.res = res
    f.nres = len(res)
    f.rem = rem
    f.rate = 0.0
    f.t_last = now
    f.ver = 0
    f.cap = cap
    f.lat = lat
    f.due = 0.0
    f.task = task
    f.hpos = -1
    f.stamp = 0
    f.roff = 0
    return f


class EqualShareFlows:
    """Active flows and their rates (see the module docstring).

    Args:
        caps_bps: Capacity of every resource, bytes/s.
        n_links: The first ``n_links`` resources are mesh links (for utilisation reporting).
    """

    def __init__(self, caps_bps: list[float], n_links: int, *, waterfill: bool = False) -> None:
        self.waterfill = waterfill
        # Per-resource numbers in typed arrays (C doubles when compiled; the same IEEE values as Python floats).
        self.cap = array("d", [float(x) for x in caps_bps])
        self.on: list[set[int]] = [set() for _ in caps_bps]  # flow ids per resource (the re-timing order on ties)
        self.fl: list[list[Flow]] = [[] for _ in caps_bps]  # the same flows' records per resource
        self.share = array("d", self.cap)  # current share of each resource (its capacity when idle)
        self.n_links = n_links
        self.flows: dict[int, Flow] = {}  # active flows of :meth:`add` by id (the engine keeps its records itself)
        self.bytes_done = [0.0] * len(caps_bps)
        # Per resource: sum of the finite own caps of its flows, and how many flows have no finite cap.
        self.capsum = array("d", [0.0] * len(caps_bps))
        self.uncapped = array("q", [0] * len(caps_bps))
        self.scratch = array("d", [0.0]) * 16  # _level's sorted caps
        self.changed = array("q", [0]) * max(1, len(caps_bps))  # resources whose share changed in this start/finish
        self.stamp = 0  # last mark given to flows (Flow.stamp)
        # Each active flow's resource ids as C integers (compiled: the levels read them without converting the
        # tuple's ints): a slot of `stride` entries per flow (a flow crosses a resource at most once); free slots on
        # a stack.
        self.stride = max(1, len(caps_bps))
        self.rpool = array("q", [0]) * (16 * self.stride)
        self.fslot = array("q", range(16))
        self.nfree = 16

    def _retime_changed(self, nch: int, fid, now: float, out: list) -> None:
        """Re-time every flow on the ``nch`` resources in ``self.changed`` (each once, marked by a stamp) and ``fid``'s
        flow if active; the order of ``out`` is then that of the union of their id sets (see the module docstring)."""
        changed = self.changed
        fl = self.fl
        self.stamp += 1
        st = self.stamp
        for i in range(nch):
            for g in fl[changed[i]]:
                if g.stamp != st:
                    g.stamp = st
                    self._time(g, now, out)
        n = len(out)
        if n < 2:
            return
        # Order matters only among equal delivery times (consecutive sequence numbers otherwise never compare).
        tie = False
        for i in range(1, n):
            f = out[i]
            for j in range(i):
                g = out[j]
                if g.due == f.due:
                    tie = True
                    break
            if tie:
                break
        if not tie:
            return
        touched: set[int] = set()
        for i in range(nch):
            touched |= self.on[changed[i]]
        if fid is not None:
            touched.add(fid)
        timed = {}  # the re-timed records by id (out is a subset of touched)
        for f in out:
            timed[f.fid] = f
        del out[:]
        for k in touched:
            f = timed.get(k)
            if f is not None:
                out.append(f)

    def _time(self, f: Flow, now: float, out: list) -> None:
        """Re-time ``f`` at the minimum of its resources' shares and its cap; appended to ``out`` if it changed."""
        share = self.share
        rate = _INF  # min over its resources' shares
        if _COMPILED:
            rp = self.rpool
            for i in range(f.roff, f.roff + f.nres):
                x = rp[i]
                if share[x] < rate:
                    rate = share[x]
        else:
            for x in f.res:
                if share[x] < rate:
                    rate = share[x]
        if f.cap < rate:
            rate = f.cap
        if rate == f.rate:
            return  # its bottleneck share did not change: its delivery event stays valid
        rem = f.rem - f.rate * (now - f.t_last)
        if rem <= 0.0 and f.rate > 0.0:
            return  # already drained, only waiting for delivery: nothing to re-time
        f.rem = rem if rem > 0.0 else 0.0
        f.rate = rate
        f.t_last = now
        f.ver += 1
        f.due = now + f.rem / rate + f.lat
        out.append(f)

    def add(
        self, fid: int, resources: tuple[int, ...], nbytes: float, now: float, cap_bps: float = float("inf"),
        latency_s: float = 0.0,
    ) -> list[tuple[float, int, int]]:
        """Start a flow; returns ``(delivery time, fid, version)`` for it and every flow whose rate changed.

        Args:
            fid: Flow id.
            resources: Resource ids it crosses.
            nbytes: Bytes to move.
            now: Current time, s.
            cap_bps: The flow's own rate cap (its demand), bytes/s.
            latency_s: Path latency added to the drain time to give the delivery time, s. The flow keeps its share
                until delivery (a few ns longer than strictly needed; it saves one event per flow).
        """
        f = _new_flow(fid, tuple(resources), float(nbytes), now, float(cap_bps), float(latency_s), None)
        self.flows[fid] = f
        return [(g.due, g.fid, g.ver) for g in self._open(f, now)]

    def start(self, fid, resources: tuple, nbytes: float, now: float, cap_bps: float, latency_s: float,
              task) -> list:
        """:meth:`add` for the engine: returns the re-timed :class:`Flow` records (``due``, ``ver`` set). The engine
        keeps the new record (in its delivery event): it is not in :attr:`flows`."""
        return self._open(_new_flow(fid, resources, nbytes, now, cap_bps, latency_s, task), now)

    def _open(self, f: Flow, now: float) -> list:
        """Add the new flow ``f`` to its resources and re-time every flow whose rate changed (see :meth:`start`)."""
        on = self.on
        fl = self.fl
        share = self.share
        changed = self.changed
        fid = f.fid
        resources = f.res
        cap_bps = f.cap
        if not self.nfree:
            self._grow_slots()
        self.nfree -= 1
        off = f.roff = self.fslot[self.nfree] * self.stride
        rp = self.rpool
        for r in resources:  # all before the levels below read them
            rp[off] = r
            off += 1
        nch = 0  # resources whose share changed
        finite = cap_bps < _INF
        waterfill = self.waterfill
        capsum = self.capsum
        uncapped = self.uncapped
        for r in resources:
            s = on[r]
            s.add(fid)
            fl[r].append(f)
            if finite:
                capsum[r] += cap_bps
            else:
                uncapped[r] += 1
            new = self._share(r) if waterfill else self.cap[r] / len(s)
            if new != share[r]:
                share[r] = new
                changed[nch] = r
                nch += 1
        out: list = []
        if nch == 0:  # no share changed: only the new flow is timed
            self._time(f, now, out)
        else:
            self._retime_changed(nch, fid, now, out)
        return out

    def _share(self, r: int) -> float:
        """Water-filling level of ``r``; its capacity outright when its flows' caps fit (not a bottleneck)."""
        if not self.uncapped[r] and self.capsum[r] <= self.cap[r] * _SLACK:
            return self.cap[r]
        return self._level(r)

    def _level(self, r: int) -> float:
        """Water-filling level of resource ``r``: flows whose own cap is below it get their cap, the others
        share the rest equally (max-min fairness on this resource alone)."""
        on_r = self.fl[r]
        if len(on_r) == 1:
            return self.cap[r]  # a lone flow may take the whole resource (its rate is capped elsewhere if need be)
        if len(on_r) == 2:  # the common case, without a list: the loop below on the two caps in sorted order
            lo = hi = 0.0
            first = True
            for g in on_r:
                c = self._avail(g, r)
                if first:
                    lo = c
                    first = False
                elif c < lo:
                    hi = lo
                    lo = c
                else:
                    hi = c
            left = self.cap[r]
            if lo * 2 <= left:
                left -= lo
                if hi <= left:
                    return self.cap[r]
                return left
            return left / 2
        # The caps in ascending order in a scratch buffer (an insertion sort: a few flows, C doubles when compiled;
        # equal values are equal floats, so any correct sort gives the same sequence and the same level).
        m = len(on_r)
        if len(self.scratch) < m:
            self.scratch = array("d", [0.0]) * (2 * m)
        caps = self.scratch
        k = 0
        for g in on_r:
            c = self._avail(g, r)
            j = k
            while j > 0 and caps[j - 1] > c:
                caps[j] = caps[j - 1]
                j -= 1
            caps[j] = c
            k += 1
        left = self.cap[r]
        n = m
        for j in range(m):
            c = caps[j]
            if c * n <= left:
                left -= c
                n -= 1
            else:
                break
        return left / n if n else self.cap[r]

    def _avail(self, f: Flow, r: int) -> float:
        """What flow ``f`` can take at most on resource ``r``: its own cap and the shares of its other resources
        (one-step propagation)."""
        share = self.share
        c = f.cap
        if _COMPILED:
            rp = self.rpool
            for i in range(f.roff, f.roff + f.nres):
                x = rp[i]
                if x != r and share[x] < c:
                    c = share[x]
        else:
            for x in f.res:
                if x != r and share[x] < c:
                    c = share[x]
        return c

    def version(self, fid: int) -> int:
        """Current version of an active flow (-1 when not active)."""
        f = self.flows.get(fid)
        return -1 if f is None else f.ver

    def drain(self, fid: int, now: float) -> list[tuple[float, int, int]]:
        """Remove a drained flow; returns re-timed ``(drain time, fid, version)`` of the flows that sped up."""
        return [(f.due, f.fid, f.ver) for f in self.finish(self.flows.pop(fid), now)]

    def finish(self, f: Flow, now: float) -> list:
        """:meth:`drain` for the engine: removes ``f`` (its ``ver`` becomes -1); returns the re-timed flows."""
        fid = f.fid
        f.ver = -1
        on = self.on
        fl = self.fl
        share = self.share
        cap = self.cap
        changed = self.changed
        nch = 0  # resources whose share changed
        finite = f.cap < _INF
        waterfill = self.waterfill
        capsum = self.capsum
        uncapped = self.uncapped
        for r in f.res:
            s = on[r]
            s.discard(fid)
            lst = fl[r]
            n = len(lst) - 1
            for i in range(n + 1):  # by identity: list.remove would first try == on every record before f
                if lst[i] is f:
                    lst[i] = lst[n]  # swap with the last: the lists' order never matters (module docstring)
                    lst.pop()
                    break
            if finite:
                capsum[r] = capsum[r] - f.cap if s else 0.0  # reset when idle: no drift from repeated +/-
            else:
                uncapped[r] -= 1
            if not s:
                new = cap[r]
            else:
                new = self._share(r) if waterfill else cap[r] / len(s)
            if new != share[r]:
                share[r] = new
                changed[nch] = r
                nch += 1
        self.fslot[self.nfree] = f.roff // self.stride
        self.nfree += 1
        out: list = []
        if nch:
            self._retime_changed(nch, None, now, out)
        return out

    def _grow_slots(self) -> None:
        """Double the resource-id slots (new arrays: a buffer in use by a memoryview cannot be resized)."""
        n = len(self.fslot)
        rp = array("q", [0]) * (2 * n * self.stride)
        old = self.rpool
        for i in range(n * self.stride):
            rp[i] = old[i]
        self.rpool = rp
        self.fslot = array("q", range(n, 2 * n)) + array("q", [0]) * n
        self.nfree = n

    def account(self, resources: tuple[int, ...], nbytes: float) -> None:
        """Record ``nbytes`` carried over ``resources`` (called once per flow)."""
        bd = self.bytes_done
        for r in resources:
            bd[r] += nbytes
