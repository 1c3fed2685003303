"""The two-stream model of continuous and chunked batching (``estimator.streams``) against closed forms."""

from __future__ import annotations

import math

import pytest

from hydra_opt.evaluate.estimator.streams import StreamInputs, StreamModel


def _inputs(**kw) -> StreamInputs:
    base = dict(m=4.0, b=8.0, steps_mean=100.0, tau_b_s=(0.02, 0.03, 0.04, 0.05), tau0_s=0.016, tau1_s=0.0005,
                pre1_s=(0.02, 0.03), pre_rate_req_s=60.0, chunked=False, chunks_mean=1.0)
    base.update(kw)
    return StreamInputs(**base)


def test_decode_pass_is_the_mva_pass_scaled_to_the_members():
    sm = StreamModel(_inputs())
    full = 0.016 + 0.0005 * 8
    assert sm.decode_pass_s(1.0) == pytest.approx(0.02 * (0.016 + 0.0005) / full)
    # 12 running: the full batches' 1.5 plus the one formed while another prefilled, 2.5 batches of 4.8 members.
    assert sm.batches(12.0) == 2.5
    assert sm.decode_pass_s(12.0) == pytest.approx(0.035 * (0.016 + 0.0005 * 4.8) / full)
    assert sm.batches(1.0) == 1.0 and sm.batches(1000.0) == 4.0  # one request, one batch; at most m
    # Chunked prefill: every arrival starts a batch of its own, up to m.
    ck = StreamModel(_inputs(chunked=True))
    assert ck.batches(3.0) == 3.0 and ck.batches(12.0) == 4.0
    assert ck.decode_pass_s(3.0) == pytest.approx(0.04 * (0.016 + 0.0005) / full)


def test_open_network_prefill_and_the_chunked_pass():
    sm = StreamModel(_inputs())
    assert sm.prefill_s(0.0) == pytest.approx(0.05)
    assert sm.prefill_s(10.0) == pytest.approx(0.02 / 0.8 + 0.03 / 0.7)  # Σ D/(1 − λD)
    ck = StreamModel(_inputs(chunked=True))
    assert ck.pass_s(1.0, 0.0) == pytest.approx(ck.decode_pass_s(1.0))
    # Fewer than m batches: an arrival starts a batch of its own (its first pass is its prefill), the others' passes
    # are decode-only; the decode stations see the batches decoding, those prefilling (λ·prefill) left out.
    pre = 5.0 * ck.open_prefill_s(5.0)
    assert 0.2 < pre < 0.5 and ck.capacity_req_s() > 5.0
    assert ck.pass_s(2.0, 5.0) == pytest.approx(ck.decode_pass_s(2.0 - pre))
    assert ck.pass_s(1.1, 5.0) == ck.decode_pass_s(1.0)  # at least one batch decodes
    assert ck.pass_s(2.0, 0.0) == ck.decode_pass_s(2.0)
    # All m = 4 batches run: arrivals' chunks ride their passes, τ = dec' + (λτ/d)·extra with g = λ·extra/d of
    # the time stalled on a chunk, when the batch holds no decode station: dec' is the decode part at d·(1 − g)
    # batches (a = 1.5 members each).
    dec = ck.decode_pass_s(6.0)
    extra = ck.open_prefill_s(0.5) - dec
    g = 0.5 * extra / 4.0
    assert ck.batches(6.0) == 4.0
    d_eff = 4.0 * (1.0 - g)  # between 3 and 4 batches: tau_b interpolated
    dec_eff = (0.04 + (d_eff - 3.0) * 0.01) * (0.016 + 0.0005 * 1.5) / (0.016 + 0.0005 * 8)
    assert ck.pass_s(6.0, 0.5) == pytest.approx(dec_eff / (1.0 - g))
    assert ck.pass_curve_s([2.0, 6.0], 0.5).tolist() == pytest.approx([ck.pass_s(2.0, 0.5), ck.pass_s(6.0, 0.5)])


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("lam", [0.05, 0.5, 2.0])
def test_littles_law_below_capacity_and_full_slots_above(chunked: bool, lam: float):
    sm = StreamModel(_inputs(chunked=chunked))
    cap = sm.capacity_req_s()
    assert cap > 0
    # At capacity the full system completes requests as fast as they arrive.
    assert sm.n_max / sm.life_s(sm.n_max, cap, sm._pre_light(cap)) == pytest.approx(cap, rel=1e-6)
    n = sm.running(lam)
    if lam < cap:
        assert n / sm.life_s(n, lam, sm._pre_light(lam)) == pytest.approx(lam, rel=1e-6)
        assert n < sm.n_max
    assert sm.running(cap * 1.5) == sm.n_max  # overload: every slot taken, a queue builds


def test_prefill_stations_cap_the_capacity():
    sm = StreamModel(_inputs(pre_rate_req_s=0.01))
    assert sm.capacity_req_s() == pytest.approx(0.01)
    assert math.isfinite(StreamModel(_inputs()).capacity_req_s())


@pytest.mark.parametrize("chunked", [False, True])
def test_the_array_pass_curve_is_the_scalar_pass(chunked: bool):
    import numpy as np

    sm = StreamModel(_inputs(chunked=chunked))
    ns = np.array([0.3, 1.0, 2.5, 8.0, 9.0, 17.0, 31.9, 32.0, 40.0])
    for lam in (0.0, 3.0):
        np.testing.assert_allclose(sm.pass_curve_s(ns, lam), [sm.pass_s(float(n), lam) for n in ns], rtol=1e-12)


def test_fluid_departures_and_fcfs_admissions_closed_form():
    import numpy as np

    from hydra_opt.evaluate.estimator.streams import _departures, _fcfs_admissions

    grid = np.linspace(0.0, 100.0, 201)
    tau = np.full(grid.size, 0.5)  # 2 passes per second
    clock = grid / 0.5
    s_q = np.array([2.0, 10.0])
    leave = _departures(np.array([0.0, 1.0]) + 0.25, s_q, grid, clock, tau)  # first tokens
    # s passes after the first token (admission + 0.25 s): 0.25 + s·0.5.
    assert leave.ravel().tolist() == pytest.approx([1.25, 5.25, 2.25, 6.25])
    # Two slots: request 2 waits for the first whole departure (two half-request exits: the 2nd-earliest quantile
    # exit, 2.25 s), request 3 for the second (the 4th-earliest, 6.25 s); FCFS keeps the order.
    arr = np.array([0.0, 1.0, 1.5, 1.6])
    full = np.vstack([leave, [[50.0, 60.0], [50.0, 60.0]]])
    assert _fcfs_admissions(arr, full, 2).tolist() == pytest.approx([0.0, 1.0, 2.25, 6.25])
    # Enough slots: everyone on arrival.
    assert _fcfs_admissions(arr, full, 4).tolist() == arr.tolist()


def test_prefill_of_a_longer_prompt_closed_forms():
    import numpy as np

    sc = np.array([0.5, 1.0, 3.0])
    # Continuous: the prefill pass is linear in the prompt; the queue in front of the stations is not (FCFS).
    sm = StreamModel(_inputs())
    pre = sm.open_prefill_s(2.0)
    service = 0.02 + 0.03
    assert pre > service  # a queue to split off
    assert sm.prefill_at_s(2.0, sc).tolist() == pytest.approx((service * sc + (pre - service)).tolist())
    assert sm.prefill_s(2.0) == pytest.approx(pre)
    # Chunked, prompts within the token budget (one chunk each), fewer than m batches: its own batch's first pass.
    ck = StreamModel(_inputs(chunked=True, steps_mean=5.0))
    lam = 0.5
    assert ck.batches(ck.running(lam)) < 4.0
    q = ck.open_prefill_s(lam) - service
    assert ck.prefill_at_s(lam, sc).tolist() == pytest.approx((service * sc + q).tolist())
    # Long prompts (2.5 chunks on average): each further chunk pays a one-member pass, chunks grow with the prompt.
    long = StreamModel(_inputs(chunked=True, steps_mean=5.0, chunks_mean=2.5))
    f = long.decode_pass_s(1.0)
    want = service * sc + (long.open_prefill_s(lam) - service) + (np.maximum(2.5 * sc, 1.0) - 1.0) * f
    assert long.prefill_at_s(lam, sc).tolist() == pytest.approx(want.tolist())
    # Every batch running: a chunk rides a pass, so no prompt's first token comes before the pass ends.
    busy = StreamModel(_inputs(chunked=True, steps_mean=400.0))
    lam = 0.9 * busy.capacity_req_s()
    n = busy.running(lam)
    assert busy.batches(n) == 4.0
    tau = busy.pass_s(n, lam)
    got = busy.prefill_at_s(lam, np.array([0.01, 1.0]))
    assert got[0] == pytest.approx(tau / 5.0 + tau)
    assert got[1] == pytest.approx(busy.prefill_s(lam))


def test_a_finite_run_queues_at_the_bottleneck_prefill_station_only():
    from hydra_opt.evaluate.estimator.markov import window_wait_s

    si = dict(pre1_s=(0.02, 0.05, 0.03), arrivals_s=(1.0, 15.0), prompt_scv=0.4)
    sm = StreamModel(_inputs(**si))
    # Light load: the M/G/1 wait of the slowest station (a run this long reaches it), C² = 0.4.
    lam = 2.0
    d = 0.05
    want = 0.10 + min(d * lam * d * 1.4 / (2 * (1 - lam * d)), window_wait_s(lam, 1 / d, 0.4, 1.0, 15.0))
    assert sm.open_prefill_s(lam) == pytest.approx(want)
    # At and past the bottleneck's rate the stationary wait is infinite; the run's stays finite and grows.
    w20, w30 = sm.open_prefill_s(20.0), sm.open_prefill_s(30.0)
    assert 0.10 < w20 < w30 < math.inf
    assert w20 == pytest.approx(0.10 + window_wait_s(20.0, 20.0, 0.4, 1.0, 15.0))
    # Stationary inputs keep the open-network formula.
    assert StreamModel(_inputs(pre1_s=si["pre1_s"])).open_prefill_s(lam) == pytest.approx(
        sum(x / (1 - lam * x) for x in si["pre1_s"]))


def test_chunked_passes_carry_the_admitted_prompts_only():
    # Beyond the capacity, arrivals wait for a slot: they ride no pass, so the pass is the one at capacity.
    ck = StreamModel(_inputs(chunked=True, steps_mean=400.0, chunks_mean=2.0, pre1_s=(0.2, 0.3)))
    cap = ck.capacity_req_s()
    n = ck.n_max
    assert ck.batches(n) == 4.0
    assert ck.pass_s(n, 3.0 * cap) == ck.pass_s(n, cap)
    assert ck.pass_curve_s([n], 3.0 * cap)[0] == pytest.approx(ck.pass_s(n, cap), rel=1e-12)
    assert ck.pass_s(n, 0.5 * cap) < ck.pass_s(n, cap)


def test_decode_curves_deterministic_pipeline_with_memory_queues():
    from types import SimpleNamespace

    from hydra_opt.evaluate.estimator import single

    ld = {"dec_ref": [0.004, 0.004, 0.004, 0.0], "dec1": [0.002, 0.002, 0.002, 0.0]}
    none = SimpleNamespace(mem_net=((), ()), mem_map=(), static_sched=False)
    xb, x1 = single._decode_curves(none, ld, 8)
    assert xb[0] == pytest.approx(1 / 0.012) and x1[0] == pytest.approx(1 / 0.006)  # a lone pass: Σ D
    assert all(x <= 1 / 0.004 + 1e-9 for x in xb)  # never past the slowest station
    assert all(b >= a for a, b in zip(xb, xb[1:]))
    # Less queueing than exact (exponential) MVA at every population above one.
    exact = single._mva([ld["dec_ref"]] * 3, 8, (0, 0))[0][0]
    assert all(d >= e - 1e-12 for d, e in zip(xb, exact)) and xb[3] > exact[3]
    # A contended memory only slows passes down, and not a lone one.
    mem = SimpleNamespace(mem_net=((0.003, 0.003), (0.001, 0.001)), mem_map=(), static_sched=False)
    mb, m1 = single._decode_curves(mem, ld, 8)
    assert mb[0] == pytest.approx(xb[0])
    assert all(m <= x + 1e-12 for m, x in zip(mb, xb)) and mb[-1] < xb[-1]
    assert all(x <= 1 / 0.004 + 1e-9 for x in mb)
    # Static scheduling: the memories only bound the rate — the chiplets' curve, capped by the slowest memory;
    # elastic scheduling keeps the memory queues.
    slow = ((0.005, 0.003), (0.001, 0.001))
    sb, s1 = single._decode_curves(SimpleNamespace(mem_net=slow, mem_map=(), static_sched=True), ld, 8)
    assert sb == pytest.approx([min(x, 1 / 0.005) for x in xb]) and s1 == pytest.approx(x1)
    assert sb[-1] == pytest.approx(1 / 0.005)
    qb, _ = single._decode_curves(SimpleNamespace(mem_net=slow, mem_map=(), static_sched=False), ld, 8)
    assert qb[0] == pytest.approx(xb[0]) and all(q < s - 1e-9 for q, s in zip(qb[1:], sb[1:]))


def test_decode_curves_queue_only_at_memories_slower_than_their_readers():
    """A memory read by one chiplet whose demand is at least the memory's adds no queue (that chiplet's queue
    already orders its streams); a memory slower than every chiplet reading it, shared by several, does."""
    from types import SimpleNamespace

    from hydra_opt.evaluate.estimator import single

    ld = {"dec_ref": [0.004, 0.004, 0.004], "dec1": [0.002, 0.002, 0.002], "own_d": [0, 1, 2]}
    free = single._decode_curves(SimpleNamespace(mem_net=((), ()), mem_map=(), static_sched=False), ld, 8)
    # Memory j holds block j (read by chiplet j only), each at the reader's demand or below: no queues at all.
    own = SimpleNamespace(mem_net=((0.004, 0.003, 0.002), (0.002, 0.001, 0.001)), mem_map=(0, 1, 2),
                          static_sched=False)
    assert single._decode_curves(own, ld, 8) == free
    # One memory holds every block and is slower than each reader: it queues, as without the map.
    shared = ((0.006,), (0.003,))
    mapped = single._decode_curves(SimpleNamespace(mem_net=shared, mem_map=(0, 0, 0), static_sched=False), ld, 8)
    unmapped = single._decode_curves(SimpleNamespace(mem_net=shared, mem_map=(), static_sched=False), ld, 8)
    assert mapped == unmapped and mapped[0][-1] < free[0][-1] - 1e-9
    # Memory 0 (read by chiplets 0 and 1, slower than both) queues; memory 1 (chiplet 2's, no slower) does not.
    part = SimpleNamespace(mem_net=((0.006, 0.004), (0.003, 0.002)), mem_map=(0, 0, 1), static_sched=False)
    only0 = SimpleNamespace(mem_net=((0.006, 0.0), (0.003, 0.0)), mem_map=(), static_sched=False)
    assert single._decode_curves(part, ld, 8) == single._decode_curves(only0, ld, 8)


def test_run_grid_resolves_the_arrivals_when_the_drain_is_long():
    import numpy as np

    from hydra_opt.evaluate.estimator.streams import _run_grid

    short = _run_grid(1.0, 11.0, 40.0, 160)  # tail within twice the busy span: the uniform grid
    assert short.tolist() == np.linspace(1.0, 40.0, 160).tolist()
    g = _run_grid(1.0, 11.0, 5000.0, 160)
    assert g.size == 160 and g[0] == 1.0 and g[-1] == pytest.approx(5000.0) and np.all(np.diff(g) > 0)
    # Half the points within twice the arrivals' span (a uniform grid would put one there).
    assert int((g <= 21.0 + 1e-9).sum()) >= 80


def test_fluid_is_converged_in_its_grid_when_requests_outlive_the_arrivals():
    """A one-decode-chiplet Llama-3-8B design on arXiv (outputs far longer than the 20 s of arrivals): the default
    grid gives the TPOT and throughput of a 5,000-point grid. A uniform 160-point grid over the drain put the
    arrivals into its first cells: TPOT 49 ms and 139 tok/s against 89 ms and 94 tok/s (before the formed
    batches of ``_formed_batches``; 70 ms and 130 tok/s against 115 ms and 67 tok/s with them)."""
    import numpy as np

    from hydra_opt.evaluate.estimator import estimate, single, streams
    from hydra_opt.evaluate.scenario import Scenario
    from hydra_opt.system.design import DesignPoint

    d = DesignPoint(counts=(("tscs_d", 1), ("tscs_p", 19)), n_mem=4, d2d_bw_gbps=256.0, max_batch=8, memory="hbm3",
                    precision="int8", batching="continuous", scheduler="static")
    scn = Scenario(n_requests=20, arrival_interval_s=1.0)
    base = estimate(d, "llama-3-8b", "arxiv", scenario=scn)
    orig = streams._run_grid
    try:
        streams._run_grid = lambda a0, t_busy, t_stop, n: orig(a0, t_busy, t_stop, 5000)
        single._MISC.clear()
        fine = estimate(d, "llama-3-8b", "arxiv", scenario=scn)
    finally:
        streams._run_grid = orig
        single._MISC.clear()
    # Within 5 % (measured 2-3 %); the uniform 160-point grid is 37-44 % off.
    assert base.tpot_mean_s == pytest.approx(fine.tpot_mean_s, rel=0.05)
    assert base.throughput_tok_s == pytest.approx(fine.throughput_tok_s, rel=0.05)


def test_poisson_tail_closed_form():
    import numpy as np

    from hydra_opt.evaluate.estimator.streams import _poisson_sf

    mean = 1.3
    pmf = [math.exp(-mean) * mean ** j / math.factorial(j) for j in range(4)]
    want = [1.0, 1.0 - pmf[0], 1.0 - pmf[0] - pmf[1], 1.0 - sum(pmf[:3])]
    assert _poisson_sf(np.array([0.0, 1.0, 2.0, 3.0]), mean).tolist() == pytest.approx(want, abs=1e-15)
    # Linear between integers.
    assert _poisson_sf(np.array([1.25]), mean)[0] == pytest.approx(0.75 * want[1] + 0.25 * want[2])


def test_formed_batches_count_the_live_batches_started_during_prefills():
    """No prompt in prefill: every arrival joins the running batch (one batch). Always prefilling: every arrival
    starts a batch, which lives while its member does (half at each of its two exit quantiles)."""
    import numpy as np

    from hydra_opt.evaluate.estimator.streams import _formed_batches

    adm = np.array([0.0, 1.0, 2.0])
    leave = np.array([[3.0, 5.0], [4.0, 6.0], [5.0, 7.0]])
    grid = np.array([0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5])
    assert _formed_batches(adm, leave, grid, None, 0.0).tolist() == [1.0] * 8
    got = _formed_batches(adm, leave, grid, np.ones(grid.size), 1e6)
    assert got.tolist() == pytest.approx([2.0, 3.0, 4.0, 3.5, 3.0, 2.0, 1.5, 1.0])


def test_chunked_prefill_at_the_batches_an_arrival_finds():
    """Fewer than m batches running: the prompt prefills in a batch of its own (the open prefill); all m running:
    it waits for the first of the staggered pass boundaries and its chunk rides a pass (``τ/(d+1) + max(work, τ)``)."""
    import numpy as np

    ck = StreamModel(_inputs(chunked=True))
    lam = 5.0
    work = ck.open_prefill_s(lam)
    got = ck.chunk_prefill_s(lam, np.array([0.0, 3.0, 4.0, 9.0]), np.array([0.01, 0.01, 0.2, 0.2]))
    assert got.tolist() == pytest.approx([work, work, 0.2 / 5.0 + max(work, 0.2), 0.2 / 5.0 + max(work, 0.2)])
    # The stationary rule, unless the run's arrivals mostly started their own batches.
    assert ck.prefill_at_s(lam, 1.0, own_batch=True) == pytest.approx(work)


def test_first_tokens_fcfs_through_saturated_prefill_stations():
    import numpy as np

    from hydra_opt.evaluate.estimator.streams import _first_tokens

    adm = np.array([0.0, 0.1, 0.2, 5.0])
    # Under the stations' rate: the prefill after admission.
    assert _first_tokens(adm, 0.5, 0.0, 0.0).tolist() == pytest.approx([0.5, 0.6, 0.7, 5.5])
    # Over it (one prompt per 1 s), the mean wait 0.25 s removed: 0.25 s of service, then one per second; the
    # late arrival finds the stations idle.
    assert _first_tokens(adm, 0.5, 1.0, 0.25).tolist() == pytest.approx([0.25, 1.25, 2.25, 5.25])


def test_chunk_stall_spread_is_binomial_around_the_fluid_tpot():
    """``(p, extra)`` from the pass model, and TPOT samples ``mean ± z·extra·√(p(1 − p)/S)`` at the 10/30/50/70/90 %
    normal quantiles; no spread while fewer than m batches run (no pass carries a chunk)."""
    import numpy as np

    from hydra_opt.evaluate.estimator.streams import _Z5, _stall_spread

    ck = StreamModel(_inputs(chunked=True))
    lam = 0.5
    assert tuple(map(float, ck.chunk_stall(2.0, lam))) == (0.0, 0.0)
    p, extra = map(float, ck.chunk_stall(6.0, lam))
    tau = ck.pass_s(6.0, lam)
    assert p == pytest.approx(lam * tau / 4.0)
    assert extra == pytest.approx(ck.open_prefill_s(lam) - ck.decode_pass_s(6.0, lam))
    per_q = np.array([[0.05, 0.04]])
    s_q = np.array([10.0, 400.0])
    got = np.array(_stall_spread(ck, lam, np.array([6.0]), per_q, s_q)).reshape(2, 5)
    for j, s in enumerate(s_q):
        sd = extra * math.sqrt(p * (1 - p) / s)
        assert got[j].tolist() == pytest.approx([max(per_q[0, j] + z * sd, 0.0) for z in _Z5])
    assert _stall_spread(ck, lam, np.array([2.0]), per_q, s_q) == tuple(np.repeat(per_q.ravel(), 5).tolist())


def test_chunked_first_token_rate_is_at_least_the_bottleneck_station():
    """Chunked overload: a deterministic tandem runs at its slowest station (1/max D), above the prefill-only
    MVA's exponential-service rate; continuous batching keeps the MVA's."""
    ck = StreamModel(_inputs(chunked=True, pre_rate_req_s=20.0))
    assert ck.first_token_rate_req_s() == pytest.approx(1.0 / 0.03)
    assert StreamModel(_inputs(chunked=True, pre_rate_req_s=60.0)).first_token_rate_req_s() == 60.0
    assert StreamModel(_inputs(pre_rate_req_s=20.0)).first_token_rate_req_s() == 20.0


def test_stalled_chunked_passes_closed_forms():
    """With ``m`` batches running and ``w`` prompts waiting or prefilling (``k`` a pass), a fraction
    ``g = w/(m·k)`` of the batches holds a chunk — of those with a free slot, ``min(1, (n_max − n)/m)`` of them —
    the others cycle through the decode stations as ``m·(1 − g)`` batches, so a pass takes
    ``dec(m(1 − g))/(1 − g)``, at most one trip of ``m·k`` prompts through the stations ``k·max(Σ D, m·max D)``
    plus the decode part; never shorter than the pass model's; nothing while fewer than ``m`` batches run (an
    arrival then prefills in a batch of its own) or when every slot is taken (the prompts wait for one)."""
    import numpy as np

    ck = StreamModel(_inputs(chunked=True, prompts_per_pass=2.0))  # m = 4 batches of 8: 32 slots
    tau = np.full(7, 0.01)
    running = np.array([2.0, 28.0, 28.0, 28.0, 28.0, 30.0, 32.0])
    waiting = np.array([100.0, 0.0, 4.0, 8.0, 100.0, 4.0, 100.0])
    got = ck.stalled_pass_s(tau, running, waiting)
    cycle = 2.0 * max(0.05, 4 * 0.03) + ck._dec_at(4.0, 8.0)
    half = ck._dec_at(2.0, 7.0) / 0.5  # g = 4/8: two of the four batches free
    quarter = ck._dec_at(3.0, 7.5) / 0.75  # 2 free slots for 4 batches: half of g = 4/8
    assert got.tolist() == pytest.approx([0.01, max(0.01, ck._dec_at(4.0, 7.0)), max(0.01, half), cycle, cycle,
                                          max(0.01, quarter), max(0.01, ck._dec_at(4.0, 8.0))])


def test_chunked_in_window_tokens_collapse_past_the_prefill_stations():
    """The run fluid: arrivals beyond the stations' rate keep every batch holding a chunk, and the tokens emitted
    in the window fall (the simulator: 1,166 tok/s at 6.5 req/s, 71 at 12 on a 7 + 7-chiplet Mamba-2 arXiv design);
    the pass model alone kept them at its plateau."""
    from hydra_opt.evaluate.estimator import estimate
    from hydra_opt.system.design import DesignPoint
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import Requests

    import numpy as np

    design = DesignPoint.from_dict({"chiplets": {"marca_d": 7, "marca_p": 7}, "n_mem": 10, "d2d_bw_gbps": 512,
                                    "max_batch": 16, "placement": "cp", "batching": "chunked",
                                    "scheduler": "elastic"})
    model = load_model("mamba2-2.7b")
    rng = np.random.default_rng(0)
    n = 240
    prompts = np.maximum(rng.lognormal(math.log(2700), 0.6, n).astype(np.int64), 1)
    outs = np.maximum(rng.lognormal(math.log(250), 0.5, n).astype(np.int64), 1)
    gaps = rng.exponential(1.0, n)

    def thr(rate: float) -> float:
        arr = np.cumsum(gaps) / rate
        keep = arr <= 15.0
        return estimate(design, model, Requests(arr[keep], prompts[keep], outs[keep])).throughput_tok_s

    low, high = thr(4.0), thr(14.0)
    assert high < 0.5 * low


def _llama_requests_case():
    from hydra_opt.system.design import DesignPoint
    from hydra_opt.workload.models import load_model

    design = DesignPoint.from_dict({"chiplets": {"tscs_d": 9, "tscs_p": 3}, "n_mem": 12, "d2d_bw_gbps": 512,
                                    "max_batch": 16, "placement": "cp", "batching": "continuous",
                                    "scheduler": "elastic"})
    return design, load_model("llama-3-8b")


def test_the_run_fluid_replays_each_requests_output():
    """Ten requests a second apart, three of 2,500 output tokens and seven of 30: with the long ones first they
    decode through the whole window, with them last they barely start. Output-length quantiles see the same
    requests either way; the replayed requests follow the simulator (est/sim within 20 % in both orders)."""
    import numpy as np

    from hydra_opt.evaluate.estimator import estimate
    from hydra_opt.evaluate.simulator.driver import simulate_design
    from hydra_opt.workload.workload import Requests

    design, model = _llama_requests_case()
    arr, prompts = np.arange(10.0), np.full(10, 1000)
    long_first = np.array([2500] * 3 + [30] * 7)
    ratios = []
    for outs in (long_first, long_first[::-1].copy()):
        req = Requests(arr, prompts, outs)
        est = estimate(design, model, req).throughput_tok_s
        sim = simulate_design(design, model, req).throughput_tok_s
        ratios.append(est / sim)
    assert ratios == pytest.approx([1.0, 1.0], rel=0.2)


def test_ttft_quantiles_follow_the_prompt_lengths():
    """Requests far apart run alone: each one's TTFT is its own prompt's prefill, so the p90 of ten is set by the
    two long prompts (6,000 and 7,000 tokens among 150-500; the estimate's prompt-length quantiles come from the
    same ten prompts)."""
    import numpy as np

    from hydra_opt.evaluate.estimator import estimate
    from hydra_opt.evaluate.estimator.goodput import estimated_slo
    from hydra_opt.evaluate.simulator.driver import simulate_design
    from hydra_opt.workload.workload import Requests

    design, model = _llama_requests_case()
    prompts = np.array([200, 6000, 400, 300, 7000, 250, 350, 500, 450, 150])
    req = Requests(np.arange(10.0) * 20.0, prompts, np.full(10, 4))
    est = estimated_slo(estimate(design, model, req))["ttft_p90_s"]
    sim = simulate_design(design, model, req).ttft_p90_s
    assert est == pytest.approx(sim, rel=0.1)


def test_station_delays_are_the_mm1_waiting_time_of_the_mean():
    """No wait with probability 1 − u, else exponential of mean q/u: the 8 equal-probability points' mean is q
    (up to the grid), the first ⌊8(1 − u)⌋ points are 0 and the rest rise."""
    import numpy as np

    from hydra_opt.evaluate.estimator.streams import _station_delays

    q, d = _station_delays(0.05, 0.5)
    assert q == 0.05 and d.size == 8
    assert d[:4].tolist() == [0.0] * 4 and np.all(np.diff(d[4:]) > 0)
    v = np.linspace(0.0625, 0.9375, 8)[4:]
    assert d[4:] == pytest.approx(-np.log((1.0 - v) / 0.5) * 0.1)
    assert float(d.mean()) == pytest.approx(0.05, rel=0.15)
    assert _station_delays(0.0, 0.5)[1].tolist() == [0.0] and _station_delays(0.05, 0.0)[1].tolist() == [0.0]


def test_a_prompt_behind_a_long_one_waits_pollaczek_khinchine():
    """The prefill stations' stationary wait is M/G/1's, D·U·(1 + C²)/(2(1 − U)), with the prompt length's C²."""
    from hydra_opt.evaluate.estimator.markov import window_wait_s

    d = 0.03
    lam = 0.5 / d  # U = 0.5
    waits = []
    for scv in (1.0, 3.0):
        sm = StreamModel(_inputs(prompt_scv=scv, arrivals_s=(0.0, 1e5)))  # a long run reaches the stationary wait
        pk = d * 0.5 * (1.0 + scv) / (2.0 * 0.5)
        assert pk < window_wait_s(lam, 1.0 / d, scv, 0.0, 1e5)
        waits.append(sm._station_wait_s(lam))  # the tandem's pool: one server of the slowest station's d
        assert waits[-1] == pytest.approx(pk)
    assert waits[0] == pytest.approx(d)  # C² = 1: M/M/1's d·U/(1 − U)
    assert waits[1] == pytest.approx(2.0 * waits[0])


def test_an_elastic_pool_waits_as_m_g_c():
    """Elastic scheduling's prefill pool of c chiplets: Erlang C's probability of waiting and the M/G/c wait
    C(c, a)·S/(c − a)·(1 + C²)/2; one server is M/G/1 again, and the longest pool's wait counts."""
    from hydra_opt.evaluate.estimator.streams import _erlang_c

    assert _erlang_c(1, 0.4) == pytest.approx(0.4)
    assert _erlang_c(2, 1.0) == pytest.approx(1.0 / 3.0)  # M/M/2 at a = 1
    assert _erlang_c(3, 2.0) == pytest.approx(4.0 / 9.0)  # (8/6·3)/(1 + 2 + 2 + 8/6·3)
    assert _erlang_c(3, 3.0) == 1.0 and _erlang_c(4, 0.0) == 0.0
    s, lam = 0.04, 25.0  # a = 1
    two = StreamModel(_inputs(prompt_scv=1.0, arrivals_s=(0.0, 1e5), pools=((2.0, s),)))
    assert two._station_wait_s(lam) == pytest.approx(s / 3.0)
    assert two.station_wait_prob(lam) == pytest.approx(1.0 / 3.0)
    one = StreamModel(_inputs(prompt_scv=1.0, arrivals_s=(0.0, 1e5), pools=((1.0, 0.02),)))
    assert one._station_wait_s(lam) == pytest.approx(0.02)  # M/M/1 at U = 0.5: d·U/(1 − U)
    both = StreamModel(_inputs(prompt_scv=1.0, arrivals_s=(0.0, 1e5), pools=((2.0, s), (1.0, 0.02))))
    assert both._station_wait_s(lam) == pytest.approx(0.02) and both.station_wait_prob(lam) == pytest.approx(0.5)


def test_unsorted_arrivals_are_refused_as_the_simulator_refuses_them():
    import numpy as np

    from hydra_opt.evaluate.estimator import estimate
    from hydra_opt.evaluate.simulator.driver import simulate_design
    from hydra_opt.workload.workload import Requests

    design, model = _llama_requests_case()
    req = Requests(np.array([0.0, 2.0, 1.0]), np.full(3, 100), np.full(3, 10))
    for run in (estimate, simulate_design):
        with pytest.raises(ValueError, match="arrival_s must be sorted"):
            run(design, model, req)


def test_a_stream_that_reuses_a_dead_streams_id_gets_its_own_estimate():
    """The prepared-workload cache is keyed by object ids; a request stream built in a loop can take the id of one
    that was freed, and then got that one's preparation (two streams at 4 and 14 req/s estimated alike). Here the
    reuse is staged: the first stream's entry is filed under the second's id."""
    import numpy as np

    from hydra_opt.evaluate.estimator import core
    from hydra_opt.workload.workload import Requests

    _, model = _llama_requests_case()
    a = Requests(np.arange(5.0), np.full(5, 100), np.full(5, 10))
    b = Requests(np.arange(5.0) * 3.0, np.full(5, 100), np.full(5, 20))
    before = set(core._PREP_CACHE)
    pa = core.prepare(model, a)
    (key,) = set(core._PREP_CACHE) - before
    staged = tuple(id(b) if k == id(a) else k for k in key)
    core._PREP_CACHE[staged] = core._PREP_CACHE[key]
    pb = core.prepare(model, b)
    assert pb is not pa
    assert pb.trace[0].tolist() == b.arrival_s.tolist() and pb.trace[1].tolist() == [19.0] * 5


def test_handoff_is_a_prefill_latency_not_station_work():
    """The chiplet hand-offs add to a prompt's prefill (at any rate) but not to the stations' demands: the prompts
    the stations complete per second stay, the slots are held a little longer."""
    plain, hand = StreamModel(_inputs()), StreamModel(_inputs(handoff_s=0.004))
    assert hand.prefill_s(0.0) == pytest.approx(plain.prefill_s(0.0) + 0.004)
    assert hand.prefill_s(10.0) == pytest.approx(plain.prefill_s(10.0) + 0.004)  # Σ D/(1 − λD) + hand-offs
    assert hand.first_token_rate_req_s() == plain.first_token_rate_req_s()
    assert hand.capacity_req_s() < plain.capacity_req_s()


def _prep_and_io(model_name: str):
    from hydra_opt.evaluate.estimator import capacities, core
    from hydra_opt.workload.cost import COST_FIELDS
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import load_workload

    prep = core.prepare(load_model(model_name), load_workload("arxiv"))
    io = capacities.block_costs(prep.coeffs, capacities.prefill_agg(prep.stats, 1.0))[..., COST_FIELDS.index("io_bytes")]
    return prep, 0.5 * float(io.mean())


def test_handoffs_of_a_pure_model_count_the_further_stations():
    """One family: a hand-off per station beyond the first, whichever blocks each owns (½·io/link, engine's rule)."""
    from hydra_opt.evaluate.estimator.single import _handoff_s

    prep, half_io = _prep_and_io("llama-3-8b")
    nb = prep.n_blocks
    assert _handoff_s(prep, [0] * nb, 256.0) == 0.0
    three = [b * 3 // nb for b in range(nb)]
    assert _handoff_s(prep, three, 256.0) == pytest.approx(2 * half_io / 256e9)
    assert _handoff_s(prep, [b % 3 for b in range(nb)], 512.0) == pytest.approx(2 * half_io / 512e9)


def test_handoffs_with_the_simulators_omega_count_each_change_of_chiplet():
    """With the simulator's prefill Ω every block on another chiplet than the block before it hands off (the
    engine's rule), contiguous or not: three runs of blocks cost 2 hand-offs, blocks dealt round-robin nb − 1."""
    from hydra_opt.evaluate.estimator.single import _handoff_s

    prep, half_io = _prep_and_io("llama-3-8b")
    nb = prep.n_blocks
    three = tuple(b * 3 // nb for b in range(nb))
    assert _handoff_s(prep, [0] * nb, 256.0, three) == pytest.approx(2 * half_io / 256e9)
    dealt = tuple(b % 3 for b in range(nb))
    assert _handoff_s(prep, [0] * nb, 256.0, dealt) == pytest.approx((nb - 1) * half_io / 256e9)
    assert _handoff_s(prep, dealt, 256.0) == pytest.approx(2 * half_io / 256e9)  # the estimator's own count


def test_handoffs_of_a_hybrid_model_count_the_family_changes():
    """Two families: every change of family is a hand-off; a family's stations beyond its runs add more."""
    from hydra_opt.evaluate.estimator.single import _handoff_s

    prep, half_io = _prep_and_io("nemotron-h-4b")
    fams = prep.families
    kinds = sorted(set(fams))
    changes = sum(1 for i in range(1, len(fams)) if fams[i] != fams[i - 1])
    runs = {f: sum(1 for i, g in enumerate(fams) if g == f and (i == 0 or fams[i - 1] != f)) for f in kinds}
    assert changes > 0
    one_each = [kinds.index(f) for f in fams]  # one station per family
    assert _handoff_s(prep, one_each, 256.0) == pytest.approx(changes * half_io / 256e9)
    # Spread the first family over more stations than it has runs: the surplus adds hand-offs.
    f0 = kinds[0]
    spread = [len(kinds) + (i % (runs[f0] + 3)) if f == f0 else kinds.index(f) for i, f in enumerate(fams)]
    used = len({s for s, f in zip(spread, fams) if f == f0})
    assert _handoff_s(prep, spread, 256.0) == pytest.approx((changes + max(used - runs[f0], 0)) * half_io / 256e9)


@pytest.mark.parametrize("batching", ["static", "continuous", "chunked"])
def test_a_burst_of_simultaneous_arrivals_is_estimated(batching):
    """Every request at t = 0 (a closed batch, or ``arrival_interval_s: 0``): the arrival rate was (n − 1)/0 = inf
    and the stream model's run grid NaN (ValueError from the Poisson tail). A burst is now read as arriving over
    1 µs: finite, positive TPOT for every batching policy."""
    import math

    import numpy as np

    from hydra_opt.evaluate.estimator import estimate
    from hydra_opt.system.design import DesignPoint
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import Requests

    design = DesignPoint.from_dict({"chiplets": {"tscs_d": 12, "tscs_p": 6}, "n_mem": 6, "d2d_bw_gbps": 256,
                                    "max_batch": 4, "placement": "cp", "batching": batching, "scheduler": "elastic"})
    est = estimate(design, load_model("llama-3-8b"), Requests(np.zeros(8), np.full(8, 3000), np.full(8, 400)))
    assert math.isfinite(est.tpot_mean_s) and est.tpot_mean_s > 0
