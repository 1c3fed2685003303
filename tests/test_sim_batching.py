"""Batching, preemption, flows and schedulers through the real engine, on tiny synthetic systems."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from hydra_opt.evaluate.scenario import SCENARIO_KEYS, Scenario
from hydra_opt.evaluate.simulator import SimOptions, SimSystem, run_system
from hydra_opt.hardware.noi import Mesh
from hydra_opt.runtime.batching import PagedMemory
from hydra_opt.runtime.scheduling import ChipletView, ElasticScheduler, FcfsScheduler, WorkStealingScheduler
from sim_synthetic import chiplet, memory, one_block_model, single_chiplet_system

S = 0.01


def _run(arr, prompt, out, *, batching, max_batch, model=None, system=None, **opt):
    return run_system(
        system or single_chiplet_system(), model or one_block_model(service_s=S), np.asarray(arr, dtype=float),
        np.asarray(prompt), np.asarray(out), SimOptions(debug=True, **{k: v for k, v in opt.items() if k not in SCENARIO_KEYS}),
        scenario=Scenario(warmup_frac=0.0, **{k: v for k, v in opt.items() if k in SCENARIO_KEYS}),
        batching=batching, max_batch=max_batch,
    )


def test_static_batch_runs_to_completion_without_refill():
    # B=2; three requests at t=0 with 1, 3, 3 output tokens; every pass costs S on the lone chiplet.
    res = _run([0, 0, 0], [4, 4, 4], [1, 3, 3], batching="static", max_batch=2, max_batches=1)
    fin = res.raw.finish_s
    # Batch {0,1}: r0 leaves after its prefill pass (S), r1 after 3 passes (3S); nobody joins. r2 then runs alone
    # (partial batch after the last arrival): 3 more passes.
    np.testing.assert_allclose(fin, [S, 3 * S, 6 * S])
    np.testing.assert_allclose(res.raw.first_token_s, [S, S, 4 * S])
    assert res.tokens_emitted == 7


def test_continuous_batching_refills_at_pass_boundaries():
    res = _run([0, 0, 0], [4, 4, 4], [1, 3, 3], batching="continuous", max_batch=2, max_batches=1)
    # Prefill pass {r0, r1} (0-S): r0 done; r2 admitted into the free prefill stream, r1 moves to the decode stream.
    # Both streams queue on the lone chiplet: r2's prefill S-2S, r1's decode 2S-3S (r2 waits for the decode stream
    # to finish its pass). Decode {r1, r2} 3S-4S: r1 done. Decode {r2} 4S-5S.
    np.testing.assert_allclose(res.raw.finish_s, [S, 4 * S, 5 * S])
    np.testing.assert_allclose(res.raw.first_token_s, [S, S, 2 * S])


def test_static_waits_for_a_full_batch():
    # Two arrivals then a third at 1 s: with B=3 nothing starts before t=1.
    res = _run([0, 0.1, 1.0], [1, 1, 1], [1, 1, 1], batching="static", max_batch=3)
    np.testing.assert_allclose(res.raw.first_token_s, [1 + S] * 3)


def test_ttft_definitions():
    res = _run([0, 0.1, 1.0], [1, 1, 1], [1, 1, 1], batching="static", max_batch=3)
    assert res.ttft_mean_s == pytest.approx(np.mean([1 + S, 0.9 + S, S]))
    res_bs = _run([0, 0.1, 1.0], [1, 1, 1], [1, 1, 1], batching="static", max_batch=3, ttft_from="batch_start")
    assert res_bs.ttft_mean_s == pytest.approx(S)


def _kv_system(capacity_tokens: int, kv_per_token: float = 1000.0):
    mem = memory(capacity_gb=capacity_tokens * kv_per_token / 2**30)
    return single_chiplet_system(mem=mem)


@pytest.mark.parametrize("restart", [False, True])
def test_preemption_frees_memory_and_every_request_completes(restart):
    # Memory holds 96 tokens of KV; 4 requests of 16-token prompts that each grow to 56 tokens.
    kvt = 1000.0
    model = one_block_model(service_s=S, kv_bytes_per_token=kvt)
    n = 4
    res = _run([0] * n, [16] * n, [40] * n, batching="continuous", max_batch=4, model=model,
               system=_kv_system(96, kvt), page_tokens=8, preempt_restart=restart,
               preempt_requeue="back" if restart else "front")
    assert res.completed_requests == n
    assert res.preemptions > 0
    raw = res.raw
    assert np.all(raw.generated == 40)
    assert res.tokens_emitted == n * 40 + res.tokens_discarded
    assert (res.tokens_discarded > 0) == restart
    assert raw.mem_peak.max() <= raw.mem_capacity.max() + 1e-6


def test_victim_is_the_request_with_fewest_generated_tokens():
    kvt = 1000.0
    model = one_block_model(service_s=S, kv_bytes_per_token=kvt)
    # r0 starts alone and runs ahead; r1 arrives later; when memory runs out, r1 (fewer tokens) is preempted.
    res = _run([0, 0.05], [8, 8], [60, 60], batching="continuous", max_batch=2, model=model,
               system=_kv_system(96, kvt), page_tokens=8)
    assert res.raw.preemptions[0] == 0 and res.raw.preemptions[1] > 0
    assert res.completed_requests == 2


def test_paged_memory_accounting():
    mem = PagedMemory([1000.0, 1000.0], [10.0, 0.0], [5.0, 50.0], page_tokens=4)
    assert mem.ensure(0, 5)  # 2 pages: 80 + 5 on memory 0, 50 on memory 1
    np.testing.assert_allclose(mem.used, [85.0, 50.0])
    assert mem.ensure(0, 8)  # still 2 pages
    np.testing.assert_allclose(mem.used, [85.0, 50.0])
    assert mem.ensure(0, 9)
    np.testing.assert_allclose(mem.used, [125.0, 50.0])
    assert not mem.ensure(1, 1000)  # would overflow memory 0: nothing changes
    np.testing.assert_allclose(mem.used, [125.0, 50.0])
    mem.free(0)
    np.testing.assert_allclose(mem.used, [0.0, 0.0])


def _two_chiplet_system(link_gbps: float, port_gbps: float) -> SimSystem:
    # Memory at node 0 of a 3x1 mesh, chiplets at nodes 1 and 2: both flows cross the port and link 0->1.
    mesh = Mesh(3, 1, link_gbps, 1e-9)
    chips = [chiplet("a"), chiplet("b")]
    return SimSystem(chiplets=chips, chip_node=[1, 2], memories=[memory(bw_gbps=port_gbps)], mem_node=[0],
                     block_mem=[0], mesh=mesh, omega={("prefill", 0): 0, ("decode", 0): 0})


def test_lone_flow_time_is_bytes_over_bandwidth_plus_hops():
    nbytes = 1e9
    model = one_block_model(service_s=1e-6, mem_bytes_const=nbytes)
    res = _run([0.0], [1], [1], batching="static", max_batch=1, model=model, system=_two_chiplet_system(100.0, 400.0))
    # Chiplet 0 (node 1), one hop from the memory: 1e9 B at 100 GB/s + 1 ns.
    assert res.raw.finish_s[0] == pytest.approx(nbytes / 100e9 + 1e-9, rel=1e-9)


@pytest.mark.parametrize("sharing", ["fair", "equal", "maxmin"])
def test_two_flows_sharing_a_link_each_get_half(sharing):
    nbytes = 1e9
    model = one_block_model(service_s=1e-6, mem_bytes_const=nbytes)
    sys = _two_chiplet_system(100.0, 400.0)
    # Two requests at t=0, batch cap 1, FCFS round robin puts them on the two chiplets at once; both flows cross
    # link 0->1 (100 GB/s): each drains at 50 GB/s.
    res = run_system(sys, model, np.zeros(2), np.ones(2, dtype=int), np.ones(2, dtype=int),
                     SimOptions(sharing=sharing, debug=True), scenario=Scenario(warmup_frac=0.0), batching="static", max_batch=1,
                     scheduler="fcfs")
    hops = np.array([1, 2])
    np.testing.assert_allclose(res.raw.finish_s, nbytes / 50e9 + hops * 1e-9, rtol=1e-9)


class _T:
    def __init__(self, family="mamba", phase="decode", mem_xy=(0, 0)):
        self.family, self.phase, self.mem_xy = family, phase, mem_xy


def _view(n=3):
    return ChipletView(xy=[(i + 1, 0) for i in range(n)], native={("mamba", "decode"): list(range(n)),
                                                                 ("mamba", "prefill"): list(range(n))},
                       family_any={"mamba": list(range(n))})


def test_fcfs_is_round_robin():
    v, s = _view(), FcfsScheduler()
    assert [s.choose(_T(), 0, v) for _ in range(5)] == [0, 1, 2, 0, 1]


def test_elastic_keeps_omega_when_balanced_and_moves_under_imbalance():
    v = _view()
    s = ElasticScheduler({("decode", 0): 2}, spread=2)
    v.load[:] = [1, 1, 2]
    assert s.choose(_T(), 0, v) == 2
    v.load[:] = [1, 0, 3]
    assert s.choose(_T(), 0, v) == 1  # least loaded
    v.load[:] = [0, 0, 3]
    assert s.choose(_T(mem_xy=(0, 0)), 0, v) == 0  # tie broken by distance to the memory


def test_work_stealing_takes_from_the_most_loaded_queue():
    v = _view()
    s = WorkStealingScheduler()
    a, b, c = _T(), _T(), _T()
    v.queues[1].extend([a])
    v.queues[2].extend([b, c])
    v.load[:] = [0, 2, 3]
    assert s.steal(0, v) == (2, c)
    v.queues = [deque() for _ in range(3)]
    assert s.steal(0, v) is None


def test_fair_sharing_water_fills_each_resource():
    from hydra_opt.evaluate.simulator.flows import EqualShareFlows

    fl = EqualShareFlows([100.0, 1000.0], 1, waterfill=True)
    fl.add(1, (0,), 1000.0, 0.0, cap_bps=10.0)
    fl.add(2, (0, 1), 1000.0, 0.0, cap_bps=50.0)
    out = dict((g, t) for t, g, _ in fl.add(3, (0,), 1000.0, 0.0))
    # Level on resource 0: flow 1 keeps its 10, flows 2 and 3 would split 90 → 45 each (below flow 2's cap 50).
    assert fl.flows[1].rate == 10.0 and fl.flows[2].rate == 45.0 and fl.flows[3].rate == 45.0
    assert out[3] == pytest.approx(1000.0 / 45.0)
    # When flow 3 leaves, flow 2 returns to its own cap.
    fl.drain(3, 1.0)
    assert fl.flows[2].rate == 50.0
    eq = EqualShareFlows([100.0], 1)
    eq.add(1, (0,), 1.0, 0.0, cap_bps=10.0)
    eq.add(2, (0,), 1.0, 0.0)
    assert eq.flows[2].rate == 50.0  # equal split: no redistribution of flow 1's unused share


def test_elastic_trades_queue_length_against_distance():
    v = ChipletView(xy=[(1, 0), (9, 0), (2, 0)], native={("mamba", "decode"): [0, 1, 2]},
                    family_any={"mamba": [0, 1, 2]})
    s = ElasticScheduler({("decode", 0): 2}, spread=2, distance_weight=0.25)
    v.load[:] = [1, 0, 4]
    # Chiplet 1 is idle but 9 hops from the memory (score 2.25); chiplet 0 has one task, 1 hop away (1.25).
    assert s.choose(_T(mem_xy=(0, 0)), 0, v) == 0
    s0 = ElasticScheduler({("decode", 0): 2}, spread=2, distance_weight=0.0)
    assert s0.choose(_T(mem_xy=(0, 0)), 0, v) == 1


# -- the elastic steal's cost (ElasticScheduler._gains; docs/simulator.md "Task schedulers") ----------------------
def _steal_case(scheduler: str, arrival_s, prompt: int, output: int, *, chiplets=(13, 7), n_mem=4, bw=512):
    """Llama-3-8B on 13 decode + 7 prefill chiplets, 4 HBMs, 512 GB/s (by default), one request per batch."""
    import numpy as np

    from hydra_opt.evaluate.simulator.driver import simulate_design
    from hydra_opt.system.design import DesignPoint
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import Requests

    design = DesignPoint.from_dict({"chiplets": {"tscs_d": chiplets[0], "tscs_p": chiplets[1]}, "n_mem": n_mem,
                                    "d2d_bw_gbps": bw,
                                    "max_batch": 1, "placement": "cp", "batching": "continuous",
                                    "scheduler": scheduler, "package": {"grid_w": 6, "grid_h": 4,
                                                                        "slot_area_mm2": 144.0}})
    n = len(arrival_s)
    req = Requests(np.asarray(arrival_s, dtype=float), np.full(n, prompt), np.full(n, output))
    return simulate_design(design, load_model("llama-3-8b"), req)


def test_elastic_does_not_steal_bandwidth_bound_decode():
    """Four requests decoding at once, one per batch: stealing by queue length alone pulled every block's weights
    over long shared routes to chiplets 0-2 (TPOT 44.9 ms against 17.5 ms static, measured); a steal now has to
    finish sooner on the thief, and a decode task whose weights stream no faster there stays."""
    static = _steal_case("static", [0.0] * 4, 512, 100).tpot_mean_s
    elastic = _steal_case("elastic", [0.0] * 4, 512, 100).tpot_mean_s
    assert elastic < 1.15 * static


def test_elastic_still_steals_compute_bound_prefill():
    """Six 3,000-token prompts 0.1 s apart on 6 prefill chiplets (12 + 6, 6 HBMs, 256 GB/s): the later prompts'
    prefill blocks move to idle prefill chiplets (every first token as early as a lone prompt's: 2.057 s measured),
    where static scheduling queues them behind the first ones (4.61 s)."""
    case = {"chiplets": (12, 6), "n_mem": 6, "bw": 256}
    arr = [0.1 * i for i in range(6)]
    static = _steal_case("static", arr, 3000, 2, **case).ttft_p90_s
    elastic = _steal_case("elastic", arr, 3000, 2, **case).ttft_p90_s
    lone = _steal_case("elastic", [0.0], 3000, 2, **case).ttft_p90_s
    assert elastic < 0.6 * static
    assert elastic == pytest.approx(lone, rel=0.02)


def test_the_engine_steals_as_the_reference_scheduler():
    """The engine evaluates ElasticScheduler on its own tables; a subclass is run through the reference's
    choose/steal on the view (with the view's task_s/rest_s): the same run, number for number."""
    import numpy as np

    from hydra_opt.evaluate.simulator import run as run_mod
    from hydra_opt.runtime import scheduling

    class Reference(ElasticScheduler):
        pass

    arr = np.cumsum(np.random.default_rng(3).exponential(0.05, 40))
    table = _steal_case("elastic", arr, 700, 60)
    orig = run_mod.make_scheduler

    def reference(name, omega, **kw):
        s = orig(name, omega, **kw)
        return Reference(omega, lend=s.lend, spread=s.spread) if type(s) is scheduling.ElasticScheduler else s

    run_mod.make_scheduler = reference
    try:
        ref = _steal_case("elastic", arr, 700, 60)
    finally:
        run_mod.make_scheduler = orig
    assert ref.tpot_mean_s == table.tpot_mean_s and ref.ttft_p90_s == table.ttft_p90_s
    assert ref.chiplet_busy_frac == table.chiplet_busy_frac


def test_gains_compares_finish_on_the_thief_with_the_wait_on_the_victim():
    """The reference's rule on a hand-made view: a task taking 1 s on the victim behind a running task with 0.5 s
    left moves to a thief where it takes 1.4 s (< 1.5), not to one where it takes 1.6 s; without the view's
    costs, or with cost_aware=False, queue length alone decides."""
    v = _view()
    a, b = _T(), _T()
    v.queues[2].extend([a, b])
    v.load[:] = [0, 0, 3]
    s = ElasticScheduler({("decode", 0): 2}, spread=2)
    assert s.steal(0, v) == (2, b)  # no costs on the view
    for thief_s, moves in ((1.4, True), (1.6, False)):
        v.task_s = lambda task, c, extra, t=thief_s: t if c == 0 else 1.0
        v.rest_s = lambda c: 0.5 if c == 2 else 0.0
        # b waits for the running task (0.5) and a (1.0), then runs 1.0: 2.5 on the victim
        assert (s.steal(0, v) is not None) is True
        v.queues[2].pop()  # only a: it waits 0.5, runs 1.0 → 1.5
        assert (s.steal(0, v) == (2, a)) is moves
        v.queues[2].append(b)
    assert ElasticScheduler({("decode", 0): 2}, spread=2, cost_aware=False).steal(0, v) == (2, b)
