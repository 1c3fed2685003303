"""The artifact's static mapper (runtime.mapping.variance_greedy_mapping, SimOptions.mapping = "artifact")."""

from __future__ import annotations

import numpy as np
import pytest

from hydra_opt.config import ConfigError
from hydra_opt.evaluate import Scenario, SimOptions, simulate
from hydra_opt.runtime.mapping import map_tasks, spatial_pipeline_mapping, variance_greedy_mapping

DESIGN = "studies/designs/fig10-nemotron-h-4b-chat-mt-cp.yaml"


def test_variance_greedy_is_one_pass_in_model_order():
    # Two identical chiplets, costs 1, 1, 2: least variance puts 1 and 1 apart, then 2 on chiplet 0 (tie: lower
    # load, then lower index) — loads (3, 1); the bottleneck mapper finds (2, 2).
    t = np.array([[1.0, 1.0], [1.0, 1.0], [2.0, 2.0]])
    v = variance_greedy_mapping(t)
    assert v.assign == (0, 1, 0)
    assert v.load_s == (3.0, 1.0) and v.bottleneck_s == 3.0
    assert map_tasks(t).bottleneck_s == 2.0


def test_variance_counts_every_chiplet_of_the_phase_and_respects_compatibility():
    # Task 0 may only run on chiplet 2; task 1 on 0 or 1. The variance is over all three chiplets' loads.
    t = np.array([[np.inf, np.inf, 5.0], [1.0, 3.0, np.inf]])
    v = variance_greedy_mapping(t)
    assert v.assign == (2, 1)  # loads (0, 3, 5) have less variance than (1, 0, 5)
    with pytest.raises(ValueError):
        variance_greedy_mapping(np.array([[np.inf, np.inf]]))


def test_spatial_pipeline_mapping_method_switch():
    costs = {"prefill": np.array([[1.0, 1.0], [1.0, 1.0], [2.0, 2.0]])}
    assert spatial_pipeline_mapping(costs, method="variance")[("prefill", 2)] == 0
    assert sorted(spatial_pipeline_mapping(costs).values()) != [0, 0, 1]
    with pytest.raises(ValueError):
        spatial_pipeline_mapping(costs, method="lpt")


def test_simulate_with_the_artifact_mapping():
    scn = Scenario.paper(horizon_s=6.0, n_requests=600)
    a = simulate(DESIGN, "nemotron-h-4b", "hydra-chat", scenario=scn, options=SimOptions(mapping="artifact"))
    b = simulate(DESIGN, "nemotron-h-4b", "hydra-chat", scenario=scn)
    assert "artifact" in a.options["build"]["mapping"] and "artifact" not in b.options["build"]["mapping"]
    assert a.completed_requests + a.running_requests + a.queued_requests > 0
    assert (a.throughput_tok_s, a.events) != (b.throughput_tok_s, b.events)  # a different Ω changes the run
    with pytest.raises(ConfigError):
        SimOptions(mapping="variance")
