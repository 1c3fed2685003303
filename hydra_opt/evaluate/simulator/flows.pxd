# Cython declarations for flows.py (docs/simulator.md "Compiled hot loop"); ignored by pure Python.
# C doubles hold exactly the Python floats of the pure module, so the compiled flow model computes the same rates.
# Flow records are C structs with typed fields; per-resource numbers are typed memoryviews of array.array buffers.
import cython

cdef double _INF, _SLACK
cdef bint _COMPILED


# final: no Python subclass can override a method, so every cpdef call is a direct C call (no dispatch check);
# freelist: a finished flow's memory is reused by the next one (a flow per task).
@cython.final
@cython.freelist(64)
cdef class Flow:
    cdef public object fid, task
    cdef public tuple res
    cdef public double rem, rate, t_last, cap, lat, due
    cdef public long long ver, stamp
    cdef public Py_ssize_t hpos, roff, nres


@cython.locals(f=Flow)
cdef Flow _new_flow(fid, tuple res, double rem, double now, double cap, double lat, task)


@cython.final
cdef class EqualShareFlows:
    cdef public bint waterfill
    cdef public list on, fl, bytes_done
    cdef public Py_ssize_t n_links
    cdef public dict flows
    cdef public double[::1] cap, share, capsum, scratch
    cdef public long long[::1] uncapped, changed
    cdef public long long stamp
    cdef public long long[::1] rpool, fslot
    cdef public Py_ssize_t stride, nfree

    @cython.locals(changed="long long[::1]", fl=list, st="long long", i=Py_ssize_t, j=Py_ssize_t, n=Py_ssize_t,
                   g=Flow, f=Flow, tie=bint, touched=set, timed=dict)
    cdef void _retime_changed(self, Py_ssize_t nch, fid, double now, list out)

    @cython.locals(rate=cython.double, rem=cython.double, x=Py_ssize_t, share="double[::1]", rp="long long[::1]",
                   i=Py_ssize_t)
    cdef void _time(self, Flow f, double now, list out)

    cpdef list start(self, fid, tuple resources, double nbytes, double now, double cap_bps, double latency_s, task)

    @cython.locals(s=set, nch=Py_ssize_t, finite=bint, new=cython.double, out=list, r=Py_ssize_t, on=list, fl=list,
                   share="double[::1]", capsum="double[::1]", uncapped="long long[::1]", changed="long long[::1]",
                   waterfill=bint, rp="long long[::1]", off=Py_ssize_t, cap_bps=cython.double, resources=tuple)
    cdef list _open(self, Flow f, double now)

    # C-only (not callable from Python): the water-filling levels are half of a flow start's cost.
    cdef double _share(self, Py_ssize_t r)

    @cython.locals(c=cython.double, left=cython.double, n=Py_ssize_t, caps="double[::1]", on_r=list, g=Flow,
                   lo=cython.double, hi=cython.double, first=bint, m=Py_ssize_t, k=Py_ssize_t, j=Py_ssize_t)
    cdef double _level(self, Py_ssize_t r)

    @cython.locals(c=cython.double, x=Py_ssize_t, share="double[::1]", rp="long long[::1]", i=Py_ssize_t)
    cdef double _avail(self, Flow f, Py_ssize_t r)

    @cython.locals(s=set, nch=Py_ssize_t, finite=bint, new=cython.double, out=list, r=Py_ssize_t, on=list, fl=list,
                   share="double[::1]", cap="double[::1]", capsum="double[::1]", uncapped="long long[::1]",
                   changed="long long[::1]", waterfill=bint, lst=list, i=Py_ssize_t, n=Py_ssize_t)
    cpdef list finish(self, Flow f, double now)
