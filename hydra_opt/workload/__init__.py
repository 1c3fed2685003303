"""workload layer: precisions, models (blocks and their linear op counts), traces, length profiles, arrivals,
workloads. See docs/workload.md. The package exports the public names of its modules (each module's ``__all__`` is
the one list)."""

from __future__ import annotations

from hydra_opt.workload import arrivals, cost, models, precision, profiles, traces, workload
from hydra_opt.workload.arrivals import *  # noqa: F403
from hydra_opt.workload.cost import *  # noqa: F403
from hydra_opt.workload.models import *  # noqa: F403
from hydra_opt.workload.precision import *  # noqa: F403
from hydra_opt.workload.profiles import *  # noqa: F403
from hydra_opt.workload.traces import *  # noqa: F403
from hydra_opt.workload.workload import *  # noqa: F403

__all__: list[str] = [
    name for module in (cost, precision, models, traces, profiles, arrivals, workload) for name in module.__all__
]
