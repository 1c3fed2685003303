# Cython declarations for flows.py (docs/simulator.md "Compiled hot loop"); ignored by pure Python.
# C doubles hold exactly the Python floats of the pure module, so the compiled flow model computes the same rates.
import cython


cdef class EqualShareFlows:
    cdef public bint waterfill
    cdef public list cap, on, share, bytes_done, capsum, uncapped
    cdef public Py_ssize_t n_links
    cdef public dict flows

    @cython.locals(f=list, rate=cython.double, rem=cython.double)
    cpdef _retime(self, set fids, double now, list out)

    @cython.locals(s=set, touched=set, finite=bint, new=cython.double, out=list)
    cpdef list add(self, fid, tuple resources, double nbytes, double now, double cap_bps=*, double latency_s=*)

    cpdef double _share(self, Py_ssize_t r)

    @cython.locals(c=cython.double, left=cython.double, n=Py_ssize_t, caps=list, f=list)
    cpdef double _level(self, Py_ssize_t r)

    @cython.locals(f=list, s=set, touched=set, finite=bint, new=cython.double, out=list)
    cpdef list drain(self, fid, double now)
