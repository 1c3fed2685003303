"""A closed-form evaluator for the dse tests (fast, deterministic; not the product evaluator).

Throughput grows with decode chiplets, batch and D2D bandwidth and is capped by memory bandwidth; TTFT falls with
prefill chiplets and grows with the batch cap — a real trade-off, so fronts have several points. The "simulation"
perturbs the estimate by a deterministic ±10 % so estimate and simulation disagree a little, as they do for real.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from typing import Any

from hydra_opt.evaluate.evaluators import SimOutcome


def closed_form(design: dict[str, Any]) -> tuple[float, float]:
    counts = design["chiplets"]
    n_p = sum(v for k, v in counts.items() if k.endswith("_p"))
    n_d = sum(v for k, v in counts.items() if not k.endswith("_p"))
    b = design.get("max_batch", 8)
    bw = design.get("d2d_bw_gbps", 256)
    tp = min(n_d * 40.0 * math.sqrt(b), design["n_mem"] * 120.0 * (bw / 256.0) ** 0.5)
    ttft = 4.0 / max(n_p, 1) + 0.02 * b
    return tp, ttft


def wiggle(design: dict[str, Any]) -> float:
    h = int(hashlib.sha256(json.dumps(design, sort_keys=True).encode()).hexdigest()[:8], 16)
    return 1.0 + 0.1 * math.sin(h)


class FakeEvaluator:
    """Evaluator protocol implementation on :func:`closed_form`."""

    def __init__(self, spec: Any = None) -> None:
        self.spec = spec
        self.sim_delay_s = float(os.environ.get("HYDRA_OPT_FAKE_SIM_DELAY_S", "0"))
        self.n_simulated = 0

    def design(self, design: dict[str, Any]) -> dict[str, Any]:
        assert "chiplets" in design and "n_mem" in design
        return dict(design)

    def load(self, model: str, workload: str) -> tuple[Any, Any]:
        return model, workload

    def feasibility(self, design: dict[str, Any], model: Any) -> list[str]:
        # "weights do not fit": fewer than 3 memory chiplets (mimics a capacity check).
        return ["memory: model weights need >= 3 memory chiplets"] if design["n_mem"] < 3 else []

    def estimate(self, design: dict[str, Any], model: Any, workload: Any) -> dict[str, float]:
        tp, ttft = closed_form(design)
        return {"throughput_tok_s": tp, "ttft_mean_s": ttft, "tpot_mean_s": 1.0 / max(tp, 1e-9), "area_mm2": 100.0}

    def simulate(self, design: dict[str, Any], model: Any, workload: Any, *, seed: int) -> SimOutcome:
        if self.sim_delay_s:
            time.sleep(self.sim_delay_s)
        self.n_simulated += 1
        tp, ttft = closed_form(design)
        w = wiggle(design)
        return SimOutcome({"throughput_tok_s": tp * w, "ttft_mean_s": ttft / w, "tpot_mean_s": 1.0 / (tp * w),
                           "area_mm2": 100.0})


def make(spec: Any) -> FakeEvaluator:
    return FakeEvaluator(spec)


class LoadingFakeEvaluator(FakeEvaluator):
    """:class:`FakeEvaluator` that loads the real model and workload (files, traces) like the product evaluator,
    so the study fingerprint sees their content; estimates stay closed-form."""

    def load(self, model: str, workload: str) -> tuple[Any, Any]:
        from hydra_opt.workload.models import load_model
        from hydra_opt.workload.workload import load_workload

        return load_model(model), load_workload(workload)


def make_loading(spec: Any) -> LoadingFakeEvaluator:
    return LoadingFakeEvaluator(spec)
