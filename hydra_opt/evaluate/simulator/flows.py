# cython: boundscheck=False, wraparound=False, initializedcheck=False
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
looking at its flows (the per-resource sum of finite caps and count of uncapped flows are kept incrementally);
likewise when what its flows can take (caps and their other resources' shares) sums to no more than it, the level
is the capacity without sorting them (both sums with a margin far above their rounding). Flows are re-timed only when the share of one of their resources changed. Both shortcuts give the same rates as
the full computation.

Each resource keeps its flows twice: as slot numbers in a row of a C array (what the levels and the re-timing
walk, without a Python object per visit) and as a set of records hashed by flow id. The re-timed flows get
consecutive event sequence numbers, so their order matters only among flows delivered at the same instant: it is
the iteration order of the union of the sets of the resources whose share changed (the order of the original
model's sets of flow ids; a record hashes as its id, so the sets iterate alike). The rows give the re-timed flows
in another order; only when two of them have equal delivery times is that union built and the order taken from
it (see :meth:`EqualShareFlows._retime_changed`). So a row's own order never matters (a level sorts the caps;
re-timing reads shares already set): a flow leaves its row by a swap with the last entry.
"""

from __future__ import annotations

from array import array

try:
    import cython
except ImportError:  # pure Python without Cython installed: the class decorators below do nothing
    from types import SimpleNamespace as _NS

    cython = _NS(cclass=lambda c: c, final=lambda c: c, no_gc=lambda c: c, freelist=lambda n: lambda c: c)

__all__ = ["EqualShareFlows", "Flow"]

_INF = float("inf")
_HASH_MOD = (1 << 61) - 1  # CPython's int hash modulus (sys.hash_info.modulus on 64-bit builds)
# The shortcut is taken only when the caps fit with a margin, so incremental rounding of the sum cannot flip it.
_SLACK = 1.0 - 1e-9


# freelist and no_gc (see flows.pxd) take effect only here, on a class marked cclass in the .py: on the .pxd
# declaration alone Cython ignores them (each flow was allocated, GC-tracked and freed).
@cython.freelist(64)
@cython.no_gc
@cython.final
@cython.cclass
class Flow:
    """One active flow: a typed record (a C struct when compiled, see flows.pxd) instead of a list.

    Attributes:
        fid: Flow id (an int; its hash is the record's, see :meth:`__hash__`).
        res: Resource ids it crosses.
        rem: Bytes left at ``t_last``.
        rate: Current rate, bytes/s (0 until first timed).
        t_last: Time of the last rate change, s.
        ver: Version, bumped on every re-timing; -1 once the flow is removed.
        cap: Its own rate cap (demand), bytes/s.
        lat: Delivery latency added to the drain time, s.
        due: Delivery time at the current rate, s.
        task: The caller's payload (the engine's task).
        hpos: The compiled engine's event slot of its delivery event (-1: none; the engine's to keep).
        slot: Its slot in the flow model's per-flow arrays while active (see :class:`EqualShareFlows`).

    Built by :func:`_new_flow`, not by calling the class: compiled, that is a C call with C doubles instead of a
    Python call boxing every argument.
    """

    __slots__ = ("fid", "res", "rem", "rate", "t_last", "ver", "cap", "lat", "due", "task", "hpos", "slot")

    def __hash__(self) -> int:
        """The hash of its id: a set of records then iterates in the order of the set of their ids (the order of
        flows due at the same instant, see the module docstring), without an int object per flow. (Equality stays
        identity: two active records never share an id.)"""
        return self.fid if 0 <= self.fid < _HASH_MOD else hash(self.fid)  # an int in [0, 2**61 - 1): itself


def _new_flow(fid, res: tuple, rem: float, now: float, cap: float, lat: float, task) -> Flow:
    """A fresh :class:`Flow` (see its docstring)."""
    f = Flow.__new__(Flow)
    f.fid = fid
    f.res = res
    f.rem = rem
    f.rate = 0.0
    f.t_last = now
    f.ver = 0
    f.cap = cap
    f.lat = lat
    f.due = 0.0
    f.task = task
    f.hpos = -1
    f.slot = -1
    return f


class EqualShareFlows:
    """Active flows and their rates (see the module docstring).

    Every active flow holds a *slot*: its number in per-slot typed arrays (own cap, rate, visit mark, resource
    ids) and in :attr:`byslot`. A resource lists its flows as slot numbers in its row of :attr:`rfl`, so the levels
    and the re-timing walk C arrays (compiled) and fetch a :class:`Flow` only for a flow whose rate changed.
    :meth:`start` and :meth:`finish` leave the slots of the re-timed flows in :attr:`rt` and return how many.

    Args:
        caps_bps: Capacity of every resource, bytes/s.
        n_links: The first ``n_links`` resources are mesh links (for utilisation reporting).
    """

    def __init__(self, caps_bps: list[float], n_links: int, *, waterfill: bool = False) -> None:
        nr = len(caps_bps)
        self.waterfill = waterfill
        # Per-resource numbers in typed arrays (C doubles when compiled; the same IEEE values as Python floats).
        self.cap = array("d", [float(x) for x in caps_bps])
        self.on: list[set[Flow]] = [set() for _ in caps_bps]  # records per resource (the re-timing order on ties)
        self.share = array("d", self.cap)  # current share of each resource (its capacity when idle)
        self.n_links = n_links
        self.flows: dict[int, Flow] = {}  # active flows of :meth:`add` by id (the engine keeps its records itself)
        self.bytes_done = [0.0] * nr
        # Per resource: sum of the finite own caps of its flows, and how many flows have no finite cap.
        self.capsum = array("d", [0.0] * nr)
        self.uncapped = array("q", [0] * nr)
        self.scratch = array("d", [0.0]) * 16  # _level's sorted caps
        self.changed = array("q", [0]) * max(1, nr)  # resources whose share changed in this start/finish
        self.oldsh = array("d", [0.0]) * max(1, nr)  # their shares before the change
        self.stamp = 0  # last visit mark given to slots (fstamp)
        # A flow crosses a resource at most once: `stride` resource ids per slot in rpool.
        self.stride = max(1, nr)
        self.rcnt = array("q", [0]) * max(1, nr)  # flows per resource (row r of rfl holds their slots)
        self.nslots = 0
        self.nfree = 0
        self.nrt = 0
        self.byslot: list = []  # the Flow of each slot (None: free)
        self._grow_slots()

    def _grow_slots(self) -> None:
        """Double the slots (new arrays: a buffer in use by a memoryview cannot be resized); rfl's rows widen."""
        n = self.nslots
        m = max(16, 2 * n)
        nr = self.stride

        def grown(old, code: str, width: int):
            a = array(code, [0]) * (m * width)
            for i in range(n * width):
                a[i] = old[i]
            return a

        if n:
            rpool, fcap, frate, fstamp, fnres = self.rpool, self.fcap, self.frate, self.fstamp, self.fnres
            fm1, fm2, fa1, fok = self.fm1, self.fm2, self.fa1, self.fok
            rfl = array("q", [0]) * (m * nr)
            for r in range(nr):  # row r: rcnt[r] slots at r * nslots
                for k in range(self.rcnt[r]):
                    rfl[r * m + k] = self.rfl[r * n + k]
        else:
            rpool = fcap = frate = fstamp = fnres = fm1 = fm2 = fa1 = fok = array("q")
            rfl = array("q", [0]) * (m * nr)
        self.rpool = grown(rpool, "q", nr)
        self.fcap, self.frate = grown(fcap, "d", 1), grown(frate, "d", 1)
        self.fstamp, self.fnres = grown(fstamp, "q", 1), grown(fnres, "q", 1)
        self.fm1, self.fm2, self.fa1, self.fok = grown(fm1, "d", 1), grown(fm2, "d", 1), grown(fa1, "q", 1), grown(fok, "q", 1)
        self.rfl = rfl
        self.byslot += [None] * (m - n)
        self.rt = array("q", [0]) * m  # slots re-timed by the last start/finish (each once)
        self.rtdue = array("d", [0.0]) * m  # their delivery times, in the order of rt as _time fills it (for _tie)
        self.fslot = array("q", range(m - 1, n - 1, -1)) + array("q", [0]) * n  # free slots, slot n on top
        self.nfree = m - n
        self.nslots = m

    def _retime_changed(self, nch: int, new, now: float) -> None:
        """Re-time every flow on the ``nch`` resources in ``self.changed`` (each once, marked by a stamp) into
        ``rt``; their order is then that of the union of their sets and the ``new`` flow's record (if not None; see
        the module docstring).

        A flow whose rate is below both the old and the new share of a changed resource is not limited by it before
        or after: it is skipped there (not marked), since its rate is the minimum of its resources' shares and cap
        (every flow not yet drained is re-timed whenever one of them changes); a change of another of its resources
        visits it there. The new flow (rate 0 until timed) is timed first. ``rt``'s order never matters but on ties
        (see :meth:`_order`)."""
        m = self.nslots
        self.stamp += 1
        st = self.stamp
        if new is not None:
            j = new.slot
            self.fstamp[j] = st
            self._time(j, now)
        for i in range(nch):
            r = self.changed[i]
            thr = self.oldsh[i]
            if self.share[r] < thr:
                thr = self.share[r]
            for k in range(r * m, r * m + self.rcnt[r]):
                j = self.rfl[k]
                if self.fstamp[j] != st and self.frate[j] >= thr:
                    self.fstamp[j] = st
                    self._time(j, now)
        n = self.nrt
        if n >= 2 and self._tie(n):
            self._order(nch, new)

    def _tie(self, n: int) -> bool:
        """Two of the ``n`` re-timed flows due at the same instant (otherwise their order never matters: their
        consecutive sequence numbers never compare)."""
        for i in range(1, n):
            t = self.rtdue[i]  # (contiguous: the pairs compare without an index lookup per flow)
            for k in range(i):
                if self.rtdue[k] == t:
                    return True
        return False

    def _order(self, nch: int, new) -> None:
        """Put ``rt`` in the iteration order of the union of the changed resources' sets (and ``new``)."""
        touched: set[Flow] = set()
        for i in range(nch):
            touched |= self.on[self.changed[i]]
        if new is not None:
            touched.add(new)
        self.stamp += 1  # marks the re-timed slots (rt is a subset of touched)
        st = self.stamp
        for i in range(self.nrt):
            self.fstamp[self.rt[i]] = st
        n = 0
        for f in touched:
            if self.fstamp[f.slot] == st:
                self.rt[n] = f.slot
                n += 1

    def _time(self, j: int, now: float) -> None:
        """Re-time slot ``j``'s flow at the minimum of its resources' shares and its cap; added to ``rt`` if its
        rate changed."""
        if not self.fok[j]:
            self._mins(j)
        rate = self.fm1[j]  # min over its resources' shares
        if self.fcap[j] < rate:
            rate = self.fcap[j]
        if rate == self.frate[j]:
            return  # its bottleneck share did not change: its delivery event stays valid
        f = self.byslot[j]
        rem = f.rem - f.rate * (now - f.t_last)
        if rem <= 0.0 and f.rate > 0.0:
            return  # already drained, only waiting for delivery: nothing to re-time
        f.rem = rem if rem > 0.0 else 0.0
        f.rate = rate
        self.frate[j] = rate
        f.t_last = now
        f.ver += 1
        f.due = now + f.rem / rate + f.lat
        self.rtdue[self.nrt] = f.due
        self.rt[self.nrt] = j
        self.nrt += 1

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
        return self._timed(self._open(f, now))

    def _timed(self, n: int) -> list[tuple[float, int, int]]:
        """``(due, fid, ver)`` of the ``n`` flows in ``rt``."""
        return [(f.due, f.fid, f.ver) for f in (self.byslot[self.rt[i]] for i in range(n))]

    def start(self, fid, resources: tuple, nbytes: float, now: float, cap_bps: float, latency_s: float,
              task) -> int:
        """:meth:`add` for the engine: returns how many flows were (re-)timed, the new one included; their slots are
        in ``rt`` (their records in :attr:`byslot`, ``due`` and ``ver`` set). The engine keeps the new record (in
        its delivery event): it is not in :attr:`flows`."""
        return self._open(_new_flow(fid, resources, nbytes, now, cap_bps, latency_s, task), now)

    def _open(self, f: Flow, now: float) -> int:
        """Add the new flow ``f`` to its resources and re-time every flow whose rate changed (see :meth:`start`)."""
        if not self.nfree:
            self._grow_slots()
        self.nfree -= 1
        j = f.slot = self.fslot[self.nfree]
        self.byslot[j] = f
        cap_bps = self.fcap[j] = f.cap
        self.frate[j] = 0.0
        self.fstamp[j] = 0
        self.fok[j] = 0
        resources = f.res
        self.fnres[j] = len(resources)
        off = j * self.stride
        for r in resources:  # all before the levels below read them
            self.rpool[off] = r
            off += 1
        on, m = self.on, self.nslots
        nch = 0  # resources whose share changed
        finite = cap_bps < _INF
        waterfill = self.waterfill
        for r in resources:
            s = on[r]
            s.add(f)
            self.rfl[r * m + self.rcnt[r]] = j
            self.rcnt[r] += 1
            if finite:
                self.capsum[r] += cap_bps
            else:
                self.uncapped[r] += 1
            new = self._share(r) if waterfill else self.cap[r] / self.rcnt[r]
            if new != self.share[r]:
                self._set_share(r, new, nch)
                nch += 1
        self.nrt = 0
        if nch == 0:  # no share changed: only the new flow is timed
            self._time(j, now)
        else:
            self._retime_changed(nch, f, now)
        return self.nrt

    def _share(self, r: int) -> float:
        """Water-filling level of ``r``; its capacity outright when its flows' caps fit (not a bottleneck)."""
        if not self.uncapped[r] and self.capsum[r] <= self.cap[r] * _SLACK:
            return self.cap[r]
        return self._level(r)

    def _level(self, r: int) -> float:
        """Water-filling level of resource ``r``: flows whose own cap is below it get their cap, the others
        share the rest equally (max-min fairness on this resource alone)."""
        m = self.rcnt[r]
        if m == 1:
            return self.cap[r]  # a lone flow may take the whole resource (its rate is capped elsewhere if need be)
        base = r * self.nslots
        if m == 2:  # the common case, without a buffer: the loop below on the two caps in sorted order
            lo = self._avail(self.rfl[base], r)
            hi = self._avail(self.rfl[base + 1], r)
            if hi < lo:
                lo, hi = hi, lo
            left = self.cap[r]
            if lo * 2 <= left:
                left -= lo
                if hi <= left:
                    return self.cap[r]
                return left
            return left / 2
        # What each flow can take, in a scratch buffer. (Read as self.scratch[i], not through a local copy: a local
        # memoryview costs an atomic acquire and release.)
        if len(self.scratch) < m:
            self.scratch = array("d", [0.0]) * (2 * m)
        tot = 0.0
        for k in range(m):
            c = self._avail(self.rfl[base + k], r)
            self.scratch[k] = c
            tot += c
        # They fit (the loop below would subtract every one and return the capacity): as _share's shortcut on the
        # own caps, with the same margin, here on what the flows can take (4 in 10 levels under elastic placement).
        if tot <= self.cap[r] * _SLACK:
            return self.cap[r]
        # In ascending order (an insertion sort in place: a few flows, C doubles when compiled; equal values are
        # equal floats, so any correct sort gives the same sequence and the same level).
        for k in range(1, m):
            c = self.scratch[k]
            i = k
            while i > 0 and self.scratch[i - 1] > c:
                self.scratch[i] = self.scratch[i - 1]
                i -= 1
            self.scratch[i] = c
        left = self.cap[r]
        n = m
        for k in range(m):
            c = self.scratch[k]
            if c * n <= left:
                left -= c
                n -= 1
            else:
                break
        return left / n if n else self.cap[r]

    def _avail(self, j: int, r: int) -> float:
        """What slot ``j``'s flow can take at most on resource ``r``: its own cap and the shares of its other
        resources (one-step propagation)."""
        if not self.fok[j]:
            self._mins(j)
        c = self.fcap[j]
        m = self.fm2[j] if self.fa1[j] == r else self.fm1[j]  # (a flow crosses r at most once)
        return m if m < c else c

    def _mins(self, j: int) -> None:
        """Cache slot ``j``'s smallest and second smallest share over its resources (``fm1`` at resource ``fa1``,
        ``fm2``; valid while ``fok``): the minimum over all but one resource, which levels ask for per flow on a
        resource, is then one of them. A minimum is the same float in any order. A share change updates the
        minima of the flows on that resource, or voids them when it cannot tell (:meth:`_set_share`)."""
        m1 = m2 = _INF
        a1 = -1
        off = j * self.stride
        for i in range(off, off + self.fnres[j]):
            x = self.rpool[i]
            s = self.share[x]
            if s < m1:
                m2 = m1
                m1 = s
                a1 = x
            elif s < m2:
                m2 = s
        self.fm1[j] = m1
        self.fm2[j] = m2
        self.fa1[j] = a1
        self.fok[j] = 1

    def _set_share(self, r: int, new: float, nch: int) -> None:
        """Set resource ``r``'s share to ``new`` (changed: the ``nch``-th in ``changed``) and update the cached minima
        of its flows (:meth:`_mins`); a flow's are voided only when its second smallest may have risen (the
        resource held it and its share rose, or held the smallest and rose above the second)."""
        old = self.share[r]
        self.oldsh[nch] = old
        self.share[r] = new
        self.changed[nch] = r
        base = r * self.nslots
        for k in range(base, base + self.rcnt[r]):
            j = self.rfl[k]
            if not self.fok[j]:
                continue
            if self.fa1[j] == r:  # r holds the smallest
                if new <= self.fm2[j]:
                    self.fm1[j] = new
                else:
                    self.fok[j] = 0
            elif old > self.fm2[j] or new <= old:  # r does not hold the second smallest, or its share fell
                if new < self.fm1[j]:
                    self.fm2[j] = self.fm1[j]
                    self.fm1[j] = new
                    self.fa1[j] = r
                elif new < self.fm2[j]:
                    self.fm2[j] = new
            else:
                self.fok[j] = 0

    def version(self, fid: int) -> int:
        """Current version of an active flow (-1 when not active)."""
        f = self.flows.get(fid)
        return -1 if f is None else f.ver

    def drain(self, fid: int, now: float) -> list[tuple[float, int, int]]:
        """Remove a drained flow; returns re-timed ``(drain time, fid, version)`` of the flows that sped up."""
        return self._timed(self.finish(self.flows.pop(fid), now))

    def finish(self, f: Flow, now: float) -> int:
        """:meth:`drain` for the engine: removes ``f`` (its ``ver`` becomes -1); returns how many flows were
        re-timed (their slots in ``rt``)."""
        f.ver = -1
        j = f.slot
        on, m = self.on, self.nslots
        nch = 0  # resources whose share changed
        finite = f.cap < _INF
        waterfill = self.waterfill
        for r in f.res:
            s = on[r]
            s.discard(f)
            base = r * m
            n = self.rcnt[r] - 1
            for k in range(base, base + n + 1):
                if self.rfl[k] == j:
                    self.rfl[k] = self.rfl[base + n]  # the last in its place: a row's order never matters (docstring)
                    break
            self.rcnt[r] = n
            if finite:
                self.capsum[r] = self.capsum[r] - f.cap if n else 0.0  # reset when idle: no drift from repeated +/-
            else:
                self.uncapped[r] -= 1
            if not n:
                new = self.cap[r]
            else:
                new = self._share(r) if waterfill else self.cap[r] / n
            if new != self.share[r]:
                self._set_share(r, new, nch)
                nch += 1
        self.byslot[j] = None
        f.slot = -1
        self.fslot[self.nfree] = j
        self.nfree += 1
        self.nrt = 0
        if nch:
            self._retime_changed(nch, None, now)
        return self.nrt

    def account(self, resources: tuple[int, ...], nbytes: float) -> None:
        """Record ``nbytes`` carried over ``resources`` (called once per flow)."""
        bd = self.bytes_done
        for r in resources:
            bd[r] += nbytes
