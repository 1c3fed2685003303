"""The decode pipeline of dynamic schedulers: link sharing of weight streams (``estimator.links``), the placement
it reads (``core.placed_package``) and the pass curves (``single._pipeline_curves``), against closed forms and
closed simulator runs."""

from __future__ import annotations

import numpy as np
import pytest

from hydra_opt.evaluate.estimator import EstimatorOptions, core, estimate, single
from hydra_opt.evaluate.estimator.links import stream_sharing
from hydra_opt.evaluate.scenario import Scenario
from hydra_opt.evaluate import simulate
from hydra_opt.evaluate.simulator import SimModel
from hydra_opt.evaluate.simulator.build import build_system
from hydra_opt.system.design import DesignPoint
from hydra_opt.workload.models import load_model
from hydra_opt.workload.workload import Requests

CAP = 100.0


def test_a_lone_station_and_disjoint_routes_share_nothing():
    assert stream_sharing([0, 0], [(0, 1), (1,)], [50.0, 80.0], [CAP, CAP]) == {0: 1.0}
    assert stream_sharing([0, 1], [(0,), (1,)], [50.0, 80.0], [CAP, CAP]) == {0: 1.0, 1: 1.0}


def test_two_stations_on_one_link_halve_it():
    assert stream_sharing([0, 1], [(0,), (0,)], [50.0, 80.0], [CAP, CAP]) == {0: 2.0, 1: 2.0}


def test_sharing_follows_the_time_share_of_the_other_station():
    # Station 0 streams block 0 over link 0 and block 1 over link 1 for equal times; station 1 streams over link 0
    # only. Station 1 meets station 0 half of the time: capacity/(1 + 0.5), factor 1.5. Station 0's first block
    # meets station 1 always (half the capacity, twice the time), its second nothing: (2 + 1)/2 = 1.5.
    got = stream_sharing([0, 0, 1], [(0,), (1,), (0,)], [50.0, 50.0, 30.0], [CAP, CAP])
    assert got == {0: pytest.approx(1.5), 1: pytest.approx(1.5)}
    # The slowest resource of a route sets its rate: a port twice as fast as the link leaves the link in charge.
    got = stream_sharing([0, 1], [(0, 2), (0, 2)], [50.0, 50.0], [CAP, CAP, 2 * CAP])
    assert got == {0: pytest.approx(2.0), 1: pytest.approx(2.0)}


def _design(**kw) -> DesignPoint:
    base = dict(counts=(("tscs_d", 7), ("tscs_p", 7)), n_mem=10, d2d_bw_gbps=256.0, max_batch=16,
                batching="chunked", scheduler="elastic")
    return DesignPoint(**{**base, **kw})


def _requests(n: int, prompt: int, out: int, gap_s: float) -> Requests:
    return Requests(np.arange(n) * gap_s, np.full(n, prompt), np.full(n, out))


@pytest.mark.parametrize("kw", [{}, dict(counts=(("tscs_d", 3), ("tscs_p", 13)), n_mem=4, d2d_bw_gbps=512.0),
                                dict(placement="rr"), dict(counts=(("tscs_d", 14), ("tscs_p", 2)), n_mem=6, max_batch=4)])
def test_the_placed_package_is_the_simulators(kw):
    """The slots, weight map and prefill Ω the estimator reads are those the simulator builds (same run)."""
    d, model = _design(**kw), load_model("llama-3-8b")
    req = _requests(4, 3000, 300, 1.0)
    d2, m2, w2 = core.resolve(d, model, req)
    scn = Scenario()
    prep = core.prepare(m2, w2, scenario=scn, options=EstimatorOptions(), precision=d.precision)
    chips, mems, wmap = core.placed_package(d, prep, preset=scn.placement_preset, library=scn.library())
    ctx = int(round(float(np.mean(req.prompt_tokens + req.output_tokens))))
    system, _ = build_system(d, model, SimModel.from_model(model, d.precision), library=scn.library(),
                             placement_preset=scn.placement_preset, context_tokens=ctx)
    assert list(chips) == list(system.chip_node) and list(mems) == list(system.mem_node)
    assert list(wmap) == list(system.block_mem)
    # ... and the prefill Ω whose hand-offs the prefill pass pays is the simulator's own.
    omega = core.prefill_omega(d, prep, preset=scn.placement_preset, library=scn.library())
    assert list(omega) == [system.omega[("prefill", b)] for b in range(len(omega))] and len(omega) == len(wmap)


def _di_ld(d: DesignPoint, req: Requests):
    opts, scn = EstimatorOptions(), Scenario()
    d2, m2, w2 = core.resolve(d, load_model("llama-3-8b"), req)
    prep = core.prepare(m2, w2, scenario=scn, options=opts, precision=d.precision)
    di = single._design(d2, prep, opts, scn.library())
    return di, single._loads(di, opts, prep.n_blocks)


def test_pipeline_curves_closed_forms():
    """A lone pass meets nobody (X(1) = 1/ΣD); no pipeline passes its slowest station, and a pass lasts longer
    the more batches share the stations; one decode station shares with nobody, so it serves 1/D whatever the
    batches."""
    di, ld = _di_ld(_design(), _requests(4, 16, 400, 0.02))
    assert di.routes is not None
    for xs, base in zip(single._pipeline_curves(di, ld, 14), (ld["dec_ref"], ld["dec1"])):
        d = [x for x in base if x > 0]
        assert xs[0] == pytest.approx(1.0 / sum(d), rel=1e-12)
        assert all(x <= 1.0 / max(d) * (1 + 1e-12) for x in xs)
        tau = [n / x for n, x in enumerate(xs, 1)]  # a pass never shortens with more batches in flight
        assert all(b >= a * (1 - 1e-12) for a, b in zip(tau, tau[1:]))
        assert xs[-1] < 1.0 / max(d) * 0.95  # all stations busy: their streams share links, each task slower
    di, ld = _di_ld(_design(counts=(("tscs_d", 1), ("tscs_p", 13))), _requests(4, 16, 400, 0.02))
    f_ref, f_one = single._sharing(di, ld)
    assert set(f_ref) == {1.0} and set(f_one) == {1.0}
    d1 = max(ld["dec1"])
    assert single._pipeline_curves(di, ld, 6)[1] == pytest.approx([1.0 / d1] * 6, rel=1e-12)


@pytest.mark.parametrize("n, prompt, out, gap, kw, rel", [
    # One-member batches pipelining through 7 decode chiplets without queueing (the simulator: a lone pass's time);
    # an M/M-style queue at each station put this at +22 %.
    (4, 16, 400, 0.02, {}, 0.15),
    # 14 such batches: every chiplet busy, their weight streams share links (simulated 75.8 ms, 58.7 without).
    (14, 16, 400, 0.02, {}, 0.08),
    # Long prompts 3 s apart on 9 decode chiplets: about three decoding at a time.
    (6, 3000, 300, 3.0, dict(counts=(("tscs_d", 9), ("tscs_p", 3)), n_mem=12, max_batch=4), 0.08),
])
def test_closed_runs_against_the_simulator(n, prompt, out, gap, kw, rel):
    d, model, req = _design(**kw), load_model("llama-3-8b"), _requests(n, prompt, out, gap)
    sim = simulate(d, model, req, scenario=Scenario()).tpot_mean_s
    est = estimate(d, model, req, scenario=Scenario()).tpot_mean_s
    assert est == pytest.approx(sim, rel=rel), (est, sim)
