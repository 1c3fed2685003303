"""Fast estimators (HYDRA §V): the Markov/fluid model and the roofline baseline (docs/estimator.md).

``estimate(design, model, workload)`` prices work with ``hydra_opt.evaluate.opcost`` (the one cost model),
models the pipeline of batch slots with mean-value analysis, and the runtime dynamics with an occupancy CTMC
(stationary load) or a fluid model of the slots (overload over a finite run); ``core`` prepares the inputs and
``single`` is the one solver. ``estimate_space``/``space_arrays`` run the same solver over a whole enumerated
design space (each distinct design once, shared tables cached); ``roofline_estimate`` is the three-bound baseline.
"""

from __future__ import annotations

from hydra_opt.evaluate import _accel

_accel.guard(__name__)  # before _kernels is imported (by markov, single): never run a stale compiled module

from hydra_opt.evaluate.estimator.single import estimate
from hydra_opt.evaluate.estimator.result import Estimate, EstimatorOptions
from hydra_opt.evaluate.estimator.roofline import roofline_estimate

__all__ = ["estimate", "Estimate", "EstimatorOptions", "roofline_estimate"]

from hydra_opt.evaluate.estimator.vectorised import estimate_space, space_arrays  # noqa: E402

__all__ += ["estimate_space", "space_arrays"]
