# Cython declarations for flows.py (docs/simulator.md "Compiled hot loop"); ignored by pure Python.
# C doubles hold exactly the Python floats of the pure module, so the compiled flow model computes the same rates.
# Flow records are C structs with typed fields; per-resource numbers are typed memoryviews of array.array buffers.
import cython

cdef double _INF, _SLACK
cdef long long _HASH_MOD


# final: no Python subclass can override a method, so every cpdef call is a direct C call (no dispatch check);
# freelist: a finished flow's memory is reused by the next one (a flow per task); no_gc: a record is in no
# reference cycle (it refers to its task, tuple and payload only), so the cyclic GC need not track it.
# (freelist and no_gc act only through the decorators on the class in flows.py, marked @cython.cclass there;
# here Cython ignores them.)
@cython.final
@cython.freelist(64)
@cython.no_gc
cdef class Flow:
    cdef public object task
    cdef public tuple res
    cdef public double rem, rate, t_last, cap, lat, due
    cdef public long long fid, ver
    cdef public Py_ssize_t hpos, slot


@cython.locals(f=Flow)
cdef Flow _new_flow(long long fid, tuple res, double rem, double now, double cap, double lat, task)


@cython.final
cdef class EqualShareFlows:
    cdef public bint waterfill
    cdef public list on, bytes_done, byslot
    cdef public Py_ssize_t n_links
    cdef public dict flows
    cdef public double[::1] cap, share, capsum, scratch, oldsh
    cdef public long long[::1] uncapped, changed, rcnt
    cdef public long long stamp
    cdef public long long[::1] rpool, fslot, rfl, rt, fstamp, fnres
    cdef public double[::1] fcap, frate, fm1, fm2, rtdue
    cdef public long long[::1] fa1, fok
    cdef public Py_ssize_t stride, nfree, nslots, nrt

    # (The typed arrays are read as self.x[i], not through local copies: a local memoryview costs an atomic
    # acquire and release per call, as much as a short loop.)
    @cython.locals(m=Py_ssize_t, st="long long", i=Py_ssize_t, r=Py_ssize_t, k=Py_ssize_t, j=Py_ssize_t,
                   n=Py_ssize_t, thr=cython.double)
    cdef void _retime_changed(self, Py_ssize_t nch, Flow new, double now)

    @cython.locals(i=Py_ssize_t, k=Py_ssize_t, t=cython.double)
    cdef bint _tie(self, Py_ssize_t n) noexcept

    @cython.locals(touched=set, i=Py_ssize_t, n=Py_ssize_t, f=Flow, st="long long")
    cdef void _order(self, Py_ssize_t nch, Flow new)

    # Re-times a slot's flow: C arrays only, unless its rate changed.
    @cython.locals(rate=cython.double, rem=cython.double, f=Flow)
    # noexcept (as _load_add, _hmove, _hpop in the engine): nothing in it can raise (its list read and record type
    # hold by construction), so its callers need no PyErr_Occurred check per call.
    cdef inline void _time(self, Py_ssize_t j, double now) noexcept

    @cython.locals(m1=cython.double, m2=cython.double, s=cython.double, a1=Py_ssize_t, x=Py_ssize_t, i=Py_ssize_t,
                   off=Py_ssize_t)
    cdef void _mins(self, Py_ssize_t j) noexcept

    @cython.locals(base=Py_ssize_t, k=Py_ssize_t, j=Py_ssize_t, old=cython.double)
    cdef void _set_share(self, Py_ssize_t r, double new, Py_ssize_t nch) noexcept

    cpdef Py_ssize_t start(self, long long fid, tuple resources, double nbytes, double now, double cap_bps, double latency_s,
                           task) except -1

    @cython.locals(nch=Py_ssize_t, finite=bint, new=cython.double, r=Py_ssize_t, on=list, s=set, m=Py_ssize_t,
                   waterfill=bint, off=Py_ssize_t, cap_bps=cython.double, resources=tuple, j=Py_ssize_t)
    cdef Py_ssize_t _open(self, Flow f, double now) except -1

    # C-only (not callable from Python): the water-filling levels are half of a flow start's cost.
    # except? -1: a level is never negative, so a call checks for an error only on -1 (not PyErr_Occurred every time).
    cdef double _share(self, Py_ssize_t r) except? -1

    @cython.locals(c=cython.double, left=cython.double, n=Py_ssize_t, lo=cython.double,
                   hi=cython.double, m=Py_ssize_t, k=Py_ssize_t, i=Py_ssize_t, base=Py_ssize_t, tot=cython.double)
    cdef double _level(self, Py_ssize_t r) except? -1

    @cython.locals(c=cython.double, m=cython.double)
    cdef double _avail(self, Py_ssize_t j, Py_ssize_t r) noexcept

    @cython.locals(nch=Py_ssize_t, finite=bint, new=cython.double, r=Py_ssize_t, on=list, s=set, m=Py_ssize_t,
                   waterfill=bint, j=Py_ssize_t, base=Py_ssize_t, n=Py_ssize_t, k=Py_ssize_t)
    cpdef Py_ssize_t finish(self, Flow f, double now) except -1
