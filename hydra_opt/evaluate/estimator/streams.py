"""Continuous and chunked batching as two pass streams per batch (docs/estimator.md "Continuous batching").

The simulator runs, for every batch in flight, a *prefill stream* (passes over the members that still need their
prompt computed) and a *decode stream* (one pass over the decoding members, one token each); the two walk the
blocks on their own chiplets concurrently, so a decode pass does not wait for a prefill (HYDRA §IV-B; with chunked
prefill the batch's next pass starts when both parts of its pass are done). A request's TPOT is therefore the
decode pass time of its batch at the occupancy the load sustains, and its TTFT the prefill pass plus the wait for
a slot — not one summed cycle at a full pipeline.

Everything here is per design, in floats:

* ``pass_s(n)``: the decode pass time with ``n`` requests running: ``d = ⌈n/B⌉`` batches (refills fill the
  oldest batch first) of ``a = n/d`` members share the decode stations; the time of a ``B``-member pass with ``d``
  batches decoding comes from the MVA of the decode demands (HBM-capped), scaled to ``a`` members (linear in
  the members, ``τ0 + τ1·a``). With chunked prefill a pass also carries the new prompts' chunks: it lasts the
  longer of its decode part and its prefill part.
* ``running(λ)``: Little's law ``n = λ·(prefill latency + S̄·pass_s(n))`` solved for the running requests by
  bisection (``n / life(n)`` rises with ``n``); ``n_max`` (every slot full) when even a full system admits
  slower than λ — overload, a queue builds.
* ``capacity``: requests/s a full system completes, the smaller of the decode stations' rate
  (``n_max / life(n_max)``) and the prefill stations' (prefill-only MVA at the batches in flight, prompts per
  pass capped by ``max_batch`` and the token budget).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hydra_opt.evaluate.estimator.sharing import shared_delays_s

__all__ = ["QUANTILE_PROBS", "StreamInputs", "StreamModel", "WindowRun", "latency_quantiles", "window_run"]


def _interp(x: float, curve) -> float:
    """``curve`` (values at 1..len) at ``x``, linear inside, clamped outside."""
    n = len(curve)
    if x <= 1.0:
        return curve[0]
    if x >= n:
        return curve[-1]
    lo = int(math.floor(x))
    w = x - lo
    return curve[lo - 1] + w * (curve[lo] - curve[lo - 1])


def _erlang_c(c: float, a: float) -> float:
    """Erlang C: the probability that an arrival waits in M/M/c at offered load ``a`` (``a`` for one server; 1
    at or over ``c``; ``c`` rounded down, at least 1)."""
    n = max(int(c), 1)
    if a >= n:
        return 1.0
    if a <= 0.0:
        return 0.0
    if n == 1:
        return a
    term, head = 1.0, 1.0  # a^k/k! and its running sum over k < n
    for k in range(1, n):
        term *= a / k
        head += term
    tail = term * a / (n - a)  # a^n/n! · n/(n − a)
    return tail / (head + tail)


@dataclass(frozen=True, kw_only=True)
class StreamInputs:
    """Per-design inputs of the two-stream model (times in s, rates per s).

    Attributes:
        m: Batches in flight (memory-limited, may be fractional).
        b: ``max_batch``.
        steps_mean: E[S], decode passes per request.
        tau_b_s: Pass time of a ``B``-member decode pass with ``d`` batches decoding, d = 1..⌈m⌉ (HBM-capped).
        tau0_s, tau1_s: Pass time = ``τ0 + τ1·a`` at ``a`` members, relative to the full pass (``τ0 + τ1·B``)
            — the split at ``m`` batches, used for every ``d`` when ``tau_1_s`` is empty.
        tau_1_s: Pass time of a one-member decode pass with ``d`` batches decoding, d = 1..⌈m⌉ (HBM-capped): the
            pass at ``a`` members is then linear between it and ``tau_b_s`` at the same ``d``.
        pre1_s: One prompt's prefill pass alone, per station it visits.
        pre_rate_req_s: Prompts/s the prefill stations complete with every batch prefilling (prefill-only MVA at
            ``min(max_batch, token_budget / E[P])`` prompts per pass).
        chunked: Chunked prefill (one pass carries decodes and prefill chunks).
        chunks_mean: n̄, mean passes a prompt's chunks take (chunked; 1 otherwise).
        arrivals_s: The measured arrivals' span after the run's start, ``(t0, t1)`` s (the prefill stations start
            empty: their queue is the finite run's, not the stationary one; ``(0, inf)``: stationary).
        prompt_scv: Squared coefficient of variation of the prompt length (a prefill pass's work).
        prompts_per_pass: ``k``, prompts one prefill pass admits (``min(max_batch, token_budget / E[P])``).
        handoff_s: A mean prompt's activation hand-offs between chiplets along its prefill pass, s (a latency in its
            prefill, not station work; ``single._handoff_s``).
        pools: ``((c, S), …)``: how the prefill stations queue prompts — per pool, ``c`` prompts served at once,
            each for ``S`` s. A tandem (static scheduling: every block on its Ω chiplet) is one pool ``(1, max
            pre1_s)``, the default (empty): a prompt waits for the one ahead to leave the slowest station. Elastic
            scheduling moves a block's task to another chiplet of its type when its Ω chiplet is busy, so a type's
            ``c`` chiplets serve ``c`` prompts side by side, each for the type's whole share ``S`` of the pass
            (M/G/c); one pool per chiplet type that prefills, the longest wait counts.
    """

    m: float
    b: float
    steps_mean: float
    chunked: bool = False
    tau_b_s: tuple[float, ...]
    tau0_s: float
    tau1_s: float
    tau_1_s: tuple[float, ...] = ()
    chunks_mean: float = 1.0
    pre1_s: tuple[float, ...]
    pre_rate_req_s: float
    arrivals_s: tuple[float, float] = (0.0, math.inf)
    prompt_scv: float = 1.0
    prompts_per_pass: float = 1.0
    handoff_s: float = 0.0
    pools: tuple[tuple[float, float], ...] = ()


class StreamModel:
    """The two-stream model of one design (see the module docstring)."""

    def __init__(self, si: StreamInputs) -> None:
        self.si = si
        self._running: dict[float, float] = {}  # running(λ), solved once per rate (a bisection)
        self._cap: float | None = None  # capacity_req_s(), for the admitted prompt rate of chunked passes
        self._open_pre: dict[float, float] = {}  # open_prefill_s(λ), per rate (its window wait is the costly part)
        self.n_max = max(si.m * si.b, 1.0)
        self._t0_d, self._t1_d = _member_split(si)
        # One mean prompt through the prefill stations and its activation's hand-offs between chiplets, no queue.
        self.service_s = sum(si.pre1_s) + si.handoff_s

    def batches(self, n: float, lam: float = 0.0) -> float:
        """Batches decoding with ``n`` requests running.

        The simulator forms a new batch for a waiting request when no running batch can take it now (and fewer
        than ``m`` run), and a batch lives while it has members. Continuous batching admits into a batch whose
        prefill stream is idle, so requests fill the batches, beside which run the batches prefilling and those
        formed while another prefilled (a batch lives until its last member leaves): ``n/B + max(1, λ·prefill)``
        at arrival rate ``λ`` (``n > 1``; :meth:`_forming`). ``⌈n/B⌉`` measured worse: on a Nemotron-H design with
        one Mamba decode chiplet two batches alternate on it, TPOT 16 ms simulated, 8 ms estimated with one
        (dynamic benchmark mean Spearman 0.737 → 0.753 with ``+1``); long prompts keep several batches prefilling
        (Llama-3-8B arXiv at 3 req/s: ~7), and counting them took the dynamic benchmark to 0.763, capacity
        0.73 → 0.76, and the stream-model check's Llama-3 arXiv TPOT at 120 % load from 0.75 (est/sim 0.68) to
        0.89 (1.05). Chunked prefill admits only at a batch's pass boundary and a running batch always has a pass
        in flight, so every arrival starts a batch of its own until ``m`` exist (``min(m, n)``).
        """
        si = self.si
        n = max(n, 1.0)
        d = n if si.chunked else (n / si.b + self._forming(lam) if n > 1.0 else 1.0)
        return min(max(d, 1.0), max(si.m, 1.0))

    def _forming(self, lam: float) -> float:
        """Batches beside the full ones (continuous batching): one per prefill in flight — an arrival joins a batch
        whose prefill stream is idle, so each prompt being prefilled holds a batch of its own, ``λ·prefill``
        of them by Little's law — and at least one (a batch formed while another prefilled lives on)."""
        if lam <= 0.0:
            return 1.0
        lam = self._admitted(lam)
        return max(1.0, lam * self.open_prefill_s(lam))

    def batch_curve(self, n, lam: float, d_min=None):
        """:meth:`batches` over an array of running counts, at least ``d_min`` (numpy)."""
        import numpy as np

        si = self.si
        n = np.clip(np.asarray(n, dtype=np.float64), 1.0, self.n_max)
        d = n if si.chunked else np.where(n > 1.0, n / si.b + self._forming(lam), 1.0)
        if d_min is not None:
            d = np.maximum(d, d_min)
        return np.clip(d, 1.0, max(si.m, 1.0))

    def prefills_in_flight(self, lam: float) -> float:
        """Prompts prefilling at arrival rate ``lam`` (Little's law on the admitted prompts)."""
        if lam <= 0.0:
            return 0.0
        lam = self._admitted(lam)
        return lam * self.open_prefill_s(lam)

    def decode_pass_s(self, n: float, lam: float = 0.0) -> float:
        """Decode part of one pass with ``n`` requests running, s."""
        si = self.si
        n = min(max(n, 1.0), self.n_max)
        d = self.batches(n, lam)
        return self._dec_at(d, min(n / d, si.b))

    def _dec_at(self, d: float, a: float) -> float:
        """Decode part of a pass with ``d`` batches of ``a`` members each, s (the MVA curve scaled linearly)."""
        return _interp(d, self._t0_d) + _interp(d, self._t1_d) * a

    def pass_curve_s(self, n, lam: float, d_min=None):
        """:meth:`pass_s` over an array of running counts (the same arithmetic in numpy); ``d_min``: at least
        that many batches (the run fluid's batches formed during prefills, :func:`_formed_batches`)."""
        return self._pass_terms(n, lam, d_min)[2]

    def _dec_curve(self, d, a):
        """:meth:`_dec_at` over arrays (numpy, the same arithmetic)."""
        import numpy as np

        xp = np.arange(1, len(self._t0_d) + 1, dtype=np.float64)
        return np.interp(d, xp, self._t0_d) + np.interp(d, xp, self._t1_d) * a

    def _pass_terms(self, n, lam: float, d_min=None):
        """Over an array of running counts: batches ``d``, the decode part at ``d`` and the pass ``τ`` (numpy)."""
        import numpy as np

        si = self.si
        n = np.clip(np.asarray(n, dtype=np.float64), 1.0, self.n_max)
        d = self.batch_curve(n, lam, d_min)
        a = np.minimum(n / d, si.b)
        dec = self._dec_curve(d, a)
        if not si.chunked:
            return d, dec, dec
        lam = self._admitted(lam)
        pre = self.open_prefill_s(lam) / max(si.chunks_mean, 1.0)
        full = d >= max(si.m, 1.0)
        g = np.where(full, np.minimum(lam * np.maximum(pre - dec, 0.0) / d, 0.95), 0.0)
        # A stalled batch leaves the decode stations to the others: they see d·(1 − g) batches (see pass_s); with
        # fewer than m, the batches decoding (_unfull_dec_s).
        stalled = self._dec_curve(np.maximum(d * (1.0 - g), 1.0), a) / (1.0 - g)
        return d, dec, np.where(full, stalled, self._unfull_dec_s(n, lam))

    def _unfull_dec_s(self, n, lam: float):
        """Chunked batching with fewer than ``m`` batches (``n`` running, float or numpy): the decode part of a
        pass. Every arrival has a batch of its own, and one prefilling its member runs on the prefill stations, so
        the decode stations see the ``n − λ·prefill`` decoding ones (Little's law on the prompts in prefill), one
        member each. Counting all ``n`` put six 3,000-token Llama-3-8B requests 1 s apart on six decode chiplets
        at TPOT 30.2 ms (simulated 15.8 ms; now 19.0 ms) and the dynamic benchmark's Llama-3-8B arXiv chunked
        capacities at est/sim 0.86 (now 0.96)."""
        import numpy as np

        d = np.clip(np.asarray(n, dtype=np.float64) - self.prefills_in_flight(lam), 1.0, max(self.si.m, 1.0))
        return self._dec_curve(d, 1.0) if d.ndim else self._dec_at(float(d), 1.0)

    def _admitted(self, lam: float) -> float:
        """Prompts/s that start prefilling: the arrivals, at most the capacity (beyond it they wait for a slot and
        ride no pass). While the capacity's own bisection runs, the raw rate."""
        if self._cap is None:
            self._cap = math.inf
            self._cap = self.capacity_req_s()
        return min(lam, self._cap)

    def pass_s(self, n: float, lam: float) -> float:
        """Time per output token of a running request (one pass of its batch) with ``n`` running, s."""
        si = self.si
        if not si.chunked:
            return self.decode_pass_s(n, lam)
        # Chunked: a pass ends with the later of its decode part and its prefill part (they run side by side on
        # their own stations). A batch's pass carries a prompt's chunk with probability p = λτ/d (arrivals spread
        # over the d batches), and then lasts max(decode, prefill): τ = dec + p·max(0, pre − dec), solved for τ;
        # near p = 1 every pass prefills and the prefill stations set the pace. Only once all m batches run: before,
        # an arrival starts a batch of its own whose first pass is its prefill, and the others' passes go on.
        d = self.batches(n)
        if d < max(si.m, 1.0):
            return self._unfull_dec_s(min(max(n, 1.0), self.n_max), lam)
        dec = self.decode_pass_s(n, lam)
        lam = self._admitted(lam)
        extra = max(self.open_prefill_s(lam) / max(si.chunks_mean, 1.0) - dec, 0.0)
        g = min(lam * extra / d, 0.95)
        # A batch stalled on its chunk (a fraction g of the time) holds no decode station: the others cycle
        # through them as d·(1 − g) batches. Pricing the decode part at all d batches doubled the chunked TPOT of
        # many-prefill-chiplet Mamba-2 arXiv designs (51 ms estimated, 35 ms simulated at half capacity).
        a = min(min(max(n, 1.0), self.n_max) / d, si.b)
        return self._dec_at(max(d * (1.0 - g), 1.0), a) / (1.0 - g)

    def open_prefill_s(self, lam: float) -> float:
        """One prompt's prefill through the prefill stations at arrival rate ``lam``, s.

        Stationary (``arrivals_s`` unbounded): the open-network response ``Σ D_s/(1 − U_s)``, ``U_s = λ·D_s``
        (product form, M/M/1 per station), the utilisation capped where batching prompts takes over. A finite run
        (the estimator's case): the stations' demands plus the queue of the bottleneck station — in a tandem the
        slowest station queues and smooths the arrivals the others see — at its wait in the run
        (:meth:`_station_wait_s`). Summing every station's wait, or the stationary capped formula, put Llama-3-8B
        arXiv's 9-station prefill at 5.0 and 7.0 s at 2.7 req/s against a simulated p90 TTFT of 3.3 s; with the
        bottleneck alone the dynamic benchmark's 120 cells went from mean Spearman 0.678 to 0.737 (throughput at
        120 % load 0.67 → 0.81, capacity 0.72 → 0.74, the smallest capacity ρ 0.04 → 0.37)."""
        hit = self._open_pre.get(lam)
        if hit is None:
            pre = self.si.pre1_s
            t0, t1 = self.si.arrivals_s
            if not math.isfinite(t1):
                hit = sum(d / (1.0 - min(lam * d, 0.9)) for d in pre) + self.si.handoff_s
            else:
                hit = self.service_s + self._station_wait_s(lam)
            self._open_pre[lam] = hit
        return hit

    def _pools(self) -> tuple[tuple[float, float], ...]:
        """:attr:`StreamInputs.pools` (the tandem's ``((1, max D),)`` by default)."""
        return self.si.pools or ((1.0, max(self.si.pre1_s, default=0.0)),)

    def station_wait_prob(self, lam: float) -> float:
        """Probability that a prompt waits at the prefill pool of the longest wait (:meth:`_station_wait_s`): its
        utilisation for one server (M/G/1), Erlang C for ``c`` (M/G/c), 1 when saturated."""
        c, d, _ = self._bottleneck(lam)
        return _erlang_c(c, lam * d)

    def _bottleneck(self, lam: float) -> tuple[float, float, float]:
        """``(c, S, wait)`` of the pool with the longest wait at ``lam`` (:meth:`_pool_wait_s`; the first of equal
        ones, as ``max`` picks)."""
        best = None
        for c, d in self._pools():
            w = self._pool_wait_s(lam, c, d)
            if best is None or w > best[2]:
                best = (c, d, w)
        return best

    def _station_wait_s(self, lam: float) -> float:
        """Queueing delay at the prefill stations in the finite run: the longest of the pools' waits
        (:attr:`StreamInputs.pools`, :meth:`_bottleneck`).

        A pool, not a tandem, under elastic scheduling: two 3,000-token prompts 0.1 s apart on three Llama-3-8B
        prefill chiplets both reach their first token at 2.057 s (a lone prompt's time) where static scheduling
        shares the chiplets and gives 3.73 and 3.76 s; on one chiplet both schedulers give 3.99 and 4.01 s."""
        return self._bottleneck(lam)[2]

    def _pool_wait_s(self, lam: float, c: float, d: float) -> float:
        """One pool's wait: the M/G/1 wait ``d·U·(1 + C²)/(2(1 − U))`` (``C²``: the prompt length's) — for ``c``
        servers the M/G/c wait ``C(c, a)·d/(c − a)·(1 + C²)/2`` (Erlang C, ``a = λd``) — where the run reaches it,
        else the wait of a queue started empty (``markov.window_wait_s``: a reflected Brownian motion over the
        measured arrivals' span, service variability from the prompt lengths, at the pool's rate ``c/d``)."""
        from hydra_opt.evaluate.estimator.markov import window_wait_s

        if d <= 0.0:
            return 0.0
        a = lam * d
        # Pollaczek–Khinchine: a station's service follows the prompt, and a long prompt holds up the short ones
        # behind it (Nemotron-H chat, 6 + 1 Mamba and 2 + 3 attention chiplets, 15.7 req/s: mean TTFT 0.150 s
        # simulated, 0.083 with M/M/1's wait, 0.127 with this).
        if a >= c:
            stat = math.inf
        elif c == 1.0:
            stat = d * a * (1.0 + self.si.prompt_scv) / (2.0 * (1.0 - a))
        else:
            stat = _erlang_c(c, a) * d / (c - a) * (1.0 + self.si.prompt_scv) / 2.0
        t0, t1 = self.si.arrivals_s
        return min(stat, window_wait_s(lam, c / d, self.si.prompt_scv, t0, t1))

    def prefill_s(self, lam: float) -> float:
        """Prefill latency of an admitted request (to its first token) at arrival rate ``lam``, s.

        Continuous: each prompt gets its own prefill pass (an arrival joins whichever batch's prefill stream is
        idle) and the passes share the prefill stations. Chunked: while fewer than ``m`` batches run an arrival
        starts a batch of its own, whose first pass is its prefill alone; with every batch running it waits for a
        batch's pass boundary (the first of ``d`` staggered ones: ``τ/(d + 1)``) and its chunks ride that batch's
        passes, one chunk a pass, each further chunk paying the pass's fixed weight-streaming cost again (about a
        one-member decode pass)."""
        return float(self.prefill_at_s(lam, 1.0))

    def chunk_stall(self, n, lam: float):
        """Chunked prefill with ``n`` running (numpy over ``n``): ``(p, extra)``, the probability that a pass carries
        a chunk and how much longer such a pass lasts, s (:meth:`pass_s`; 0 while fewer than ``m`` batches run)."""
        import numpy as np

        si = self.si
        if not si.chunked:
            n = np.asarray(n, dtype=np.float64)
            return np.zeros_like(n), np.zeros_like(n)
        d, dec, tau = self._pass_terms(n, lam)
        adm = self._admitted(lam)
        full = d >= max(si.m, 1.0)
        extra = np.where(full, np.maximum(self.open_prefill_s(adm) / max(si.chunks_mean, 1.0) - dec, 0.0), 0.0)
        p = np.where(full, np.minimum(adm * tau / d, 1.0), 0.0)
        return p, extra

    def first_token_rate_req_s(self) -> float:
        """Prompts/s the prefill stations bring to their first token in overload. Continuous: the prefill-only MVA
        (``pre_rate_req_s``). Chunked: at least the slowest station's rate ``1/max D`` — every batch then holds a
        chunk in the stations and their deterministic tandem runs at its bottleneck, where the MVA's exponential
        service stops short (Mamba-2 arXiv, 7 + 7 chiplets: 5.4 req/s MVA, 7.75 bound, 7.5 simulated at 8.6 req/s)."""
        si = self.si
        if not si.chunked or not si.pre1_s:
            return si.pre_rate_req_s
        return max(si.pre_rate_req_s, 1.0 / max(max(si.pre1_s), 1e-300))

    def stalled_pass_s(self, tau, running, in_prefill):
        """Chunked passes over the run grid (numpy) with ``running`` requests and ``in_prefill`` prompts waiting or
        prefilling. Once ``m`` batches run, a batch admits at each pass boundary while prompts wait, ``k`` a pass
        (``prompts_per_pass``), and stalls until their chunks leave the stations: a fraction ``g = w/(m·k)`` of the
        batches holds one, the others cycle through the decode stations as ``m·(1 − g)`` batches (as in
        :meth:`pass_s`), and a pass lasts at most one trip of ``m·k`` prompts through the stations — a closed
        tandem, ``k·max(Σ D, m·max D)`` — plus the decode part. :meth:`pass_s` prices ``g`` at the admitted rate's
        mean prefill; a backlog that builds through the run stalls more. The simulator's in-window tokens collapse
        there (Mamba-2 arXiv, 7 + 7 chiplets, 14 batches: 1,166 tok/s at 6.5 req/s, 841 at 8.6, 71 at 12).

        Only batches with a free slot admit, so ``g`` is scaled by the share of batches that can have one,
        ``min(1, (n_max − n)/m)``: with every slot taken the prompts wait for a slot and the decodes run unstalled.
        Mamba-2 arXiv chunked with runs of ≥ 50 requests, 120 % load: B = 4 designs were estimated to stall (TPOT
        61 ms, 24 ms simulated; 6 + 10 chiplets): throughput Spearman 0.812 → 0.874, TPOT 0.234 → 0.471; the 15 s
        report's TPOT mean 0.804 → 0.809. Still missing: B = 16 designs collapse in the simulator at 120 % load
        (9 + 9 chiplets: 383 tok/s in the window, 1,318 at 90 %), estimated 1,432."""
        import numpy as np

        si = self.si
        m = max(si.m, 1.0)
        pre = si.pre1_s
        k = max(si.prompts_per_pass, 1.0)
        cycle = k * max(sum(pre), m * max(pre, default=0.0)) + self._dec_at(m, si.b)
        n = np.clip(np.asarray(running, dtype=np.float64), 1.0, self.n_max)
        full = n >= m  # fewer batches: an arrival prefills in a batch of its own and stalls nobody
        # Only a batch with a free slot admits (ChunkedBatcher: fewer than max_batch members): with fewer free slots
        # than batches, only that many can hold a chunk, and a full run stalls nobody (the prompts wait instead).
        room = np.clip((self.n_max - n) / m, 0.0, 1.0)
        g = np.where(full, np.clip(np.asarray(in_prefill, dtype=np.float64) / (m * k), 0.0, 1.0) * room, 0.0)
        free = np.maximum(1.0 - g, 1e-9)
        stalled = self._dec_curve(np.maximum(m * free, 1.0), np.minimum(n / m, si.b)) / free
        return np.where(full, np.maximum(tau, np.minimum(stalled, cycle)), tau)

    def chunk_prefill_s(self, lam: float, others, tau):
        """Chunked prefill of a mean prompt arriving while ``others`` requests run and a pass takes ``tau`` (numpy
        over both; the run fluid's): :meth:`prefill_at_s` at the batches the arrival finds, not at the stationary
        running count. A stationary count past ``m`` made every chat prompt of a Llama-3-8B design with four
        decode chiplets ride a 240 ms pass (TTFT p90 252 ms) where a 15 s run holds two or three requests and
        each arrival prefills in a batch of its own (115 ms simulated)."""
        import numpy as np

        si = self.si
        chunks = max(si.chunks_mean, 1.0)
        work = self.open_prefill_s(lam) + (chunks - 1.0) * self.decode_pass_s(1.0)
        d = np.minimum(np.asarray(others, dtype=np.float64), max(si.m, 1.0))
        tau = np.asarray(tau, dtype=np.float64)
        return np.where(d < max(si.m, 1.0), work, tau / (d + 1.0) + np.maximum(work, chunks * tau))

    def prefill_at_s(self, lam: float, scale, own_batch: bool = False):
        """:meth:`prefill_s` of a prompt ``scale`` × the mean prompt (numpy-broadcasting over ``scale``), s: the
        prefill pass is about linear in the prompt's tokens, and so is its chunk count where prompts exceed the
        token budget (``n̄ > 1``); a chunk that rides a
        batch's pass lasts at least that pass (``max(work, n̄·τ)``), so short prompts' TTFT does not fall below
        it while long ones' grows with their prefill. ``own_batch``: the prompt starts a batch of its own (the run
        fluid's arrivals mostly found fewer than ``m`` batches), whatever the stationary running count."""
        import numpy as np

        si = self.si
        sc = np.asarray(scale, dtype=np.float64)
        # The stations' service grows with the prompt; the queue in front of them does not (FCFS).
        pre = self.service_s * sc + (self.open_prefill_s(lam) - self.service_s)
        if not si.chunked:
            return pre
        # Chunks grow with the prompt only where prompts exceed the token budget (n̄ > 1); else one chunk each.
        chunks = np.maximum(si.chunks_mean * sc, 1.0) if si.chunks_mean > 1.0 + 1e-9 else np.ones_like(sc)
        work = pre + (chunks - 1.0) * self.decode_pass_s(1.0)
        n = self.running(lam)
        d = self.batches(n)
        if own_batch or d < max(si.m, 1.0):
            return work
        tau = self.pass_s(n, lam)
        return tau / (d + 1.0) + np.maximum(work, chunks * tau)

    def life_s(self, n: float, lam: float, pre_s: float) -> float:
        """Time a request holds its slot: prefill plus S̄ passes, s."""
        return pre_s + self.si.steps_mean * self.pass_s(n, lam)

    def running(self, lam: float) -> float:
        """Requests running at arrival rate ``lam`` (Little's law, bisection); ``n_max`` in overload."""
        hit = self._running.get(lam)
        if hit is None:
            hit = self._running[lam] = self._solve_running(lam)
        return hit

    def _solve_running(self, lam: float) -> float:
        pre = self._pre_light(lam)
        top = self.n_max
        if top / self.life_s(top, lam, pre) <= lam:
            return top
        lo, hi = 0.0, top
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            if max(mid, 1e-12) / self.life_s(mid, lam, pre) < lam:
                lo = mid
            else:
                hi = mid
        return hi if lam > 0 else 0.0

    def _pre_light(self, lam: float) -> float:
        si = self.si
        if si.chunked:
            return si.chunks_mean * max(self.open_prefill_s(lam) / max(si.chunks_mean, 1.0), self.decode_pass_s(1.0))
        return self.open_prefill_s(lam)

    def capacity_req_s(self) -> float:
        """Requests/s a full system completes: the rate λ at which ``n_max`` running requests leave as fast as
        they arrive (``n_max / life(n_max, λ) = λ``, by bisection: the life grows with λ through the prefill
        load), at most the prefill stations' rate."""
        si = self.si
        top = self.n_max
        lo, hi = 0.0, max(si.pre_rate_req_s, 1e-12)
        if top / self.life_s(top, hi, self._pre_light(hi)) >= hi:
            return hi
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            if top / self.life_s(top, mid, self._pre_light(mid)) >= mid:
                lo = mid
            else:
                hi = mid
        return lo


def _member_split(si: StreamInputs) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per ``d`` = 1..⌈m⌉, the decode pass ``τ0(d) + τ1(d)·a`` at ``a`` members: the line through the one-member
    and the ``B``-member pass at that ``d`` (``tau_1_s``), its intercept at least 0. The one-member share of a pass
    depends on ``d``: scaling every ``d`` by the split at ``m`` priced a lone Llama-3-8B chat request on 10 + 6
    chiplets (B = 16, 8 memories) at 18.9 ms a token where the simulator takes 15.3 ms (B = 8: 15.0 ms)."""
    tb = si.tau_b_s
    if not si.tau_1_s:
        full = max(si.tau0_s + si.tau1_s * si.b, 1e-300)
        return tuple(t * si.tau0_s / full for t in tb), tuple(t * si.tau1_s / full for t in tb)
    if si.b <= 1.0:
        return tuple(tb), tuple(0.0 for _ in tb)
    k1 = tuple(max(b - o, 0.0) / (si.b - 1.0) for b, o in zip(tb, si.tau_1_s))
    return tuple(max(b - k * si.b, 0.0) for b, k in zip(tb, k1)), k1


@dataclass(frozen=True)
class WindowRun:
    """What the stream fluid gives for the measured requests (those arriving in the window).

    Attributes:
        throughput_tok_s: Tokens emitted in the window over its length.
        ttft_s: Each measured request's fluid TTFT (prefill at the mean prompt plus the wait for a slot), s.
        tpot_s: Each measured request's time per output token (first token to leaving over S̄ passes), s.
        fill_s: When the fluid's running requests first come within one standard deviation (``√n_max``) of the
            slots ``n_max``, s after the first arrival (inf: never in the run): before it no request can queue.
        own_batch: Chunked prefill: the share of measured requests that found fewer than ``m`` batches running and
            prefilled in a batch of their own (1.0 for continuous batching).
        tpot_spread_s: Chunked prefill: the measured requests' TPOT with the spread of their stalls (samples on a
            fixed grid, :func:`_stall_spread`; empty: no spread beyond ``tpot_s``).
        shared_s: Dynamic task scheduling: each measured request's prefill delay from sharing the prefill pools with
            the prompts it overlaps (:func:`sharing.shared_delays_s` over its admission and its own prompt), s, in
            place of the pools' mean wait ``ttft_s`` carries (empty: that mean wait stands).
        prompt_scale: Each measured request's prompt over the mean prompt, beside ``shared_s``.
    """

    throughput_tok_s: float
    ttft_s: tuple[float, ...]
    tpot_s: tuple[float, ...]
    fill_s: float = math.inf
    own_batch: float = 1.0
    tpot_spread_s: tuple[float, ...] = ()
    shared_s: tuple[float, ...] = ()
    prompt_scale: tuple[float, ...] = ()

    def shared_ttft_s(self, q_s: float, prefill_at_s):
        """Each measured request's TTFT with its own prompt and sharing delay (``shared_s`` set), s: the fluid TTFT
        less the pools' mean wait ``q_s`` it carries, plus how much longer its own prompt's prefill is
        (``prefill_at_s(scale) − prefill_at_s(1)``), plus its sharing delay. A long prompt overlaps more prompts,
        so its prompt and its delay are kept together, not combined as independent quantiles."""
        import numpy as np

        own = np.asarray(prefill_at_s(np.asarray(self.prompt_scale))) - float(prefill_at_s(1.0))
        return np.asarray(self.ttft_s) - q_s + own + np.asarray(self.shared_s)


def window_run(prep, sm: StreamModel, lam: float, pre_s: float, mu_max: float, t_end: float,
               n_grid: int = 160, n_iter: int = 4, spread: bool = True) -> WindowRun:
    """Throughput in the measurement window and the measured requests' TTFT and TPOT, of the replayed stream.

    A fluid over the run, because a finite run is mostly transient (the running set fills while requests arrive
    and drains after the last one). The requests are the replayed ones (``prep.trace``): each arrives when the
    simulator's does and has its own output length ``S``. Request ``n`` is
    admitted on arrival while fewer than ``n_max`` run, else at the ``(n − n_max + 1)``-th departure (FCFS); its
    first token comes ``pre_s`` later. Every running request advances one token per pass, and a pass takes
    ``pass_s(N(t))`` with ``N(t)`` requests running, so all share one *decode clock* ``P(t) = ∫ dt / pass_s``:
    a request whose first token came at ``f`` has made ``K = P(t) − P(f)`` passes and leaves at ``P(f) + S``.
    ``N(t)``, ``pass_s`` and the admissions are solved together by a few Jacobi sweeps on a time grid. Tokens in
    the window are each request's ``min(S, K)`` between the window's ends; TPOT is each measured request's time
    from first token to leaving over its passes; only requests whose first token comes before the horizon count
    for TTFT.

    Why the replayed requests, not ``1/λ``-spaced arrivals with 16 output-length quantiles each (the model before):
    a 15 s window of long-output requests holds a handful of them, and which ones arrive first decides the window's
    tokens — Llama-3-8B arXiv on 9 + 3 chiplets at 0.86 req/s: 9 requests, two of 2,500+ tokens among the first
    five; 196 tok/s simulated, 101 estimated from the quantiles, 148 from the requests. Dynamic benchmark, same
    simulations: all 120 cells 0.884 → 0.895 (≥ 0.95: 40 → 48), throughput @0.5/0.9/1.2 0.970/0.966/0.930 →
    0.977/0.975/0.943, TTFT p90 @0.5/0.9 0.883/0.904 → 0.912/0.912, capacity 0.948 → 0.948 (Llama-3 arXiv
    continuous 0.910 → 0.888, its median est/sim 1.14 → 1.00). ``spread=False`` (a slot count set by the KV
    capacity, priced at the mean context: long survivors' growing KV does not free the slots short requests leave,
    the simulator preempts instead — a memory-bound LongWriter design: 953 tok/s spread, 571 at the mean, 583
    simulated) keeps ``1/λ`` arrivals that all leave at ``S̄``.
    """
    import numpy as np

    si = sm.si
    w0, w1 = prep.window_s
    horizon = prep.horizon_s
    a0 = prep.first_arrival_s
    end_arr = min(horizon, w1) if math.isfinite(horizon) else w1
    s_bar = si.steps_mean
    tr = _trace(prep, end_arr) if spread else None
    if tr is not None:
        arr, steps = tr[0], tr[1]
        n_req = arr.size
        s_mat = steps[:, None]
    else:
        n_req = int(max(0, math.floor(lam * (end_arr - a0))) + 1) if lam > 0 else 1
        arr = a0 + np.arange(n_req, dtype=np.float64) / max(lam, 1e-300)
        # Without the requests (a bare Prepared): departures over the output-length quantiles.
        s_mat = (_step_quantiles(prep) if spread else np.array([s_bar]))[None, :]
    n_q = s_mat.shape[1]
    tau_ss = sm.pass_s(sm.running(lam), lam)
    n_full = sm.n_max
    t_stop = max(t_end, arr[-1] + pre_s + 2.0 * float(s_mat.max()) * tau_ss * max(1.0, n_req / n_full))
    grid = _run_grid(a0, arr[-1] + pre_s, t_stop, n_grid)
    tau = np.full(grid.size, tau_ss)
    cap_n = max(int(n_full), 1)
    adm, leave = arr.copy(), None
    d_run = d_all = None  # continuous: batches formed while every batch prefilled (alive while their member is), all
    pre_n = pre_s  # chunked: each request's prefill at the batches it finds running (chunk_prefill_s)
    # Over the prefill stations' rate their queue grows through the run (FCFS at that rate) instead of the mean
    # wait ``pre_s`` carries (``open_prefill_s``'s station wait) for every request.
    rate = sm.first_token_rate_req_s()
    h_pre = 1.0 / rate if 0.0 < rate < lam else 0.0
    q_pre = sm.open_prefill_s(lam) - sm.service_s if h_pre else 0.0
    for _ in range(n_iter):  # Jacobi: the pass curve, the admissions and the departures from the last sweep's
        clock = np.concatenate([[0.0], np.cumsum(np.diff(grid) / tau[:-1])])  # P(t), passes
        if leave is not None:
            adm = _fcfs_admissions(arr, leave, cap_n)
        leave = _departures(_first_tokens(adm, pre_n, h_pre, q_pre), s_mat, grid, clock, tau)
        adm_sorted, leave_sorted = np.sort(adm), np.sort(leave.ravel())
        admitted = np.searchsorted(adm_sorted, grid, side="right")  # admitted by each grid time
        running = admitted - np.searchsorted(leave_sorted, grid, side="right") / n_q
        others = np.maximum(np.searchsorted(adm_sorted, adm, side="left")  # running when each is admitted
                            - np.searchsorted(leave_sorted, adm, side="right") / n_q, 0.0)
        if not si.chunked:
            # Only an arrival that finds others running can start a batch beside theirs.
            d_run = _formed_batches(adm, leave, grid, d_all, sm.prefills_in_flight(lam), np.minimum(others, 1.0))
            d_all = sm.batch_curve(running, lam, d_run)
        tau = sm.pass_curve_s(running, lam, d_run)
        if si.chunked:
            # Prompts admitted and not yet at their first token (waiting for a batch or prefilling): FCFS through
            # the stations at their first-token rate (no mean wait).
            first_w = np.sort(_first_tokens(adm, pre_n, 1.0 / max(rate, 1e-300), 0.0))
            tau = sm.stalled_pass_s(tau, running, admitted - np.searchsorted(first_w, grid, side="right"))
            pre_n = sm.chunk_prefill_s(lam, others, np.interp(adm, grid, tau))
    first = _first_tokens(adm, pre_n, h_pre, q_pre)
    p_first = np.interp(first, grid, clock)
    k0 = np.maximum(np.interp(w0, grid, clock) - p_first, 0.0)
    k1 = np.maximum(np.interp(w1, grid, clock) - p_first, 0.0)
    if tr is not None:  # each request's own output: min(S, K) tokens after its first by K passes
        tok = ((first > w0) & (first <= w1)) + np.minimum(steps, k1) - np.minimum(steps, k0)
    else:
        gk, ge = prep.grid_k, prep.grid_emin
        tok = ((first > w0) & (first <= w1)) + np.interp(k1, gk, ge) - np.interp(k0, gk, ge)
    span = max(w1 - w0, 1e-300)
    thr = min(float(tok.sum()) / span, mu_max * prep.stats.output_mean_tok, prep.offered_tokens / span)
    sel = (arr >= w0) & (arr <= w1) & (first <= horizon)
    start = arr if prep.scenario.ttft_from == "arrival" else adm
    spread_tpot = ()
    if tr is not None:  # each request with more than one output token: first token to leaving over its passes
        has = sel & (steps > 0)
        per_q = ((leave[:, 0] - first) / np.maximum(steps, 1.0))[:, None]
        tpot = per_q[has, 0]
        if si.chunked and has.any():
            spread_tpot = _stall_spread(sm, lam, np.interp(first[has], grid, running), per_q[has], steps[has, None])
    elif s_bar > 0:  # each request's time per output token, averaged over its output length's quantiles
        s_q = s_mat[0]
        pos = s_q > 0
        per_q = (leave[:, pos] - first[:, None]) / s_q[None, pos]
        tpot = per_q.mean(axis=1)[sel]
        if si.chunked and sel.any():
            spread_tpot = _stall_spread(sm, lam, np.interp(first[sel], grid, running), per_q[sel], s_q[pos])
    else:
        tpot = np.full(int(sel.sum()), tau_ss)
    full = np.nonzero(running >= n_full - math.sqrt(n_full))[0]
    fill = float(grid[full[0]] - a0) if full.size else math.inf
    own = float(np.mean(others[sel] < max(si.m, 1.0))) if si.chunked and sel.any() else 1.0
    # TTFT keeps the mean station wait (the caller adds the finite run's queueing delay on top of it).
    ttft = (adm + pre_n - start) if h_pre else (first - start)
    shared, scale = _pool_sharing(prep, si, tr, adm, sel) if not h_pre else ((), ())
    return WindowRun(thr, tuple(ttft[sel].tolist()), tuple(tpot.tolist()), fill, own, spread_tpot, shared, scale)


def _pool_sharing(prep, si: StreamInputs, tr, adm, sel) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(WindowRun.shared_s, WindowRun.prompt_scale)``: each replayed request joins every prefill pool at its
    admission with its own prompt's share of the pool's pass and is slowed by the prompts it overlaps there
    (:func:`sharing.shared_delays_s`, summed over the pools); empty without pools (static scheduling's tandem) or
    without the requests' prompts."""
    if tr is None or len(tr) < 3 or not si.pools:
        return (), ()
    sc = tr[2] / max(prep.stats.prompt_mean_tok, 1e-300)
    extra = sum(shared_delays_s(adm, d * sc, c) for c, d in si.pools)
    return tuple(extra[sel].tolist()), tuple(sc[sel].tolist())


def _trace(prep, end_s: float):
    """The replayed requests that arrive by ``end_s``: ``(arrival_s, decode_steps, prompt_tok)`` (None: none)."""
    tr = getattr(prep, "trace", None)
    if tr is None:
        return None
    keep = tr[0] <= end_s
    if keep.sum() < 1:
        return None
    return tuple(x[keep] for x in tr)


def _run_grid(a0: float, t_busy: float, t_stop: float, n: int):
    """The fluid's time grid: uniform, unless the run's tail (``t_stop``, sized by the overloaded pass and the
    longest output) is far longer than its arrivals (up to ``t_busy``). Then half the points go to twice the
    arrivals' span and the rest spread geometrically over the drain, whose changes slow as it empties. A uniform
    grid there put every arrival into its first cell: on a Llama-3-8B arXiv design with one decode chiplet the
    fluid saw ~1 request running and a 32 ms TPOT where the simulator ran 2–3 batches at 73–97 ms."""
    import numpy as np

    dense = a0 + 2.0 * max(t_busy - a0, 1e-9)
    if t_stop <= 2.0 * dense - a0:
        return np.linspace(a0, t_stop, n)
    k = n // 2
    head = np.linspace(a0, dense, k + 1)
    tail = a0 + (dense - a0) * np.geomspace(1.0, (t_stop - a0) / (dense - a0), n - k)
    return np.concatenate([head[:-1], tail])


#: Output-length quantiles a request's departure is spread over in :func:`window_run`.
_N_STEP_QUANTILES = 16


def _step_quantiles(prep):
    """Decode steps at the midpoints of :data:`_N_STEP_QUANTILES` equal-probability bins (cached per workload)."""
    import numpy as np

    hit = getattr(prep, "_step_q", None)
    if hit is None:
        u = (np.arange(_N_STEP_QUANTILES) + 0.5) / _N_STEP_QUANTILES
        hit = np.quantile(np.asarray(prep.stats.steps, dtype=np.float64), u)
        try:
            object.__setattr__(prep, "_step_q", hit)
        except (AttributeError, TypeError):  # slotted: recompute next time
            pass
    return hit


def _poisson_sf(k, mean: float):
    """``P(N ≥ k)`` of a Poisson count of ``mean``, linear between integers ``k`` (numpy over ``k``)."""
    import numpy as np

    k = np.maximum(np.asarray(k, dtype=np.float64), 0.0)
    mean = mean if mean < 1e9 else 1e9  # inf or NaN: every batch prefilling (P = 1 at any k below)
    top = int(np.ceil(k.max())) + 1 if k.size else 1
    pmf = np.empty(top)
    pmf[0] = math.exp(-mean)
    for j in range(1, top):
        pmf[j] = pmf[j - 1] * mean / j
    sf = 1.0 - np.concatenate([[0.0], np.cumsum(pmf)])[:top]  # sf[j] = P(N >= j)
    sf = np.maximum(sf, 0.0)
    lo = np.floor(k).astype(np.int64)
    hi = np.minimum(lo + 1, top - 1)
    w = k - lo
    return sf[lo] + w * (sf[hi] - sf[lo])


def _formed_batches(adm, leave, grid, d_prev, prefilling: float, others=1.0):
    """Continuous batching's batches over the run: an arrival joins a batch whose prefill stream is idle and
    starts one of its own when every batch is prefilling — with ``d`` batches, ``P(N ≥ d)`` for the ``N ~
    Poisson(λ·prefill)`` prompts in prefill — and that batch lives while its member does (its departure spread
    over the output-length quantiles of ``leave``). Prompts that arrive together while long ones prefill each
    start a batch, and each runs its own decode pass to its end: on Llama-3-8B arXiv with two decode chiplets the
    simulator runs 3–4 batches for 5 requests (TPOT 60 ms) where ``n/B + 1`` counts 1.6 (35 ms). ``others``
    (per arrival, in [0, 1]): whether it found requests running (an arrival into an empty run starts the one batch
    already counted)."""
    import numpy as np

    d_at = np.ones(adm.size) if d_prev is None else np.interp(adm, grid, d_prev)
    p = _poisson_sf(d_at, prefilling) * others
    n_q = leave.shape[1]
    t = np.concatenate([adm, leave.ravel()])
    w = np.concatenate([p, -np.repeat(p / n_q, n_q)])
    order = np.argsort(t, kind="stable")
    alive = np.cumsum(w[order])
    idx = np.searchsorted(t[order], grid, side="right") - 1
    extra = np.where(idx >= 0, alive[np.maximum(idx, 0)], 0.0)
    return 1.0 + np.maximum(extra, 0.0)


def _fcfs_admissions(arr, leave, cap_n: int):
    """FCFS admission times: request ``n`` on arrival while fewer than ``cap_n`` run, else at the
    ``(n − cap_n + 1)``-th whole departure (``leave``: each request's departure at each output-length quantile, so
    short requests free their slots early, as in the simulator, instead of every request at the mean length)."""
    import numpy as np

    n_req, n_q = leave.shape
    adm = arr.copy()
    if n_req <= cap_n:
        return adm
    dep = np.sort(leave.ravel())
    idx = (np.arange(cap_n, n_req) - cap_n + 1) * n_q - 1
    adm[cap_n:] = np.maximum(arr[cap_n:], dep[idx])
    return np.maximum.accumulate(adm)


#: Standard normal quantiles at 0.1, 0.3, 0.5, 0.7, 0.9 (the stall spread's fixed grid).
_Z5 = (-1.2815515655446004, -0.5244005127080407, 0.0, 0.5244005127080407, 1.2815515655446004)


def _stall_spread(sm: StreamModel, lam: float, n_at, per_q, s_q):
    """TPOT samples of chunked requests with the spread of their stalls: of a request's ``S`` passes each carries
    a chunk with probability ``p`` and then lasts ``extra`` longer (:meth:`StreamModel.chunk_stall`), so its TPOT is
    the fluid's mean plus ``extra·(K/S − p)``, ``K ~ Bin(S, p)``: standard deviation ``extra·√(p(1 − p)/S)``
    (normal, on :data:`_Z5`). A chunk's stall (a long prompt's prefill, ~1 s on arXiv) dwarfs a 20 ms pass, so
    requests whose few passes caught a chunk miss the TPOT bound while the mean meets it (Nemotron-H arXiv, two
    Mamba decode chiplets, 4 req/s: 46 ms mean estimated, 56 ms simulated, attainment 0.47)."""
    import numpy as np

    p, ex = sm.chunk_stall(n_at, lam)
    p, ex = p[:, None, None], ex[:, None, None]
    s = np.maximum(np.atleast_2d(np.asarray(s_q, dtype=np.float64)), 1.0)  # (1, n_q) quantiles or (n, 1) own
    sd = ex * np.sqrt(p * (1.0 - p) / s[:, :, None])
    z = np.asarray(_Z5)[None, None, :]
    return tuple(np.maximum(per_q[:, :, None] + z * sd, 0.0).ravel().tolist())


def _first_tokens(adm, pre, h_s: float, q_s: float):
    """First-token times: ``pre`` after admission, or, over the prefill stations' rate (``h_s`` > 0, one prompt per
    ``h_s``), FCFS through them: ``f_n = max(a_n + pre − q, f_{n−1} + h) = n·h + max_{k≤n}(a_k + pre − q − k·h)``
    (``q``: the mean station wait ``pre`` carries). Early requests then start at once and later ones wait ever
    longer, as in the simulator; one mean wait for all held every first token back (Mamba-2 arXiv, one prefill
    chiplet, 120 % load: 208 tok/s in the window against 494 simulated, less than the 292 estimated at 90 %)."""
    import numpy as np

    if h_s <= 0.0:
        return adm + pre
    k = np.arange(adm.size, dtype=np.float64) * h_s
    return k + np.maximum.accumulate(adm + pre - q_s - k)


def _departures(first, s_mat, grid, clock, tau):
    """Each request's departure ``s`` passes after its first token (``first``, s): at each output-length quantile
    (``s_mat`` of shape ``(1, n_q)``) or at its own output (``(n, 1)``)."""
    import numpy as np

    target = np.interp(first, grid, clock)[:, None] + s_mat
    lv = np.interp(target, clock, grid, right=np.inf)
    over = ~np.isfinite(lv)
    lv[over] = grid[-1] + (target[over] - clock[-1]) * tau[-1]
    return lv


#: Probabilities of the TTFT/TPOT quantiles an estimate carries (0.05, 0.10, …, 0.95); ``goodput`` reads them.
QUANTILE_PROBS: tuple[float, ...] = tuple(i / 20.0 for i in range(1, 20))


def _station_delays(q_s: float, util: float):
    """``(q, delays)``: a waiting time of mean ``q_s`` at a station of utilisation ``util``, as M/G/1's is
    approximately — none with probability ``1 − util``, else exponential of mean ``q_s/util`` — on 8
    equal-probability points; ``(0, [0])`` when there is no wait to spread."""
    import numpy as np

    if not (q_s > 0.0 and util > 0.0 and math.isfinite(q_s)):
        return 0.0, np.zeros(1)
    util = min(util, 0.99)
    v = np.linspace(0.0625, 0.9375, 8)
    tail = np.maximum(1.0 - v, 1e-12) / util  # P(W > w) = util·exp(−w·util/q)
    return q_s, np.where(v < 1.0 - util, 0.0, -np.log(np.minimum(tail, 1.0)) * q_s / util)


def latency_quantiles(run: WindowRun, prompt_tok, prefill_at_s, wait_s: float,
                      probs: tuple[float, ...] = QUANTILE_PROBS,
                      station: tuple[float, float] = (0.0, 0.0)) -> tuple[list[float], list[float]]:
    """Quantiles of the measured requests' TTFT and TPOT (s) at ``probs``.

    A request's TTFT is its fluid TTFT (at the mean prompt) shifted by how much longer or shorter a prompt's
    prefill is (``prefill_at_s(scale) − prefill_at_s(1)``, :meth:`StreamModel.prefill_at_s`; ``scale`` = prompt
    over the mean prompt) plus an exponential queueing delay of mean ``wait_s`` (the finite run's wait); requests,
    prompt lengths and delays are combined on fixed quantile grids (deterministic). ``station = (q, u)``: the
    prefill stations' mean wait ``q``, which the fluid TTFT gives every request alike, and their bottleneck's
    utilisation ``u``; the wait is spread instead (:func:`_station_delays`): a prompt behind a long one waits, the
    others do not. Nemotron-H chat on 6 + 1 Mamba and 2 + 3 attention chiplets at 15.7 req/s: TTFT p90 0.22 s with
    the mean wait alike, 0.35 s spread, 0.43 s simulated; dynamic benchmark TTFT p90 median est/sim at 120 % load
    on arXiv 0.62–0.68 → 1.00–1.08, capacity Spearman 0.949 → 0.952 (static-scheduling report 0.923 → 0.942),
    TTFT p90 Spearman @0.5/0.9/1.2 0.890/0.914/0.915 → 0.875/0.909/0.921. Where the run carries the pools'
    processor sharing (``run.shared_s``, dynamic task scheduling) each request's own TTFT replaces the fluid TTFT,
    the prompt quantiles and the station spread (:meth:`WindowRun.shared_ttft_s`); only the slot wait is spread.
    """
    import numpy as np

    if not run.ttft_s:
        return [], []
    u = np.linspace(0.0625, 0.9375, 8)
    delay = -np.log1p(-u) * wait_s if wait_s > 0 else np.zeros(1)
    if run.shared_s:
        samples = (run.shared_ttft_s(station[0], prefill_at_s)[:, None] + delay[None, :]).ravel()
    else:
        samples = _quantile_ttft_samples(run, prompt_tok, prefill_at_s, delay, station)
    q = np.asarray(probs)
    tpot = run.tpot_spread_s or run.tpot_s
    return np.quantile(samples, q).tolist(), np.quantile(np.asarray(tpot), q).tolist()


def _quantile_ttft_samples(run: WindowRun, prompt_tok, prefill_at_s, delay, station: tuple[float, float]):
    """:func:`latency_quantiles`' TTFT samples without the pools' sharing: the fluid TTFTs (at most 64) × 16 prompt
    quantiles × the slot-wait points, with the station wait spread (:func:`_station_delays`) in place of its mean."""
    import numpy as np

    t = np.asarray(run.ttft_s)
    p = np.asarray(prompt_tok, dtype=np.float64)
    if t.size > 64:
        t = t[np.linspace(0, t.size - 1, 64).astype(np.int64)]
    # Prompt quantiles, not each request's own prompt: the own prompts took elastic TTFT p90 @0.5 from 0.912 to
    # 0.926 but static scheduling's from 0.819 to 0.717, whose simulated TTFT grows with the rate by a wait this
    # model lacks (docs/estimator.md), so the window's few prompts decided the estimated ranking. (With the pools'
    # sharing, WindowRun.shared_ttft_s, each request's own prompt rides with its own delay.)
    scale = np.quantile(p, np.linspace(0.03125, 0.96875, 16)) / max(float(p.mean()), 1e-300)
    shift = np.asarray(prefill_at_s(scale)) - float(prefill_at_s(1.0))
    q_st, st = _station_delays(*station)
    if st.size > 1:
        t = t - q_st
        delay = (delay[:, None] + st[None, :]).ravel()
    return (t[:, None, None] + shift[None, :, None] + delay[None, None, :]).ravel()
