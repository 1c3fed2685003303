# cython: boundscheck=False, wraparound=False, initializedcheck=False
# (Compiled only. Every index here is in range by construction and never negative — heap slots below the heap
# size, resource/chiplet/block/request ids, guarded -1 sentinels — so the per-access checks are dropped: -8 % of
# the static+elastic loop's instructions. An indexing bug would no longer raise IndexError: the pure-Python
# sources, run by the tests and the identity check, still do.)
"""The event-driven serving engine.

Granularity (docs/simulator.md): an event is the end of one *task* — one pass of one batch over one block, for
the requests of the batch in one phase, on one compute chiplet — or the delivery of one memory flow. Nothing is
simulated per token per layer in Python.

* A request needs one **prefill** pass over all blocks (emits its first token) and one **decode** pass per further
  output token. Each request has its own context: a pass over a batch is priced from the batch aggregates
  ``[1, n, Σq, Σq·c, Σq², Σc]`` of its requests (``hydra_opt.workload.cost``), so ``BlockCost = coeffs @ agg``.
* A batch walks the blocks in order (a pipeline over chiplets); different batches are in flight at once (up to
  ``max_batches``), so chiplets work on different batches concurrently. If a pass mixes prefilling and decoding
  requests (continuous batching) each block gets one task per phase; the block is done when both are.
* A task is queued FIFO on the chiplet its scheduler picks (``hydra_opt.runtime.scheduling``). When it starts,
  its compute/SRAM time comes from ``hydra_opt.evaluate.opcost`` (linear coefficients, see
  :func:`~hydra_opt.evaluate.simulator.system.time_coefficients`) and its memory traffic (weights, KV/state read
  and write) is a flow from the memory chiplet holding the block to the chiplet over the NoI
  (``hydra_opt.hardware.noi.FlowNetwork``: XY routes, links and HBM ports shared max-min fairly). The task ends
  when both its compute and its flow are done (double-buffered streaming overlaps them: the roofline ``max``).
  The input activation of a block that runs on a different chiplet than the previous block adds a
  latency-only hand-off ``hops·hop_latency + bytes/link_bw`` (a few KB per token; not a contending flow).
* Memory (KV pages, SSM state) is accounted per memory chiplet by ``hydra_opt.runtime.batching.PagedMemory``.
"""

from __future__ import annotations

import gc
import heapq
import math
import time
from array import array
from collections import deque
from dataclasses import dataclass

import numpy as np

from hydra_opt.evaluate.opcost import task_energy_j
from hydra_opt.runtime.batching import ChunkedBatcher, ContinuousBatcher, PagedMemory, StaticBatcher, plan_chunks
from hydra_opt.runtime.scheduling import ChipletView, ElasticScheduler, StaticScheduler, TaskScheduler, manhattan
from hydra_opt.workload.cost import COST_FIELDS, BlockCost

from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.evaluate.simulator.options import SimOptions
from hydra_opt.evaluate.simulator.system import (
    SimModel,
    SimSystem,
    compat_lists,
    mem_coefficients,
    time_coefficients,
)

__all__ = ["Engine", "RawRun"]

_INF = math.inf
_heappush, _heappop = heapq.heappush, heapq.heappop
try:  # True only inside the Cython-compiled module (setup.py); the pure module keeps heapq
    import cython

    _COMPILED = cython.compiled
except ImportError:
    _COMPILED = False
# Request status codes.
PENDING, QUEUED, RUNNING, DONE, REJECTED = 0, 1, 2, 3, 4
# Event kinds.
_EV_COMPUTE, _EV_FLOW, _EV_DRAIN = 0, 1, 2
# Pass phases; a part's ``pid`` indexes the engine's per-(phase, block) tables at ``pid * n_blocks + block``.
_PHASES = ("prefill", "decode")


class _Part:
    """The requests of one phase in one pass of a batch; walks the blocks independently of the other phase.

    A part has at most one task in flight (the pass is sequential over blocks), so the part *is* the task record:
    ``block`` is the task's block, ``chip`` its chiplet, and the scheduler reads ``phase``/``family``/``mem_xy``.
    """

    __slots__ = ("batch", "phase", "pid", "rids", "vals", "block", "prev_chip", "epochs", "family", "mem_xy", "chip",
                 "start", "cs_open", "flow_open", "res", "nbytes", "end", "seg", "omap", "qs")

    def __init__(self, batch, phase, rids, vals, seg, omap):
        self.batch = batch
        self.phase = phase
        self.pid = _PHASES.index(phase)
        self.rids = rids
        self.vals = vals  # flat (rows × blocks) pass coefficients: row k of block b at k * n_blocks + b
        self.seg = seg  # the engine's seg_end list of this phase
        self.omap = omap  # the static scheduler's chiplet per block for this phase (None: ask the scheduler)
        self.qs = None  # chunked prefill: each request's chunk tokens (None: whole prompts)
        self.block = 0
        self.prev_chip = -1
        self.chip = -1
        self.start = 0.0
        self.cs_open = False
        self.flow_open = False


class _Batch:
    __slots__ = ("bid", "members", "pre", "dec")

    def __init__(self, bid: int, members: list[int]):
        self.bid = bid
        self.members = members
        self.pre: _Part | None = None  # prefill pass in flight
        self.dec: _Part | None = None  # decode pass in flight


@dataclass
class RawRun:
    """Everything the metrics need from one run (per-request arrays and accumulated counters)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    generated: np.ndarray
    status: np.ndarray
    first_token_s: np.ndarray
    first_batch_start_s: np.ndarray
    finish_s: np.ndarray
    preemptions: np.ndarray
    token_t: np.ndarray
    token_n: np.ndarray
    tokens_emitted: int
    tokens_discarded: int
    sim_end_s: float
    events: int
    wall_s: float
    chip_busy_s: np.ndarray
    chip_names: list[str]
    link_util: np.ndarray
    link_series: tuple[np.ndarray, np.ndarray] | None
    mem_port_util: np.ndarray
    mem_capacity: np.ndarray
    mem_peak: np.ndarray
    mem_mean: np.ndarray
    energy_dyn_j: float
    energy_static_j: float
    preempt_events: int
    n_arrived: int


class Engine:
    """One simulation run. Build it, call :meth:`run`, get a :class:`RawRun`.

    Args:
        system: The placed system.
        model: The model's per-block coefficients.
        arrival_s, prompt_tokens, output_tokens: Requests (sorted by arrival).
        options: Engine knobs.
        scenario: The run (horizon, token budget, pipeline depth, preemption rules).
        batching: ``"static"`` or ``"continuous"``.
        scheduler: A task scheduler (its Ω must refer to ``system``'s chiplet indices).
        max_batch: Maximum requests per batch.
    """

    def __init__(
        self,
        system: SimSystem,
        model: SimModel,
        arrival_s: np.ndarray,
        prompt_tokens: np.ndarray,
        output_tokens: np.ndarray,
        options: SimOptions,
        scenario: Scenario,
        *,
        batching: str,
        scheduler: TaskScheduler,
        max_batch: int,
    ) -> None:
        self.sys = system
        self.model = model
        self.opt = options
        self.scn = scenario
        self.sched = scheduler
        self.max_batch = int(max_batch)
        self.arr = [float(x) for x in arrival_s]
        self.prompt = [int(x) for x in prompt_tokens]
        self.out = [max(1, int(x)) for x in output_tokens]
        n = len(self.arr)
        self.n = n
        mesh = system.mesh
        self.mesh = mesh
        self.link_bps = mesh.link_bw_gbps * 1e9
        self.hop_s = mesh.hop_latency_s
        self.nb = model.n_blocks

        self._init_coefficients(system, model)
        self._init_topology(system, model, options, scheduler)
        self._init_network(system, options)
        # The elastic steal's cost (ElasticScheduler._gains) for a scheduler read through the view.
        self.view.task_s = self._t_est
        self.view.rest_s = self._rest_s
        self._init_memory(system, model, options)

        # --- batching -------------------------------------------------------------------------------------------
        self.continuous = batching in ("continuous", "chunked")  # chunked shares continuous admission/memory
        self.chunked = batching == "chunked"
        if self.chunked:
            self.batcher = ChunkedBatcher(self.max_batch, scenario.token_budget, self._prefill_tokens)
            self.batcher.form = self._form_empty
        elif self.continuous:
            self.batcher = ContinuousBatcher(
                self.max_batch, scenario.token_budget, lambda r: (self.prompt[r] + self.gen[r], self.prompt[r] + self.gen[r])
            )
            self.batcher.form = self._form_empty  # new batches are filled by their first prefill admission
        else:
            self.batcher = StaticBatcher(self.max_batch, lambda r: self.prompt[r] + self.out[r])
        self.max_batches = int(scenario.max_batches or max(1, self.nc))

        # --- request state --------------------------------------------------------------------------------------
        self.status = [PENDING] * n
        self.gen = [0] * n
        self.where = [-1] * n
        self.first_t = [_INF] * n
        self.first_bs = [_INF] * n  # first-token time minus the start of the batch that produced it
        self.admit_t = [_INF] * n
        self.finish_t = [_INF] * n
        self.npre = [0] * n
        self.pdone = [0] * n  # chunked prefill: context tokens already prefilled (reset on preemption)
        self.stage = [0] * n  # 0 needs prefill, 1 prefill in flight, 2 decoding
        self.epoch = [0] * n  # bumped on preemption
        # Tokens of context r's pages cover (mem.pages[r] * page_tokens) while r holds memory, else -1: _ensure's
        # answer for a pass that needs no new page, read as a C number (no dict lookup, no int boxed per member).
        self.pg_lim = array("q", [-1]) * n
        self.run_task: list[_Part | None] = [None] * self.nc
        self.queue: deque[int] = deque()
        self.running: set[int] = set()
        self.batches: dict[int, _Batch] = {}
        self.next_bid = 0
        self.token_t: list[float] = []
        self.token_n: list[int] = []
        self.tokens = 0
        self.discarded = 0
        self.preempt_events = 0
        self.n_arrived = 0
        self.n_done = 0
        self.n_rejected = 0

        # Event queue, ordered by (time, sequence number); the sequence numbers are unique, so every correct
        # priority queue pops the same order. Pure Python: heapq of tuples. Compiled: a binary heap of (time,
        # sequence number, event slot) on parallel typed arrays, sifted in place (no tuple or float object per
        # event); an event's kind, version and object stay in its slot (ev_k, ev_v, ev_o) while it moves, so a sift
        # step moves three C numbers and touches no Python object.
        self.heap: list = []
        self.h_n = 0
        if _COMPILED:
            self._hgrow()
        self.arrivals_done = False
        self._net_changed = False
        self._checks = 0  # debug-mode invariant checks run so far
        self.seq = 0
        self.now = 0.0
        self.stale_t = 0.0  # compiled heap: latest delivery time superseded in place (see _hmove)
        self.events = 0

    # ------------------------------------------------------------------------------------------------- main loop
    def run(self) -> RawRun:
        """Run to the horizon (or until nothing is left to do)."""
        wall0 = time.perf_counter()
        horizon = self.scn.horizon_s if self.scn.horizon_s is not None else _INF
        net = self.net
        # The loop allocates many small container objects but no reference cycles: the cyclic collector would
        # only re-scan them (results do not depend on it).
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._loop(horizon)
        finally:
            if gc_was_enabled:
                gc.enable()
        end = horizon
        if horizon == _INF:  # the clock of the last entry popped (pure Python pops superseded ones too)
            end = self.now if self.now >= self.stale_t else self.stale_t
        if net is not None and end > net.now_s:
            net.advance(end)
        return self._raw(end, time.perf_counter() - wall0)

    def _loop(self, horizon: float) -> None:
        """The event loop of :meth:`run`."""
        heap = self.heap
        arr = self.arr
        n = self.n
        net = self.net
        i_arr = 0
        t_net = _INF
        net_dirty = False
        debug = self.opt.debug
        while True:
            ta = arr[i_arr] if i_arr < n else _INF
            if _COMPILED:
                th = self.h_t[0] if self.h_n else _INF
            else:
                th = heap[0][0] if heap else _INF
            if net is not None and net_dirty:
                nxt = net.next_completion()
                t_net = nxt[0] if nxt is not None else _INF
                net_dirty = False
            t = min(ta, th, t_net)
            if t > horizon or t == _INF:
                break
            self.now = t
            self.events += 1
            if t_net <= th and t_net <= ta:
                for done in net.advance(t_net):
                    task = self.flow_task.pop(done.flow_id)
                    self._push(done.delivered_s, _EV_FLOW, task)
                    self._account(task)
                net_dirty = True
                t_net = _INF
                continue
            if ta <= th:
                # Every request arriving at this instant joins the queue before the batcher looks at it.
                while i_arr < n and arr[i_arr] == ta:
                    self.status[i_arr] = QUEUED
                    self.queue.append(i_arr)
                    self.n_arrived += 1
                    i_arr += 1
                self.arrivals_done = i_arr >= n
                self._try_form()
            else:
                if _COMPILED:
                    e = self.h_e[0]
                    kind = self.ev_k[e]
                    task = self.ev_o[e]
                    ver = self.ev_v[e]
                    self._hpop()
                else:
                    _, _, kind, task, ver = _heappop(heap)
                if kind == _EV_DRAIN:  # of the incremental flow model (task = its Flow record)
                    flow = task
                    flow.hpos = -1  # no longer in the compiled heap (pure Python: always -1)
                    if flow.ver == ver:
                        self._drain(flow)
                    else:
                        self.events -= 1  # a superseded delivery time (the flow was re-timed): not an event
                elif kind == _EV_COMPUTE:
                    part = task
                    part.cs_open = False
                    if not part.flow_open:
                        self._finish(part)
                else:  # _EV_FLOW
                    part = task
                    part.flow_open = False
                    if not part.cs_open:
                        self._finish(part)
            if net is not None and self._net_changed:
                net_dirty = True
                self._net_changed = False
            if debug:
                self._check()

    def _push(self, t: float, kind: int, task, ver: int = 0) -> None:
        self.seq += 1
        self._hpush(t, self.seq, kind, task, ver)

    def _hpush(self, t: float, seq: int, kind: int, obj, ver: int) -> int:
        """Add an event (see ``self.heap`` in ``__init__``); a flow's delivery event: the caller sets its ``hpos``
        to the returned slot (compiled)."""
        if not _COMPILED:
            _heappush(self.heap, (t, seq, kind, obj, ver))
            return -1
        i = self.h_n
        if i == len(self.ev_o):
            self._hgrow()
        self.ev_nfree -= 1
        e = self.ev_free[self.ev_nfree]
        self.ev_k[e] = kind
        self.ev_v[e] = ver
        self.ev_o[e] = obj  # (the slot's previous object, if any, is released here: pops leave it)
        self.h_n = i + 1
        self._hplace(i, t, seq, e)
        return e

    def _hpop(self) -> None:
        """Remove the first event (compiled heap; the caller has read its slot)."""
        self.ev_free[self.ev_nfree] = self.h_e[0]
        self.ev_nfree += 1
        n = self.h_n - 1
        self.h_n = n
        if n:
            self._hplace(0, self.h_t[n], self.h_s[n], self.h_e[n])

    def _hmove(self, f, seq: int) -> None:
        """Re-time flow ``f``'s delivery event in place (compiled heap): no superseded entry is left to pop. The
        latest superseded time is kept (``stale_t``): with no horizon the pure loop's clock ends there."""
        e = f.hpos
        i = self.ev_pos[e]
        if self.h_t[i] > self.stale_t:
            self.stale_t = self.h_t[i]
        self.ev_v[e] = f.ver
        self._hplace(i, f.due, seq, e)

    def _hplace(self, i: int, t: float, seq: int, e: int) -> None:
        """Put event slot ``e`` at time ``t`` into the free heap position ``i`` and restore the heap order (sift up,
        else down), keeping every slot's position (``ev_pos``)."""
        n = self.h_n
        i0 = i
        while i > 0:  # sift up
            p = (i - 1) >> 1
            tp = self.h_t[p]
            if tp < t or (tp == t and self.h_s[p] < seq):
                break
            self.h_t[i] = tp
            self.h_s[i] = self.h_s[p]
            self.h_e[i] = self.h_e[p]
            self.ev_pos[self.h_e[i]] = i
            i = p
        if i == i0:
            while True:  # sift down
                c = 2 * i + 1
                if c >= n:
                    break
                if c + 1 < n and (self.h_t[c + 1] < self.h_t[c] or (self.h_t[c + 1] == self.h_t[c] and self.h_s[c + 1] < self.h_s[c])):
                    c += 1
                if t < self.h_t[c] or (t == self.h_t[c] and seq < self.h_s[c]):
                    break
                self.h_t[i] = self.h_t[c]
                self.h_s[i] = self.h_s[c]
                self.h_e[i] = self.h_e[c]
                self.ev_pos[self.h_e[i]] = i
                i = c
        self.h_t[i] = t
        self.h_s[i] = seq
        self.h_e[i] = e
        self.ev_pos[e] = i

    def _hgrow(self) -> None:
        """Double the compiled heap and its event slots (new arrays: a buffer in use by a memoryview cannot be
        resized); the new slots go on the free stack."""
        n = self.h_n
        size = max(256, 2 * n)
        ht, hs, he = array("d", [0.0]) * size, array("q", [0]) * size, array("q", [0]) * size
        ek, ev, pos = array("q", [0]) * size, array("q", [0]) * size, array("q", [0]) * size
        for i in range(n):  # the heap is full: slots 0..n-1 are all in use
            ht[i] = self.h_t[i]
            hs[i] = self.h_s[i]
            he[i] = self.h_e[i]
            ek[i] = self.ev_k[i]
            ev[i] = self.ev_v[i]
            pos[i] = self.ev_pos[i]
        eo = [None] * size
        if n:
            eo[:n] = self.ev_o[:n]
        self.h_t, self.h_s, self.h_e, self.ev_k, self.ev_v, self.ev_o, self.ev_pos = ht, hs, he, ek, ev, eo, pos
        self.ev_free = array("q", range(size - 1, n - 1, -1)) + array("q", [0]) * n  # slot n on top
        self.ev_nfree = size - n

    def _drain(self, flow) -> None:
        """An equal-share flow was delivered: free its share (re-timing its neighbours) and end its task."""
        task = flow.task
        self._retimed(self.flows.finish(flow, self.now))
        self._account(task)
        task.flow_open = False
        self._finish(task)

    def _retimed(self, n: int) -> None:
        """Delivery events of the ``n`` flows the flow model (re-)timed (slots in its ``rt``): a new entry each (pure
        Python: the flow's superseded entry stays, its version no longer matches), or the compiled heap's entry
        moved in place."""
        flows = self.flows
        seq = self.seq
        for k in range(n):
            f = flows.byslot[flows.rt[k]]
            seq += 1
            if f.hpos >= 0:
                self._hmove(f, seq)
            else:
                f.hpos = self._hpush(f.due, seq, _EV_DRAIN, f, f.ver)
        self.seq = seq

    def _account(self, task) -> None:
        nb = task.nbytes
        for r in task.res:
            self.link_bytes[r] += nb
        if self.bin_s is not None:
            self._bin(task.res, nb, task.start, self.now)

    def _bin(self, res: tuple[int, ...], nbytes: float, t0: float, t1: float) -> None:
        """Spread a flow's bytes uniformly over [t0, t1] into utilisation time bins."""
        w = self.bin_s
        b0, b1 = int(t0 // w), int(t1 // w)
        if b1 >= self.bins.shape[0]:
            grow = max(b1 + 1, 2 * self.bins.shape[0]) - self.bins.shape[0]
            self.bins = np.vstack([self.bins, np.zeros((grow, self.bins.shape[1]))])
        span = t1 - t0
        for b in range(b0, b1 + 1):
            lo, hi = max(t0, b * w), min(t1, (b + 1) * w)
            frac = (hi - lo) / span if span > 0 else (1.0 if b == b0 else 0.0)
            if frac > 0:
                for r in res:
                    self.bins[b, r] += nbytes * frac

    # ----------------------------------------------------------------------------------------------- batching
    # A batch runs two independent pass streams: a prefill stream (requests that need their context computed:
    # new, or resumed after preemption) and a decode stream (one token per request per pass). Each stream walks
    # the blocks on its own chiplets; a request moves from the prefill to the decode stream when its prefill pass
    # ends. So decode steps never wait for another request's prefill (prefill and decode chiplets are separate in
    # HYDRA's systems). Static batching uses the same machinery without admissions: one prefill pass, then decode
    # passes until the last request finishes.

    def _prefill_tokens(self, r: int) -> tuple[int, int]:
        """Chunked prefill admission: (prefill tokens, context to hold) of ``r`` if admitted now."""
        n = self.prompt[r] + self.gen[r]
        return n, n

    def _form_empty(self, queue, mem):
        """Continuous: a new batch starts empty; :meth:`_start_prefill` admits into it."""
        head = queue[0]
        if not self._alloc(head, self.prompt[head] + self.gen[head]):
            return None
        queue.popleft()
        return [head]

    def _try_form(self) -> None:
        queue = self.queue
        if not queue:  # nothing to admit (the loops below would stop at once): skip the batch list
            return
        if self.continuous:
            # (Not a copy of the values: starting a prefill adds or removes no batch; a change would raise.)
            for b in self.batches.values():
                if not queue:
                    return
                if b.pre is None and len(b.members) < self.max_batch and (b.dec is None or not self.chunked):
                    self._start_prefill(b)
        while queue and len(self.batches) < self.max_batches:
            members = self.batcher.form(queue, self.mem)
            if members is None and not self.continuous and self.arrivals_done:
                # Drain: after the last arrival a partial static batch may start (else the tail never runs).
                members = StaticBatcher(len(queue), self.batcher.reserve_tokens).form(queue, self.mem)
            if not members:
                if self.continuous and queue and not self.batches and not self.running:
                    self._reject(queue.popleft())  # cannot fit even into an empty system
                    continue
                break
            b = _Batch(self.next_bid, members)
            self.next_bid += 1
            self.batches[b.bid] = b
            for r in members:
                self._admit(r, b)
            self._start_prefill(b)

    def _admit(self, r: int, b: _Batch) -> None:
        self.status[r] = RUNNING
        self.where[r] = b.bid
        self.admit_t[r] = self.now
        self.stage[r] = 0
        self.running.add(r)

    def _reject(self, r: int) -> None:
        self.status[r] = REJECTED
        self.n_rejected += 1
        self.mem.free(r)
        self.pg_lim[r] = -1

    def _preempt(self, v: int) -> None:
        """Free ``v``'s memory and send it back to the waiting queue (§IV-B)."""
        b = self.batches.get(self.where[v])
        if b is not None:
            b.members.remove(v)
        self.mem.free(v)
        self.pg_lim[v] = -1
        self.running.discard(v)
        self.status[v] = QUEUED
        self.where[v] = -1
        self.stage[v] = 0
        self.pdone[v] = 0
        self.epoch[v] += 1  # any pass in flight with v no longer counts it
        self.npre[v] += 1
        self.preempt_events += 1
        if self.scn.preempt_restart:
            self.discarded += self.gen[v]
            self.gen[v] = 0
        if self.scn.preempt_requeue == "front":
            self.queue.appendleft(v)
        else:
            self.queue.append(v)

    def _refill(self, members: list[int], tokens: int) -> None:
        """``self.batcher.refill(members, tokens, self.queue, self.mem)`` (ContinuousBatcher's: ``tokens`` prefill
        tokens pending; ChunkedBatcher's: ``tokens`` of room) on the engine's state, without a Python call per
        request: both admit the queue's head while the batch has room and its memory fits (:meth:`_alloc`); a
        request's first pass is its prompt plus the tokens generated before a preemption."""
        queue = self.queue
        prompt, gen = self.prompt, self.gen
        chunked = self.chunked
        budget = self.batcher.token_budget
        while queue and len(members) < self.max_batch:
            rid = queue[0]
            new = prompt[rid]
            new += gen[rid]
            if chunked:
                if tokens <= 0:
                    break
            elif tokens > 0 and tokens + new > budget:
                break
            if not self._alloc(rid, new):
                break
            queue.popleft()
            members.append(rid)
            if chunked:
                tokens -= new
            else:
                tokens += new

    def _alloc(self, r: int, tokens: int) -> bool:
        """``self.mem.ensure(r, tokens)`` for an admission: a request holding no memory gets its pages and state
        (PagedMemory's first-allocation path: same float operations in the same order, on typed copies of its
        constants); one holding some (not expected) goes through PagedMemory itself."""
        if r in self.mem_pages:
            return self.mem.ensure(r, tokens)
        want = -(-tokens // self.page_tokens)
        if not self._charge(self.ma_idx, self.ma_st, self.ma_pb, self.ma_cap, self.ma_n, want):
            return False
        self.mem_pages[r] = want
        self.pg_lim[r] = want * self.page_tokens
        return True

    def _ensure(self, r: int) -> bool:
        """Memory for ``r``'s next pass; preempts the fewest-generated running request while it does not fit."""
        need = self.prompt[r]
        need += self.gen[r]
        # Most passes need no new page: answer PagedMemory.ensure's "nothing to add" case without calling it
        # (want <= have is need <= have * page_tokens).
        if need <= self.pg_lim[r] or self._grow(r, need):
            return True
        if not self._make_room(r, need):
            return False
        self.pg_lim[r] = self.mem_pages[r] * self.page_tokens
        return True

    def _grow(self, r: int, need: int) -> bool:
        """PagedMemory.ensure(r, need) for a request holding memory, when it fits (same float operations in the same
        order, on typed copies of its constants, without a Python call); False, with nothing changed, when ``r``
        holds none or its growth does not fit (then :meth:`_make_room`)."""
        have = self.mem_pages.get(r)
        if have is None:
            return False
        want = -(-need // self.page_tokens)
        if want <= have:
            self.pg_lim[r] = have * self.page_tokens
            return True
        # Pages to add; no state bytes (mk_st is zeros: 0.0 + x is x, so PagedMemory's floats are unchanged).
        if not self._charge(self.mk_idx, self.mk_st, self.mk_pb, self.mk_cap, self.mk_n, want - have):
            return False
        self.mem_pages[r] = want
        self.pg_lim[r] = want * self.page_tokens
        return True

    def _charge(self, idx, st, pb, cap, n: int, k: int) -> bool:
        """PagedMemory's check-then-update for a request taking ``st[i] + k·pb[i]`` bytes on each memory ``idx[i]``:
        False, with nothing changed, when one would pass ``cap[i]``; else the bytes are added and the peaks kept."""
        for i in range(n):
            if self.mem_used[idx[i]] + (st[i] + k * pb[i]) > cap[i] + 1e-6:
                return False
        for i in range(n):
            h = idx[i]
            u = self.mem_used[h] + (st[i] + k * pb[i])
            self.mem_used[h] = u
            if u > self.mem_peak[h]:
                self.mem_peak[h] = u
        return True

    def _make_room(self, r: int, need: int) -> bool:
        """:meth:`_ensure` when ``r`` may need more pages."""
        while not self.mem.ensure(r, need):
            if len(self.running) <= 1:
                # Alone and still too big: it can never run here.
                self.running.discard(r)
                b = self.batches.get(self.where[r])
                if b is not None:
                    b.members.remove(r)
                self.epoch[r] += 1
                self._reject(r)
                return False
            gen = self.gen
            v = min(self.running, key=lambda x: (gen[x], -x))
            self._preempt(v)
            if v == r:
                return False
        return True

    # --------------------------------------------------------------------------------------------- passes
    def _start_prefill(self, b: _Batch) -> None:
        """Start the batch's prefill stream if idle (continuous: after admitting from the queue)."""
        if b.pre is not None:
            return
        if self.chunked:
            if b.dec is None:
                self._start_pass(b)
            return
        stage, prompt, gen = self.stage, self.prompt, self.gen
        if self.continuous and self.queue and len(b.members) < self.max_batch:
            members = b.members
            pending = 0  # prompt tokens of the members waiting for prefill (an exact integer sum, as sum() was)
            for k in range(len(members)):
                r = members[k]
                if stage[r] == 0:
                    pending += prompt[r]
                    pending += gen[r]
            before = len(members)
            self._refill(members, pending)
            for r in members[before:]:
                self._admit(r, b)
        rids = self._at_stage(b.members, 0)
        if not rids:
            return
        qs = [prompt[r] + gen[r] for r in rids]
        agg = np.array([1.0, len(rids), float(sum(qs)), 0.0, float(sum([q * q for q in qs])), 0.0])
        for r in rids:
            stage[r] = 1
        part = _Part(b, "prefill", rids, self._pass_vals(agg), self.seg_end["prefill"], self._omap("prefill"))
        part.epochs = self._epochs(rids)
        b.pre = part
        self._dispatch(part)

    def _start_decode(self, b: _Batch) -> None:
        """Start the batch's decode stream if idle: one pass over every decoding member."""
        if b.dec is not None or self.chunked:
            return
        if self.continuous:
            self._grow_decoding(b)
        rids = self._at_stage(b.members, 2)
        if rids:
            self._decode_part(b, rids)

    # The per-member loops of pass starts index the request lists with a C integer per member (compiled), not a
    # boxed one per access: same lists, same order as the comprehensions they replace.
    def _at_stage(self, members: list[int], st: int) -> list[int]:
        """The requests of ``members`` at stage ``st`` (0 needs prefill, 1 prefilling, 2 decoding), in order."""
        stage = self.stage
        out = []
        for k in range(len(members)):
            x = members[k]
            r = x
            s = stage[r]
            if s == st:
                out.append(x)
        return out

    def _grow_decoding(self, b: _Batch) -> None:
        """Memory for the next token of each decoding member of ``b`` (:meth:`_ensure` may preempt members: the
        decoding ones are listed first)."""
        stage, prompt, gen = self.stage, self.prompt, self.gen
        members = b.members
        for k in range(len(members)):
            r = members[k]
            if stage[r] != 2:
                continue
            need = prompt[r]
            need += gen[r]
            if need <= self.pg_lim[r] or self._grow(r, need):
                continue  # what _ensure does for this member (of b: where[r] == b.bid), no other changed
            # From the first member whose memory does not fit: _ensure may preempt members, so walk the members at
            # stage 2 listed then (nothing before it changed them), re-checking each, as _ensure does.
            for x in self._at_stage(members[k:], 2):
                r = x
                if self.where[r] == b.bid and stage[r] == 2:
                    self._ensure(r)
            return

    def _epochs(self, rids: list[int]) -> list[int]:
        """The epoch of each of ``rids`` (a pass's record of who it serves)."""
        epoch = self.epoch
        out = []
        for k in range(len(rids)):
            r = rids[k]
            out.append(epoch[r])
        return out

    def _decode_part(self, b: _Batch, rids: list[int]) -> None:
        """Dispatch one decode pass over ``rids`` (one new token each, at its own context)."""
        cap = self.model.max_context
        prompt, gen = self.prompt, self.gen
        tot = 0  # sum of the contexts (exact integer sum, as sum() of the list)
        for r in rids:
            c = prompt[r] + gen[r] - 1
            tot += c if c < cap else cap
        sc = float(tot)
        n = float(len(rids))
        agg = np.array([1.0, n, n, sc, n, sc])
        part = _Part(b, "decode", rids, self._pass_vals(agg), self.seg_end["decode"], self._omap("decode"))
        part.epochs = self._epochs(rids)
        b.dec = part
        self._dispatch(part)

    def _start_pass(self, b: _Batch) -> None:
        """Chunked prefill: start the batch's next pass (no pass of it in flight): every decode, then prefill chunks
        of the prefilling members and of newly admitted requests within ``token_budget`` (runtime.batching)."""
        stage, prompt, gen, pdone = self.stage, self.prompt, self.gen, self.pdone
        self._grow_decoding(b)
        members = b.members
        dec = self._at_stage(members, 2)
        left = self.batcher.token_budget - len(dec)
        pend = 0  # prompt tokens still to prefill (an exact integer sum, as sum() of the list was)
        for k in range(len(members)):
            r = members[k]
            if stage[r] == 0:
                pend += prompt[r]
                pend += gen[r]
                pend -= pdone[r]
        room = left - pend
        if self.queue and room > 0 and len(b.members) < self.max_batch:
            before = len(b.members)
            self._refill(b.members, room)
            for r in b.members[before:]:
                self._admit(r, b)
        pre = self._at_stage(b.members, 0)
        qs = plan_chunks([prompt[r] + gen[r] - pdone[r] for r in pre], left)
        pre, qs = [r for r, q in zip(pre, qs) if q > 0], [q for q in qs if q > 0]
        if pre:
            cap = self.model.max_context
            cs = [min(pdone[r], cap) for r in pre]
            agg = np.array([1.0, len(pre), float(sum(qs)), float(sum([q * c for q, c in zip(qs, cs)])),
                            float(sum([q * q for q in qs])), float(sum(cs))])
            for r in pre:
                stage[r] = 1
            part = _Part(b, "prefill", pre, self._pass_vals(agg), self.seg_end["prefill"], self._omap("prefill"))
            part.qs = qs
            part.epochs = self._epochs(pre)
            b.pre = part
            self._dispatch(part)
        if dec:
            self._decode_part(b, dec)

    def _pass_vals(self, agg: np.ndarray):
        """Every coefficient row priced at a pass's aggregates, flat (row k of block b at ``k * nb + b``): a float
        array (a typed memoryview when compiled) or, pure Python, a list of the same floats."""
        v = (self.K @ agg).ravel()
        return v if _COMPILED else v.tolist()

    def _omap(self, phase: str):
        return self.static_map[phase] if self.static_map is not None else None

    def _dispatch(self, part: _Part) -> None:
        blk = part.block
        part.end = part.seg[blk]
        part.family = self.families[blk]
        part.mem_xy = self.block_mem_xy[blk]
        self._ready(part)

    def _end_part(self, part: _Part) -> None:
        """A pass of one stream went through every block: emit one token per (still admitted) request."""
        now = self.now
        b = part.batch
        emitted = 0
        gen, out, epoch, stage = self.gen, self.out, self.epoch, self.stage
        prefill = part.pid == 0  # _PHASES[0] == "prefill"
        chunks = part.qs
        rids, epochs = part.rids, part.epochs
        for k in range(len(rids)):
            r = rids[k]
            if epoch[r] != epochs[k]:
                continue  # preempted while the pass was in flight
            if chunks is not None:  # chunked prefill: a token only with the prompt's last chunk
                pd = self.pdone[r] + chunks[k]
                self.pdone[r] = pd
                if pd < self.prompt[r] + gen[r]:
                    stage[r] = 0
                    continue
            gen[r] += 1
            emitted += 1
            if prefill:
                stage[r] = 2
            ft = self.first_t[r]  # (a C double when compiled: the test boxes no float)
            if ft == _INF:
                self.first_t[r] = now
                self.first_bs[r] = now - self.admit_t[r]
            if gen[r] >= out[r]:
                self._complete(r, b)
        if emitted:
            self.tokens += emitted
            self.token_t.append(now)
            self.token_n.append(emitted)
        if prefill:
            b.pre = None
        else:
            b.dec = None
        self._sample_mem()
        self._start_prefill(b)
        self._start_decode(b)
        if b.pre is None and b.dec is None and not b.members:
            self.batches.pop(b.bid, None)
        self._try_form()

    def _complete(self, r: int, b: _Batch) -> None:
        self.status[r] = DONE
        self.finish_t[r] = self.now
        self.where[r] = -1
        self.running.discard(r)
        self.mem.free(r)
        self.pg_lim[r] = -1
        b.members.remove(r)
        self.n_done += 1

    # ------------------------------------------------------------------------------------- elastic scheduler
    # ElasticScheduler.choose/steal (hydra_opt.runtime.scheduling, the reference) evaluated on the engine's own
    # state: per-(phase, block) candidate lists and Ω, per-(block, chiplet) distances and per-chiplet
    # (family, phase) flags are tables, so a decision is a few C loops instead of Python calls, tuples and
    # closures. Same decisions, in the same order of evaluation (the bit-identity checks compare both).
    def _elastic_tables(self, scheduler) -> None:
        self.elastic = type(scheduler) is ElasticScheduler
        if not self.elastic:
            return
        nb, nc, view = self.nb, self.nc, self.view
        self.el_spread = scheduler.spread
        self.el_margin = scheduler.lend_margin
        self.el_w = scheduler.distance_weight
        self.el_lend = scheduler.lend
        self.el_cost = scheduler.cost_aware
        keys = sorted(view.native)
        kid = {k: i for i, k in enumerate(keys)}
        self.el_nk = len(keys)
        self.p_key = array("q", [kid[(self.families[b], p)] for p in _PHASES for b in range(nb)])
        self.p_pref = array("q", [scheduler.omega[(p, b)] for p in _PHASES for b in range(nb)])
        self.p_lent = [scheduler._pool(self.families[b], p, view)[1] for p in _PHASES for b in range(nb)]
        self.el_serves = array("q", [int(k in view.serves[c]) for c in range(nc) for k in keys])
        self.el_famok = array("q", [int(k[0] in {f for f, _ in view.serves[c]}) for c in range(nc) for k in keys])
        # The chiplets with load >= spread (_load_add), unordered, el_over of them at el_ov[:el_over]; el_ovpos: each
        # one's place there (a chiplet leaves by a swap with the last).
        self.el_over = self.nc if self.el_spread <= 0 else 0
        self.el_ov = array("q", range(nc))
        self.el_ovpos = array("q", range(nc))
        self.el_dist = array("q", [manhattan(view.xy[c], self.block_mem_xy[b]) for b in range(nb) for c in range(nc)])
        # The same candidate lists flat, as C integers: (phase, block) i's native chiplets at
        # el_cand[el_n0[i]:el_n1[i]], its lending ones at el_cand[el_l0[i]:el_l1[i]].
        cand, n0, n1, l0, l1 = [], [], [], [], []
        for i in range(2 * nb):
            n0.append(len(cand))
            cand += self.p_native[i]
            n1.append(len(cand))
            l0.append(len(cand))
            cand += self.p_lent[i]
            l1.append(len(cand))
        self.el_cand = array("q", cand)
        self.el_n0, self.el_n1, self.el_l0, self.el_l1 = (array("q", x) for x in (n0, n1, l0, l1))
        # Queued tasks per (chiplet, key) at c * el_nk + k: _el_steal skips a victim none of whose tasks the idle
        # chiplet may take without walking its queue (the deque's items are Python objects).
        self.el_qk = array("q", [0]) * (nc * self.el_nk)
        # The same as bit masks when the keys fit a C integer (nk <= 62; else el_bits is False and _el_steal walks
        # the counts): el_qm[c] has key k's bit while c queues a task of key k; el_sm[c] / el_fm[c] have the keys c
        # serves natively / of its families (el_serves / el_famok). _el_steal's test of a victim is then one AND.
        self.el_bits = self.el_nk <= 62
        nbit = self.el_nk if self.el_bits else 0
        self.el_bit = array("q", [1 << k for k in range(nbit)])
        self.el_qm = array("q", [0]) * nc
        self.el_sm = array("q", [sum([1 << k for k in range(nbit) if self.el_serves[c * nbit + k]]) for c in range(nc)])
        self.el_fm = array("q", [sum([1 << k for k in range(nbit) if self.el_famok[c * nbit + k]]) for c in range(nc)])
        self.el_qn = array("q", [0]) * nc  # and per chiplet (its queue's length, a C read)
        # Victims set aside by the cost check of the current steal (el_rej[c] == el_stamp); el_j: the scanned task's
        # place in its victim's queue.
        self.el_rej = array("q", [0]) * nc
        self.el_stamp = 0
        self.el_j = 0

    def _el_min(self, lo: int, hi: int, blk: int) -> int:
        """The candidate in ``el_cand[lo:hi]`` minimising ``(load + distance_weight · hops to the block's memory, load,
        index)``."""
        nc, w = self.nc, self.el_w
        best = -1
        bs = 0.0
        bl = 0
        for j in range(lo, hi):
            c = self.el_cand[j]
            ld = self.load[c]
            s = ld + w * self.el_dist[blk * nc + c]
            if best < 0 or s < bs or (s == bs and (ld < bl or (ld == bl and c < best))):
                best = c
                bs = s
                bl = ld
        return best

    def _el_choose(self, task: _Part) -> int:
        """:meth:`ElasticScheduler.choose`."""
        blk = task.block
        i = task.pid * self.nb + blk
        pref = self.p_pref[i]
        n0, n1, l0, l1 = self.el_n0[i], self.el_n1[i], self.el_l0[i], self.el_l1[i]
        if l1 == l0 and self.load[pref] < self.el_spread:
            return pref  # below: load[pref] - lmin < spread for any lmin (loads are never negative), nothing to lend
        lmin = self.load[self.el_cand[n0]]
        for j in range(n0, n1):
            c = self.el_cand[j]
            if self.load[c] < lmin:
                lmin = self.load[c]
        lend_ok = False
        if l1 > l0:
            m = self.load[self.el_cand[l0]]
            for j in range(l0, l1):
                c = self.el_cand[j]
                if self.load[c] < m:
                    m = self.load[c]
            lend_ok = m + self.el_margin <= lmin
        if self.load[pref] - lmin < self.el_spread and not lend_ok:
            return pref
        best = self._el_min(n0, n1, blk)
        if lend_ok:
            alt = self._el_min(l0, l1, blk)
            if self.load[alt] + self.el_margin <= self.load[best]:
                return alt
        return best

    def _el_steal(self, idle: int):
        """:meth:`ElasticScheduler.steal`: the task to move to ``idle`` (its chiplet in ``self.victim``) or None.

        The best victim by queue length (:meth:`_el_scan`), then the cost check on its task alone
        (:meth:`_el_gain`); a victim whose task would not finish sooner on ``idle`` is set aside and the scan
        repeated — the reference's filter-then-choose, with one cost check per steal instead of one per victim."""
        if self.el_over == 0:  # no chiplet holds `spread` tasks: none can be a victim (the scan would find none)
            self.victim = -1
            return None
        if not self.el_cost:
            return self._el_scan(idle, 0)
        self.el_stamp += 1
        stamp = self.el_stamp
        while True:
            task = self._el_scan(idle, stamp)
            if task is None or self._el_gain(task, idle, self.victim, self.el_j):
                return task
            self.el_rej[self.victim] = stamp  # set aside for this steal

    def _el_scan(self, idle: int, stamp: int):
        """The best victim's newest task ``idle`` may take (victims marked ``stamp`` in ``el_rej`` skipped): the task,
        its chiplet in ``self.victim`` and its place in that queue in ``self.el_j``; or None."""
        spread = self.el_spread
        nk = self.el_nk
        nc = self.nc
        queues = self.queues
        lend = self.el_lend
        best = None
        bv = -1
        bj = 0
        bl = 0
        bd = 0
        for i in range(self.el_over):  # only chiplets holding `spread` tasks can be victims
            victim = self.el_ov[i]
            if victim == idle or (stamp and self.el_rej[victim] == stamp):
                continue
            lv = self.load[victim]
            if bv >= 0 and lv < bl:
                continue  # cannot beat the best so far, whatever it holds
            # Skip a victim holding no task `idle` may take (the walk below would find none): per-key counts.
            wide = lend and lv >= spread + self.el_margin  # then borrowed tasks of its families too
            if self.el_bits:
                want = self.el_sm[idle]
                if wide:
                    want |= self.el_fm[idle]
                if not (self.el_qm[victim] & want):
                    continue
            else:
                k = 0
                while k < nk:
                    if self.el_qk[victim * nk + k] and (self.el_serves[idle * nk + k]
                                                       or (wide and self.el_famok[idle * nk + k])):
                        break
                    k += 1
                if k == nk:
                    continue
            n = self.el_qn[victim]  # len(queues[victim])
            if n < spread - 1:
                continue
            q = queues[victim]
            j = n
            while j > 0:  # newest first: it would wait longest where it is (indexed: no reversed() iterator)
                j -= 1
                task = q[j]
                k = self.p_key[task.pid * self.nb + task.block]
                native = self.el_serves[idle * nk + k]
                if not native and not (lend and self.el_famok[idle * nk + k]):
                    continue
                if not native and lv < spread + self.el_margin:
                    continue
                d = self.el_dist[task.block * nc + idle]
                # min of (-load, hops, victim) (the reference visits victims in ascending order; these in any)
                if bv < 0 or lv > bl or (lv == bl and (d < bd or (d == bd and victim < bv))):
                    best = task
                    bv = victim
                    bj = j
                    bl = lv
                    bd = d
                break
        self.victim = bv
        self.el_j = bj
        return best

    def _t_est(self, task: _Part, c: int, extra: int) -> float:
        """Expected seconds of ``task`` on chiplet ``c`` (the elastic steal's cost, docs/simulator.md *Task
        schedulers*): what :meth:`_start_next` would charge — compute/SRAM roofline of its blocks plus the
        hand-off — against its bytes at the share of its route's bottleneck resource with ``extra`` more flows
        than it carries now (equal split: the share a new flow can count on), plus the route's latency."""
        nb = self.nb
        tau = self.ctype[c]
        oc = 3 * tau * nb
        osr = oc + nb
        om = self.R_MEM * nb
        hook = self.hooks.get(c) if self.hooked else None
        cs = nbytes = 0.0
        for b in range(task.block, task.end):
            x = task.vals[oc + b] if hook is None else self._hook_time(hook, tau, task, b)
            y = task.vals[osr + b]
            cs += x if x > y else y
            nbytes += task.vals[om + b]
        prev = task.prev_chip
        if prev >= 0 and prev != c:
            cs += self.chip_lat[prev * self.nc + c] + 0.5 * task.vals[self.R_IO * nb + task.block] / self.link_bps
        if nbytes <= 0.0:
            return cs
        i = task.block * self.nc + c
        share = _INF
        for k in range(self.bc_r0[i], self.bc_r0[i + 1]):  # the route's resources (flat, bc_path's order)
            r = self.bc_rs[k]
            n = extra + (self.flows.rcnt[r] if self.flows is not None else 0)
            x = self.cap_d[r] / n if n > 1 else self.cap_d[r]
            if x < share:
                share = x
        x = nbytes / share
        return (cs if cs > x else x) + self.bc_lat[i]

    def _rest_s(self, c: int) -> float:
        """Expected seconds left of the task running on chiplet ``c`` (0 when idle or overdue)."""
        run = self.run_task[c]
        if run is None:
            return 0.0
        x = run.start + self._t_est(run, c, 0) - self.now
        return x if x > 0.0 else 0.0

    def _el_gain(self, task: _Part, idle: int, victim: int, j: int) -> bool:
        """:meth:`ElasticScheduler._gains`: whether ``task`` (at place ``j`` of ``victim``'s queue) would finish
        sooner on ``idle`` — its time there with its flow added to the route's — than after the victim's running
        task and the ``j`` tasks queued before it, plus its own time on the victim."""
        t_idle = self._t_est(task, idle, 1)
        t_v = self._t_est(task, victim, 0)
        if t_idle < t_v:
            return True  # whatever it waits there (wait >= 0, and + t_v rounds monotonically): no need to sum it
        q = self.queues[victim]
        wait = self._rest_s(victim)
        for i in range(j):
            wait += self._t_est(q[i], victim, 0)
        return t_idle < wait + t_v

    def _el_queued(self, c: int, k: int, d: int) -> None:
        """``el_qk[c, k] += d`` (d is +1 or -1), keeping key ``k``'s bit of ``el_qm[c]``."""
        x = c * self.el_nk + k
        n = self.el_qk[x] + d
        self.el_qk[x] = n
        if self.el_bits:
            if n == 0:
                self.el_qm[c] &= ~self.el_bit[k]
            elif n == 1 and d > 0:
                self.el_qm[c] |= self.el_bit[k]

    def _load_add(self, c: int, d: int) -> None:
        """``load[c] += d`` (queued + running tasks), keeping ``el_over``/``el_ov``: how many and which chiplets hold
        at least the elastic scheduler's ``spread`` tasks (only those can be stolen from)."""
        was = self.load[c]
        self.load[c] = was + d
        if self.elastic and (was >= self.el_spread) != (was + d >= self.el_spread):
            n = self.el_over
            if d > 0:  # (d is +1 or -1) c joins the chiplets holding `spread` tasks
                self.el_ov[n] = c
                self.el_ovpos[c] = n
            else:  # c leaves: the last takes its place
                i = self.el_ovpos[c]
                x = self.el_ov[n - 1]
                self.el_ov[i] = x
                self.el_ovpos[x] = i
            self.el_over = n + d

    # ----------------------------------------------------------------------------------------------- tasks
    def _ready(self, task: _Part) -> None:
        omap = task.omap
        if omap is not None:
            c = omap[task.block]
        elif self.elastic:
            c = self._el_choose(task)
        else:
            c = self.sched.choose(task, task.block, self.view)
        task.chip = c
        queues = self.queues
        self.q_append[c](task)
        i = task.pid * self.nb + task.block
        if self.elastic:
            self._el_queued(c, self.p_key[i], 1)
            self.el_qn[c] += 1
        self._load_add(c, 1)
        if not self.busy[c]:
            self._start_next(c)
        elif self.elastic:  # (elastic steals) the loop below on C arrays: p_native[i] is el_cand[el_n0[i]:el_n1[i]]
            for j in range(self.el_n0[i], self.el_n1[i]):
                idle = self.el_cand[j]
                if not self.busy[idle] and not self.el_qn[idle]:
                    self._start_next(idle)
                    if not self.el_qn[c]:
                        break
        elif self.stealing:
            for idle in self.p_native[task.pid * self.nb + task.block]:
                if not self.busy[idle] and not queues[idle]:
                    self._start_next(idle)
                    if not queues[c]:
                        break

    def _start_next(self, c: int) -> None:
        if self.elastic:
            queued = self.el_qn[c] > 0
        else:
            queued = len(self.queues[c]) > 0
        if queued:
            task = self.q_popleft[c]()
            if self.elastic:
                self._el_queued(c, self.p_key[task.pid * self.nb + task.block], -1)
                self.el_qn[c] -= 1
        elif self.stealing:
            if self.elastic:
                task = self._el_steal(c)
                if task is None:
                    return
                victim = self.victim  # (boxed: shared with the branch below; self.victim is the C number)
                self._el_queued(self.victim, self.p_key[task.pid * self.nb + task.block], -1)
                self.el_qn[self.victim] -= 1
            else:
                got = self.sched.steal(c, self.view)
                if got is None:
                    return
                victim, task = got
            self.q_remove[victim](task)
            self._load_add(victim, -1)
            self._load_add(c, 1)
            task.chip = c
        else:
            return
        self.busy[c] = 1
        self.run_task[c] = task
        now = self.now
        task.start = now
        blk = task.block
        end = task.end
        tau = self.ctype[c]
        hook = self.hooks.get(c) if self.hooked else None
        nb = self.nb
        oc = 3 * tau * nb  # offsets of this chiplet type's compute, SRAM and energy rows in the flat vals
        osr = oc + nb
        oe = osr + nb
        om = self.R_MEM * nb
        if end == blk + 1:
            if hook is None:
                cs = task.vals[oc + blk]
                x = task.vals[osr + blk]
                if x > cs:
                    cs = x
            else:
                cs = max(self._hook_time(hook, tau, task, blk), task.vals[osr + blk])
            nbytes = task.vals[om + blk]
            self.energy_dyn += task.vals[oe + blk]
        else:  # a fused run of blocks: compute/SRAM roofline per block, one flow for all their bytes
            cs = nbytes = 0.0
            for b in range(blk, end):
                x = task.vals[oc + b] if hook is None else self._hook_time(hook, tau, task, b)
                y = task.vals[osr + b]
                cs += x if x > y else y
                nbytes += task.vals[om + b]
                self.energy_dyn += task.vals[oe + b]
        prev = task.prev_chip
        if prev >= 0 and prev != c:
            cs += self.chip_lat[prev * self.nc + c] + 0.5 * task.vals[self.R_IO * nb + blk] / self.link_bps
        self.seq += 1
        if nbytes <= 0.0:
            task.cs_open = True
            task.flow_open = False
            self._hpush(now + cs, self.seq, _EV_COMPUTE, task, 0)
            return
        res, lat = self.bc_path[blk][c]
        task.res = res
        task.nbytes = nbytes
        # Weights/KV stream at the pace compute consumes them (double buffering): the flow's own rate cap is
        # bytes / compute time, so it never finishes before the compute and the task ends when its data is
        # delivered: max(compute, bytes / bandwidth share) + path latency (the roofline max, Sec. "opcost").
        cap = nbytes / cs if cs > 0.0 else _INF
        flows = self.flows
        if flows is not None:
            task.cs_open = False
            task.flow_open = True
            fid = self.flow_seq = self.flow_seq + 1
            self._retimed(flows.start(fid, res, nbytes, now, cap, lat, task))
        elif self.net is not None:
            task.cs_open = False
            task.flow_open = True
            self.flow_seq += 1
            self.flow_task[self.flow_seq] = task
            self.net.add_flow(self.flow_seq, self.block_node[blk], self.chip_node[c], nbytes, now,
                              cap_gbps=cap / 1e9 if cap < _INF else None)
            self._net_changed = True
        else:  # no contention: the lone-flow time on its bottleneck resource
            t_mem = nbytes / min([self.cap_d[r] for r in res])
            self._account(task)
            task.cs_open = True
            task.flow_open = False
            self._hpush(now + (cs if cs > t_mem else t_mem) + lat, self.seq, _EV_COMPUTE, task, 0)

    def _hook_time(self, hook, tau: int, task: _Part, block: int) -> float:
        """Compute time from a chiplet's own model (cached per block, phase, batch shape and context bucket)."""
        part = task
        prompt, gen = self.prompt, self.gen
        if part.phase == "prefill" and part.qs is not None:
            ctx = [self.pdone[r] for r in part.rids]
            new = list(part.qs)
        elif part.phase == "prefill":
            ctx = [0] * len(part.rids)
            new = [prompt[r] + gen[r] for r in part.rids]
        else:
            cap = self.model.max_context
            ctx = [min(prompt[r] + gen[r] - 1, cap) for r in part.rids]
            new = [1] * len(part.rids)
        # Context bucket: mean context rounded to 64 tokens (ARCHITECTURE "speed habits"); exact batch and new tokens.
        n = len(ctx)
        key = (tau, block, part.phase, n, sum(new), sum(q * q for q in new), round(sum(ctx) / (64 * n)))
        t = self.hook_cache.get(key)
        if t is None:
            t = float(hook(block, part.phase, np.asarray(ctx), np.asarray(new)))
            self.hook_cache[key] = t
        return t

    def _finish(self, part: _Part) -> None:
        c = part.chip
        self.busy[c] = 0
        self.run_task[c] = None
        self._load_add(c, -1)
        self.busy_s[c] += self.now - part.start
        part.prev_chip = c
        blk = part.block = part.end
        if blk < self.nb:
            self._dispatch(part)
        else:
            self._end_part(part)
        if not self.busy[c] and (self.stealing or self.queues[c]):
            self._start_next(c)  # (advancing the batch may already have started a task here)

    # --------------------------------------------------------------------------------------------- bookkeeping
    def _sample_mem(self) -> None:
        now = self.now
        dt = now - self.mem_t
        if dt > 0:
            mi = self.mem_int
            for h in range(len(mi)):  # (mem_int and mem._used: one entry per memory)
                mi[h] += self.mem_used[h] * dt
        self.mem_t = now

    def _port_util(self, end: float) -> np.ndarray:
        """Utilisation of each memory chiplet's interface bandwidth over the run (fraction, per memory)."""
        if end <= 0:
            return np.zeros(len(self.sys.mem_node))
        out = []
        for m, nd in enumerate(self.sys.mem_node):
            if self.net is not None:
                r = self.net.port(nd)
                carried = float(self.net.carried_bytes()[r]) if r is not None else 0.0
            else:
                carried = self.link_bytes[self.port_res[nd]]
            share = self.sys.memories[m].bw_gbps / self.port_bw[nd]
            out.append(carried * share / (self.sys.memories[m].bw_gbps * 1e9 * end))
        return np.asarray(out)

    def _check(self) -> None:
        """Invariants (debug mode): memory within capacity, request conservation, token conservation."""
        self.mem.check()
        assert self.n_arrived == len(self.queue) + len(self.running) + self.n_done + self.n_rejected, (
            self.n_arrived, len(self.queue), len(self.running), self.n_done, self.n_rejected)
        self._checks += 1
        if self._checks % 512 == 1:  # the O(requests) scans, now and then
            st = self.status
            assert sum(1 for x in st if x == QUEUED) == len(self.queue)
            assert sum(1 for x in st if x == RUNNING) == len(self.running)
            assert self.tokens == sum(self.gen) + self.discarded, (self.tokens, sum(self.gen), self.discarded)
            for rid in self.running:
                assert self.mem.holds(rid)
            assert sum(self.busy) == sum(1 for t in self.run_task if t is not None)

    def _raw(self, end: float, wall: float) -> RawRun:
        self.now = end
        self._sample_mem()
        running_busy = np.array(self.busy_s)
        for c, task in enumerate(self.run_task):  # tasks running at the cut-off count as busy up to it
            if task is not None:
                running_busy[c] += max(0.0, end - task.start)
        nl = self.mesh.n_links
        if self.net is not None:
            link_util = self.net.link_utilisation(end) if end > 0 else np.zeros(nl)
            series = self.net.utilisation_series() if self.opt.link_bins_s else None
        else:
            # Bytes are credited when a flow drains (flows cut by the horizon are not counted).
            link_util = np.asarray(self.link_bytes[:nl]) / (self.link_bps * end) if end > 0 else np.zeros(nl)
            series = None
            if self.bin_s is not None:
                nbin = int(math.ceil(end / self.bin_s - 1e-12)) if end > 0 else 0
                b = self.bins[:nbin, :nl]
                if b.shape[0] < nbin:
                    b = np.vstack([b, np.zeros((nbin - b.shape[0], nl))])
                series = (np.arange(nbin) * self.bin_s, b / (self.link_bps * self.bin_s))
        static_w = sum(c.static_power_w for c in self.sys.chiplets)
        return RawRun(
            arrival_s=np.asarray(self.arr),
            prompt_tokens=np.asarray(self.prompt, dtype=np.int64),
            output_tokens=np.asarray(self.out, dtype=np.int64),
            generated=np.asarray(self.gen, dtype=np.int64),
            status=np.asarray(self.status, dtype=np.int64),
            first_token_s=np.asarray(self.first_t),
            first_batch_start_s=np.asarray(self.first_bs),
            finish_s=np.asarray(self.finish_t),
            preemptions=np.asarray(self.npre, dtype=np.int64),
            token_t=np.asarray(self.token_t),
            token_n=np.asarray(self.token_n, dtype=np.int64),
            tokens_emitted=self.tokens,
            tokens_discarded=self.discarded,
            sim_end_s=end,
            events=self.events,
            wall_s=wall,
            chip_busy_s=running_busy,
            chip_names=[c.name for c in self.sys.chiplets],
            link_util=np.asarray(link_util),
            link_series=series,
            mem_port_util=self._port_util(end),
            mem_capacity=self.mem.capacity.copy(),
            mem_peak=self.mem.peak.copy(),
            mem_mean=np.asarray(self.mem_int) / end if end > 0 else np.asarray(self.mem_int),
            energy_dyn_j=self.energy_dyn,
            energy_static_j=static_w * end,
            preempt_events=self.preempt_events,
            n_arrived=self.n_arrived,
        )

    # ---------------------------------------------------------------------------------------------- set-up
    def _init_coefficients(self, system: SimSystem, model: SimModel) -> None:
        """Per-chiplet-type linear time/energy coefficients: rows [comp_τ, sram_τ, energy_τ]*, mem, io."""
        types: list = []
        ctype: list[int] = []
        for c in system.chiplets:
            if c not in types:
                types.append(c)
            ctype.append(types.index(c))
        self.ctype = array("q", ctype)  # C integers: task starts and the steal's cost read it per task
        self.T = len(types)
        rows = []
        mem_k, io_k = mem_coefficients(model.coeffs)
        mem_pj = np.array([system.memories[m].energy_pj_per_byte for m in system.block_mem], dtype=np.float64)
        cf = {f: model.coeffs[:, i, :] for i, f in enumerate(COST_FIELDS)}
        for t in types:
            comp, sram = time_coefficients(t, model.coeffs)
            # Energy is linear in the cost fields too: price the coefficient matrices through opcost.
            e = task_energy_j(t, BlockCost(**cf), 0.0, mem_pj[:, None])
            rows += [comp, sram, np.asarray(e, dtype=np.float64) * np.ones_like(comp)]
        rows += [mem_k, io_k]
        self.K = np.stack(rows)  # (3T+2, nb, 6)
        self.R_MEM = 3 * self.T
        self.R_IO = 3 * self.T + 1

    def _init_topology(self, system: SimSystem, model: SimModel, options: SimOptions, scheduler: TaskScheduler) -> None:
        """Chiplet/memory nodes, scheduler views, block fusion segments, per-chiplet state."""
        nb, mesh = self.nb, self.mesh
        self.chip_node = list(system.chip_node)
        self.block_mem = list(system.block_mem)
        self.block_node = [system.mem_node[m] for m in self.block_mem]
        self.families = list(model.families)
        self.block_mem_xy = [mesh.xy(nd) for nd in self.block_node]
        self.nc = len(system.chiplets)
        native, family_any = compat_lists(system.chiplets, model.families)
        # Per-chiplet load as a typed array (the schedulers index it as they would a list).
        self.view = ChipletView(xy=[mesh.xy(nd) for nd in self.chip_node], native=native, family_any=family_any,
                                load=array("q", [0]) * self.nc)
        self.stealing = type(scheduler).steal is not TaskScheduler.steal
        # Per (phase, block) at pid * nb + block: the chiplets built for the task (idle ones may steal it).
        self.p_native = [self.view.native[(self.families[b], p)] for p in _PHASES for b in range(nb)]
        self._elastic_tables(scheduler)
        # The static scheduler is a table lookup: skip the method call on the hot path.
        self.static_map = None
        if type(scheduler) is StaticScheduler:
            om = scheduler.omega
            self.static_map = {p: [om[(p, b)] for b in range(nb)] for p in ("prefill", "decode")}
        self.hooks = dict(system.compute_hooks)
        self.hooked = len(self.hooks) > 0  # (a C flag: the per-task paths test it, not the dict)
        # Block fusion: per phase, the block after the end of the run of blocks starting at each block that Ω puts
        # on one chiplet (without its own compute model) with weights on one memory node and of one family.
        self.seg_end = {p: list(range(1, nb + 1)) for p in ("prefill", "decode")}
        om = getattr(scheduler, "omega", None)
        if options.fuse_blocks and om is not None:
            for p in ("prefill", "decode"):
                ends = self.seg_end[p]
                for b in range(nb - 2, -1, -1):
                    c = om[(p, b)]
                    if (om[(p, b + 1)] == c and c not in self.hooks and self.block_node[b + 1] == self.block_node[b]
                            and self.families[b + 1] == self.families[b]):
                        ends[b] = ends[b + 1]
        self.hook_cache: dict = {}
        self.busy = array("q", [0]) * self.nc  # 1 while a task runs on the chiplet
        self.busy_s = array("d", [0.0]) * self.nc
        self.queues = self.view.queues  # the view's own lists (the schedulers read them)
        # Their bound append/popleft/remove, looked up once: a call of a stored bound method skips the method lookup.
        self.q_append = [q.append for q in self.queues]
        self.q_popleft = [q.popleft for q in self.queues]
        self.q_remove = [q.remove for q in self.queues]
        self.load = self.view.load
        self.energy_dyn = 0.0

    def _init_network(self, system: SimSystem, options: SimOptions) -> None:
        """Flow sharing model, routes and latencies of every (memory, chiplet) and chiplet pair, link accounting."""
        nb, mesh = self.nb, self.mesh
        self.sharing = options.sharing
        self.hopm = [[mesh.hops(a, b) for b in range(mesh.n_nodes)] for a in range(mesh.n_nodes)]
        port_bw: dict[int, float] = {}
        for m, nd in enumerate(system.mem_node):
            port_bw[nd] = port_bw.get(nd, 0.0) + system.memories[m].bw_gbps
        self.net = None
        self.flows = None
        if self.sharing == "maxmin":
            from hydra_opt.hardware.noi import FlowNetwork

            self.net = FlowNetwork(mesh, port_gbps=port_bw, sharing="maxmin", bin_s=options.link_bins_s)
        port_res = {nd: mesh.n_links + i for i, nd in enumerate(sorted(port_bw))}
        self.port_res = port_res
        self.port_bw = port_bw
        caps = [self.link_bps] * mesh.n_links + [port_bw[nd] * 1e9 for nd in sorted(port_bw)]
        if self.sharing in ("fair", "equal"):
            from hydra_opt.evaluate.simulator.flows import EqualShareFlows

            self.flows = EqualShareFlows(caps, mesh.n_links, waterfill=self.sharing == "fair")
        self.cap_d = array("d", caps)  # every resource's capacity, bytes/s (C doubles when compiled)
        # Resources crossed by the flow from each block's memory to each chiplet: XY route links + memory port.
        self.res_path: dict[tuple[int, int], tuple[int, ...]] = {}
        for src in set(system.mem_node):
            for dst in set(self.chip_node):
                self.res_path[(src, dst)] = (*mesh.route(src, dst), port_res[src])
        # Per (block, chiplet): (resources of the memory flow, its path latency); per chiplet pair: hand-off latency.
        self.bc_path = [
            [(self.res_path[(self.block_node[b], self.chip_node[c])],
              self.hopm[self.block_node[b]][self.chip_node[c]] * self.hop_s) for c in range(self.nc)]
            for b in range(nb)
        ]
        # The same flat, for the elastic steal's cost (_t_est): (block, chiplet) i's route resources at
        # bc_rs[bc_r0[i]:bc_r0[i + 1]], its latency at bc_lat[i].
        rs, r0, lats = [], [], []
        for b in range(nb):
            for c in range(self.nc):
                res, lat = self.bc_path[b][c]
                r0.append(len(rs))
                rs += res
                lats.append(lat)
        r0.append(len(rs))
        self.bc_rs, self.bc_r0, self.bc_lat = array("q", rs), array("q", r0), array("d", lats)
        # Hand-off latency from chiplet a to c at a * nc + c (C doubles when compiled: no float boxed per hand-off).
        self.chip_lat = array("d", [self.hopm[self.chip_node[a]][self.chip_node[c]] * self.hop_s
                                    for a in range(self.nc) for c in range(self.nc)])
        self.link_bytes = array("d", [0.0]) * len(caps)
        self.bin_s = options.link_bins_s if self.net is None else None
        self.bins = np.zeros((16, len(caps)))
        self.flow_task: dict[int, object] = {}
        self.flow_seq = 0

    def _init_memory(self, system: SimSystem, model: SimModel, options: SimOptions) -> None:
        """Paged KV/state memory left after the weights, per memory."""
        nb = self.nb
        nm = len(system.memories)
        free = np.array([m.capacity_bytes for m in system.memories], dtype=np.float64)
        kv = np.zeros(nm)
        st = np.zeros(nm)
        for b in range(nb):
            m = self.block_mem[b]
            free[m] -= model.weight_bytes[b]
            kv[m] += model.kv_bytes_per_token[b]
            st[m] += model.state_bytes[b]
        self.mem = PagedMemory(np.maximum(free, 0.0), kv, st, options.page_tokens)
        self.page_tokens = self.mem.page_tokens
        self.mem_pages = self.mem.pages  # its dict of pages held (_ensure reads it typed, without two lookups)
        # _ensure's growth path: its used/peak arrays (shared, updated in place) and, per memory holding KV (its
        # _kv_idx order), the index, page bytes and capacity as C numbers.
        self.mem_used, self.mem_peak = self.mem._used, self.mem._peak
        kv_idx = self.mem._kv_idx
        self.mk_n = len(kv_idx)
        self.mk_idx = array("q", kv_idx)
        self.mk_pb = array("d", [self.mem.page_bytes[h] for h in kv_idx])
        self.mk_st = array("d", [0.0] * len(kv_idx))
        self.mk_cap = array("d", [self.mem._cap[h] for h in kv_idx])
        # _alloc's (a first allocation): the same per memory holding KV or state (its _all_idx order), with the state.
        all_idx = self.mem._all_idx
        self.ma_n = len(all_idx)
        self.ma_idx = array("q", all_idx)
        self.ma_st = array("d", [self.mem.state[h] for h in all_idx])
        self.ma_pb = array("d", [self.mem.page_bytes[h] for h in all_idx])
        self.ma_cap = array("d", [self.mem._cap[h] for h in all_idx])
        self.mem_int = [0.0] * nm
        self.mem_t = 0.0
