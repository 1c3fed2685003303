"""Block fusion (``SimOptions.fuse_blocks``): same answers where fusion cannot change the schedule, fewer events
where Ω puts consecutive blocks on one chiplet, and the invariants hold either way."""

from __future__ import annotations

import numpy as np

from hydra_opt.evaluate import Scenario, SimOptions, simulate
from hydra_opt.evaluate.simulator import SimModel, run_system
from tests.sim_synthetic import single_chiplet_system

DESIGN = "studies/designs/fig10-nemotron-h-4b-chat-mt-cp.yaml"


def _two_block_model(s1: float, s2: float, macs_per_s: float = 1e12) -> SimModel:
    from hydra_opt.workload.cost import AGG_NAMES, COST_FIELDS

    c = np.zeros((2, len(COST_FIELDS), len(AGG_NAMES)))
    fi, one = COST_FIELDS.index("macs"), AGG_NAMES.index("one")
    c[0, fi, one], c[1, fi, one] = s1 * macs_per_s, s2 * macs_per_s
    z = np.zeros(2)
    return SimModel(name="two", families=("attention", "attention"), coeffs=c, kv_bytes_per_token=z,
                    state_bytes=z, weight_bytes=z)


def _system_two_blocks():
    sys_ = single_chiplet_system()
    sys_.block_mem = [0, 0]
    sys_.omega = {(p, b): 0 for p in ("prefill", "decode") for b in (0, 1)}
    return sys_


def test_fused_equals_unfused_when_one_batch_at_a_time():
    # One chiplet, batch cap 1, one batch in flight: a pass is the two blocks back to back either way.
    rng = np.random.default_rng(3)
    n = 400
    arr = np.cumsum(rng.exponential(0.05, n))
    prompt, out = rng.integers(1, 50, n), rng.integers(1, 4, n)
    res = []
    for fuse in (False, True):
        opt = SimOptions(fuse_blocks=fuse, debug=True)
        r = run_system(_system_two_blocks(), _two_block_model(0.004, 0.006), arr, prompt, out, opt,
                       scenario=Scenario(max_batches=1),
                       batching="static", max_batch=1)
        res.append(r)
    a, b = res
    assert b.events < a.events  # one task per pass instead of two
    np.testing.assert_allclose(b.raw.finish_s, a.raw.finish_s, rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.raw.first_token_s, a.raw.first_token_s, rtol=0, atol=1e-12)


def test_fusion_cuts_events_on_a_cp_design_and_keeps_invariants():
    opt, scn = SimOptions(debug=True), Scenario.paper(horizon_s=4.0, n_requests=400)
    a = simulate(DESIGN, "nemotron-h-4b", "hydra-chat", scenario=scn, options=opt)
    b = simulate(DESIGN, "nemotron-h-4b", "hydra-chat", scenario=scn, options=opt.with_(fuse_blocks=True))
    assert b.events < 0.9 * a.events
    for r in (a, b):
        assert r.tokens_emitted == int(r.raw.generated.sum()) + r.tokens_discarded
        assert r.arrived_requests == (r.completed_requests + r.running_requests + r.queued_requests
                                      + r.rejected_requests)
    # Same workload served: throughput within 15 % (fusion changes only the interleaving of batches on a chiplet).
    assert abs(b.throughput_tok_s / a.throughput_tok_s - 1) < 0.15
