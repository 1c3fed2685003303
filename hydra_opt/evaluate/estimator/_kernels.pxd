# Cython declarations for _kernels.py (docs/estimator.md "Speed"); ignored by pure Python.
# C doubles hold exactly the Python floats of the pure module and C integers its small counters and indices, so
# the compiled kernels do the same IEEE-754 operations in the same order: results are bit-identical.
import cython

cdef double _INF

@cython.locals(i=Py_ssize_t, p=Py_ssize_t, stop=Py_ssize_t, n2=Py_ssize_t, res=cython.double,
               r0=cython.double, r1=cython.double, r2=cython.double, r3=cython.double, r4=cython.double,
               r5=cython.double, r6=cython.double, r7=cython.double)
cdef double _pw_range(const double[::1] xs, Py_ssize_t lo, Py_ssize_t n)

@cython.locals(n=Py_ssize_t, lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t, j=Py_ssize_t)
cpdef double interp_scalar(double x, xp, fp)

@cython.locals(r=cython.double)
cdef double _lin(double x, double x0, double x1, double f0, double f1, double slope)

@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t)
cdef Py_ssize_t _bracket(double x, const double[::1] xp, Py_ssize_t n, Py_ssize_t j)

cdef double _interp_at(double x, const double[::1] xp, const double[::1] fp, Py_ssize_t n, Py_ssize_t j)

cdef inline double _outside(double x, const double[::1] xp, const double[::1] fp, Py_ssize_t n)

cdef double _interp(double x, const double[::1] xp, const double[::1] fp, Py_ssize_t n)

cdef double _mn(double a, double b)
cdef double _mx(double a, double b)
cdef double _pymax(double a, double b)

@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t)
cdef Py_ssize_t _bisect_left(const double[::1] xs, Py_ssize_t n, double x)

@cython.locals(loads="double[::1]", blk=Py_ssize_t, g=Py_ssize_t, ng=Py_ssize_t, s0=Py_ssize_t, s1=Py_ssize_t,
               s=Py_ssize_t, s2=Py_ssize_t, i=Py_ssize_t, best=Py_ssize_t, r=cython.double, v=cython.double,
               lmin=cython.double, tol=cython.double, bv=cython.double, br=cython.double, gcol=list, owner=list)
cpdef list lpt(list ref, list ranges, Py_ssize_t nb, Py_ssize_t ns, list order=*)

@cython.locals(blk=Py_ssize_t, s=Py_ssize_t, v=cython.double, qa=Py_ssize_t, qb=Py_ssize_t, qc=Py_ssize_t,
               a="double[::1]", b="double[::1]", c="double[::1]", col=tuple)
cpdef tuple station_loads(list owner, list cols, tuple qs, list st_type, Py_ssize_t ns)

@cython.locals(ns=Py_ssize_t, nu=Py_ssize_t, c=Py_ssize_t, k=Py_ssize_t, s=Py_ssize_t, n=Py_ssize_t,
               smap="long long[::1]", d="double[::1]", q="double[::1]", r="double[::1]", full="double[::1]",
               tot=cython.double, x=cython.double, xs=list, r0=Py_ssize_t, r1=Py_ssize_t, u0="double[::1]",
               u1="double[::1]", u2="double[::1]", src="double[::1]", a0=cython.double, a1=cython.double,
               a2=cython.double, dl0=list, dl1=list, dl2=list)
cpdef tuple mva(list demands, Py_ssize_t m_max, tuple rows_needed)


cdef class StaticSeq:
    cdef public double[::1] form, first, tg, g, w_of_k
    cdef public double g_rate_end, lam
    cdef public Py_ssize_t k_used, n_t


@cython.locals(j=Py_ssize_t, dx=cython.double)
cdef void _slopes(const double[::1] xp, const double[::1] fp, Py_ssize_t n, double[::1] out)

cdef double _interp_sl(double x, const double[::1] xp, const double[::1] fp, const double[::1] sl, Py_ssize_t j)

cdef inline Py_ssize_t _near(double x, const double[::1] xp, Py_ssize_t n, Py_ssize_t j)

cdef inline double _tail_interp(double x, const double[::1] xp, const double[::1] fp, const double[::1] sl,
                                Py_ssize_t n, Py_ssize_t j)

@cython.locals(j=Py_ssize_t, j1=Py_ssize_t, j2=Py_ssize_t, x=cython.double, k=cython.double, a=cython.double)
cdef void _batch_curve(double[::1] acc, double[::1] acc2, const double[::1] g_t, double gc, Py_ssize_t ic,
                       Py_ssize_t n_t, const double[::1] w_of_k, const double[::1] gk, const double[::1] surv,
                       const double[::1] sl1, const double[::1] sl2, Py_ssize_t ng)

@cython.locals(need=cython.double)
cpdef Py_ssize_t batches_followed(double lam, double t_end, double a0, double b, Py_ssize_t k_cap)

@cython.locals(n_t=Py_ssize_t, ng=Py_ssize_t, m=cython.double, k_need=Py_ssize_t,
               k_max=Py_ssize_t, full=cython.double, tb=cython.double, i=Py_ssize_t, j=Py_ssize_t, jj=Py_ssize_t,
               q=Py_ssize_t, dt=cython.double, m_max=Py_ssize_t, curve="double[::1]", tau_m=cython.double,
               g_rate=cython.double, g_t="double[::1]", w_of_k="double[::1]", t_last=cython.double,
               lim=cython.double, form="double[::1]", first="double[::1]", alive="double[::1]",
               dec="double[::1]", jfs="long long[::1]", c_prev=cython.double, p=Py_ssize_t, g=cython.double,
               j0=Py_ssize_t, f=cython.double, cnt=Py_ssize_t, c=cython.double, g_c=cython.double, ic=Py_ssize_t,
               jf=Py_ssize_t, acc=cython.double, dd=cython.double, lo=Py_ssize_t, hi=Py_ssize_t,
               wgt=cython.double, tau_t=cython.double, buf="double[::1]", sl1="double[::1]", sl2="double[::1]",
               seq=StaticSeq)
cpdef StaticSeq batch_sequence(const double[::1] gk, const double[::1] ge, const double[::1] surv,
                               double[::1] tg, double m_fl, double b, double a0, double lam, double pre_sum,
                               double pre_max, double tau0, double tau1, list tau_b, double t_end,
                               Py_ssize_t k_cap=*, Py_ssize_t n_iter=*)

@cython.locals(n_t=Py_ssize_t, ng=Py_ssize_t, ku=Py_ssize_t, t_last=cython.double, x=Py_ssize_t, tt=cython.double,
               g_tt=cython.double, acc=cython.double, i=Py_ssize_t, fi=cython.double, g_c=cython.double,
               kk=cython.double, v=cython.double, rate=cython.double, tg="double[::1]", g="double[::1]",
               first="double[::1]", w_of_k="double[::1]", o0=cython.double)
cpdef tuple static_curves(StaticSeq seq, const double[::1] gk, const double[::1] ge, double b, double r_tok,
                          bint feasible, double w0, double w1)

@cython.locals(lam=cython.double, k=Py_ssize_t, b=Py_ssize_t, n_last=Py_ssize_t, n_hi=Py_ssize_t, extra=bint,
               vals="double[::1]", nv=Py_ssize_t, n=Py_ssize_t, arr=cython.double, bi=Py_ssize_t,
               tf=cython.double, f_last=cython.double, first="double[::1]", form="double[::1]")
cpdef double static_ttft(StaticSeq seq, double b_f, double a0, double r_adm, double pre_sum, bint feasible,
                         double t0, double t1, double horizon, bint from_arrival)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, acc=cython.double, top=cython.double, tot=cython.double)
cpdef void birth_death_product(const double[::1] b, const double[::1] d, double[::1] out)
