# Cython declarations for engine.py (docs/simulator.md "Compiled hot loop"); ignored by pure Python.
# The task record and the engine become extension types with C-level attribute access, and the per-task methods
# C-level calls. Only C doubles for Python floats and C integers for counters that stay far below 2**63: the
# arithmetic is the same IEEE-754 double arithmetic as in Python, so results are bit-identical.
import cython

from hydra_opt.evaluate.simulator.flows cimport EqualShareFlows, Flow

cdef double _INF
cdef bint _COMPILED
# Event kinds as C integers: the loop and the heap's sifts compare them without a module-global lookup.
cdef long long _EV_COMPUTE, _EV_FLOW, _EV_DRAIN


# final: no Python subclass can override a method, so cpdef calls are direct C calls (no dispatch check).
@cython.final
cdef class _Part:
    cdef public object batch, phase, family, mem_xy
    cdef public list rids, epochs, seg, omap, qs
    cdef public tuple res
    cdef public double[::1] vals
    cdef public Py_ssize_t pid, block, prev_chip, chip, end
    cdef public double start, nbytes
    cdef public bint cs_open, flow_open


@cython.final
cdef class _Batch:
    cdef public object bid
    cdef public list members
    cdef public _Part pre, dec


# The hot methods read typed arrays as self.x[i] (initializedcheck off), not through local memoryview copies: a
# local copy costs an atomic acquire and release per call.
@cython.final
cdef class Engine:
    cdef public list admit_t, arr, bc_path, block_mem, block_mem_xy, block_node, chip_node
    cdef public double[::1] chip_lat
    cdef public list epoch, families, finish_t, first_bs, first_t, gen, heap, hopm, mem_int, npre, out, prompt
    cdef public list run_task, stage, status, token_n, token_t, where, pdone
    cdef public object K, T, batcher, batches, bin_s, bins
    cdef public object discarded
    cdef public object flow_task, hook_cache, hooks, max_batch, max_batches
    cdef public object mem, mesh, model, n, n_arrived, n_done, n_rejected, net, next_bid, opt
    cdef public object port_bw, port_res, preempt_events, queue, res_path, running, sched, scn, seg_end
    cdef public object sharing, static_map, sys, view
    cdef public dict mem_pages
    cdef public long long[::1] pg_lim
    cdef public double[::1] mem_used, mem_peak
    cdef public long long[::1] mk_idx, ma_idx
    cdef public double[::1] mk_st, mk_pb, mk_cap, ma_st, ma_pb, ma_cap
    cdef public Py_ssize_t mk_n, ma_n
    cdef public EqualShareFlows flows
    cdef public long long[::1] busy
    cdef public double[::1] busy_s, link_bytes
    cdef public list queues, p_native, p_lent, q_append, q_popleft, q_remove
    cdef public long long[::1] load
    cdef public long long[::1] p_key, p_pref, el_serves, el_famok, el_dist, el_cand, el_n0, el_n1, el_l0, el_l1, el_qk, el_qn, el_ov, el_ovpos
    cdef public long long el_spread, el_margin, el_over
    cdef public double el_w
    cdef public Py_ssize_t el_nk, victim
    cdef public bint elastic, el_lend, el_bits, el_cost
    cdef public long long[::1] el_rej, bc_rs, bc_r0
    cdef public double[::1] bc_lat, cap_d
    cdef public long long el_stamp
    cdef public Py_ssize_t el_j
    cdef public long long[::1] el_bit, el_qm, el_sm, el_fm
    cdef public double[::1] h_t
    cdef public long long[::1] h_s, h_e, ev_k, ev_v, ev_pos, ev_free
    cdef public list ev_o
    cdef public Py_ssize_t h_n, ev_nfree
    cdef public double now
    cdef public double stale_t
    cdef public double link_bps
    cdef public double energy_dyn
    cdef public double hop_s
    cdef public double mem_t
    cdef public long long seq
    cdef public long long events
    cdef public long long flow_seq
    cdef public long long tokens
    cdef public long long page_tokens
    cdef public long long _checks
    cdef public Py_ssize_t nb
    cdef public Py_ssize_t nc
    cdef public Py_ssize_t R_MEM
    cdef public Py_ssize_t R_IO
    cdef public bint stealing
    cdef public bint continuous
    cdef public bint chunked
    cdef public bint arrivals_done
    cdef public bint _net_changed
    cdef public long long[::1] ctype
    cdef public bint hooked

    @cython.locals(horizon=cython.double)
    cpdef run(self)
    @cython.locals(ta=cython.double, th=cython.double, t=cython.double, t_net=cython.double, i_arr=Py_ssize_t,
                   n=Py_ssize_t, kind="long long", debug=bint, net_dirty=bint, ver="long long", flow=Flow,
                   part=_Part, arr=list, e=Py_ssize_t)
    cpdef _loop(self, double horizon)
    cpdef _push(self, double t, int kind, task, long long ver=*)
    @cython.locals(i=Py_ssize_t, e=Py_ssize_t)
    cpdef Py_ssize_t _hpush(self, double t, long long seq, long long kind, obj, long long ver)
    @cython.locals(n=Py_ssize_t)
    cdef void _hpop(self) noexcept
    @cython.locals(i=Py_ssize_t, e=Py_ssize_t)
    cdef void _hmove(self, Flow f, long long seq) noexcept
    # noexcept: typed-array reads and writes only (no bounds checks), nothing can raise.
    @cython.locals(i0=Py_ssize_t, p=Py_ssize_t, c=Py_ssize_t, n=Py_ssize_t, tp=cython.double)
    cdef void _hplace(self, Py_ssize_t i, double t, long long seq, Py_ssize_t e) noexcept
    @cython.locals(seq="long long", f=Flow, k=Py_ssize_t, flows=EqualShareFlows)
    cpdef _retimed(self, Py_ssize_t n)
    @cython.locals(task=_Part)
    cpdef _drain(self, Flow flow)
    @cython.locals(nb=cython.double, r=Py_ssize_t)
    cpdef _account(self, _Part task)
    @cython.locals(blk=Py_ssize_t)
    cpdef _dispatch(self, _Part part)
    @cython.locals(c=Py_ssize_t, queues=list, idle=Py_ssize_t, i=Py_ssize_t, j=Py_ssize_t)
    cpdef _ready(self, _Part task)
    @cython.locals(nc=Py_ssize_t, w=cython.double, best=Py_ssize_t,
                   bs=cython.double, bl="long long", c=Py_ssize_t, ld="long long", s=cython.double, j=Py_ssize_t)
    cpdef Py_ssize_t _el_min(self, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t blk)
    @cython.locals(blk=Py_ssize_t, i=Py_ssize_t, pref=Py_ssize_t,
                   n0=Py_ssize_t, n1=Py_ssize_t, l0=Py_ssize_t, l1=Py_ssize_t, j=Py_ssize_t,
                   lmin="long long", m="long long", c=Py_ssize_t, lend_ok=bint, best=Py_ssize_t, alt=Py_ssize_t)
    cpdef Py_ssize_t _el_choose(self, _Part task)
    @cython.locals(stamp="long long", task=_Part)
    cpdef _el_steal(self, Py_ssize_t idle)
    @cython.locals(spread="long long", nk=Py_ssize_t, nc=Py_ssize_t, queues=list, lend=bint, bv=Py_ssize_t,
                   bl="long long", bd="long long", victim=Py_ssize_t, lv="long long", task=_Part, k=Py_ssize_t,
                   native=bint, d="long long", n=Py_ssize_t, j=Py_ssize_t, wide=bint,
                   i=Py_ssize_t, want="long long", bj=Py_ssize_t)
    cdef _el_scan(self, Py_ssize_t idle, long long stamp)
    @cython.locals(nb=Py_ssize_t, tau=Py_ssize_t, oc=Py_ssize_t, osr=Py_ssize_t, om=Py_ssize_t, cs=cython.double,
                   nbytes=cython.double, b=Py_ssize_t, x=cython.double, y=cython.double, prev=Py_ssize_t,
                   i=Py_ssize_t, k=Py_ssize_t, share=cython.double, r=Py_ssize_t, n="long long")
    cpdef double _t_est(self, _Part task, Py_ssize_t c, long long extra) except? -1
    @cython.locals(run=_Part, x=cython.double)
    cpdef double _rest_s(self, Py_ssize_t c) except? -1
    @cython.locals(q=object, wait=cython.double, i=Py_ssize_t, t_idle=cython.double, t_v=cython.double)
    cdef bint _el_gain(self, _Part task, Py_ssize_t idle, Py_ssize_t victim, Py_ssize_t j) except -1
    @cython.locals(x=Py_ssize_t, n="long long")
    cdef inline void _el_queued(self, Py_ssize_t c, Py_ssize_t k, long long d) noexcept
    @cython.locals(was="long long", n=Py_ssize_t, i=Py_ssize_t, x=Py_ssize_t)
    cdef void _load_add(self, Py_ssize_t c, long long d) noexcept
    @cython.locals(task=_Part, now=cython.double, cs=cython.double, x=cython.double, nbytes=cython.double,
                   cap=cython.double, blk=Py_ssize_t, end=Py_ssize_t, tau=Py_ssize_t, r3=Py_ssize_t,
                   prev=Py_ssize_t, seq="long long", f=Flow, flows=EqualShareFlows, nb=Py_ssize_t, oc=Py_ssize_t,
                   osr=Py_ssize_t, oe=Py_ssize_t, om=Py_ssize_t, b=Py_ssize_t, y=cython.double,
                   fid="long long", queued=bint)
    cpdef _start_next(self, Py_ssize_t c)
    @cython.locals(c=Py_ssize_t, blk=Py_ssize_t)
    cpdef _finish(self, _Part part)
    @cython.locals(b=_Batch, now=cython.double, emitted="long long", gen=list, out=list, epoch=list, stage=list,
                   prefill=bint, rids=list, epochs=list, k=Py_ssize_t, r=Py_ssize_t, ft=cython.double)
    cpdef _end_part(self, _Part part)
    @cython.locals(now=cython.double, dt=cython.double, mi=list, h=Py_ssize_t)
    cpdef _sample_mem(self)
    @cython.locals(b=_Batch)
    cpdef _try_form(self)
    @cython.locals(rids=list)
    cpdef _start_decode(self, _Batch b)
    @cython.locals(prompt=list, gen=list, tot="long long", c="long long", cap="long long", r=Py_ssize_t,
                   sc=cython.double, n=cython.double, part=_Part)
    cpdef _decode_part(self, _Batch b, list rids)
    cpdef _complete(self, Py_ssize_t r, _Batch b)
    cpdef _admit(self, Py_ssize_t r, _Batch b)
    @cython.locals(stage=list, prompt=list, gen=list, members=list, k=Py_ssize_t, r=Py_ssize_t, pending="long long")
    cpdef _start_prefill(self, _Batch b)
    @cython.locals(stage=list, prompt=list, gen=list, pdone=list, members=list, k=Py_ssize_t, r=Py_ssize_t,
                   pend="long long")
    cpdef _start_pass(self, _Batch b)
    @cython.locals(stage=list, out=list, k=Py_ssize_t, r=Py_ssize_t, s="long long")
    cdef list _at_stage(self, list members, long long st)
    @cython.locals(stage=list, prompt=list, gen=list, members=list, k=Py_ssize_t, r=Py_ssize_t, need="long long")
    cdef _grow_decoding(self, _Batch b)
    @cython.locals(epoch=list, out=list, k=Py_ssize_t, r=Py_ssize_t)
    cdef list _epochs(self, list rids)
    @cython.locals(queue=object, prompt=list, gen=list, chunked=bint, budget=cython.double, rid=Py_ssize_t,
                   new="long long")
    cdef _refill(self, list members, long long tokens)
    @cython.locals(want="long long")
    cdef bint _alloc(self, Py_ssize_t r, long long tokens) except -1
    @cython.locals(i=Py_ssize_t, h=Py_ssize_t, u=cython.double)
    cdef bint _charge(self, const long long[::1] idx, const double[::1] st, const double[::1] pb,
                      const double[::1] cap, Py_ssize_t n, long long k) noexcept
    @cython.locals(need="long long")
    cpdef bint _ensure(self, Py_ssize_t r)
    @cython.locals(want="long long")
    cdef bint _grow(self, Py_ssize_t r, long long need) except -1
