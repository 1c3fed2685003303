"""runtime layer: batching (static, continuous, chunked prefill; paged memory), the Ω task mapping and the task
schedulers. The package exports the public names of its modules (each module's ``__all__`` is the one list)."""

from __future__ import annotations

from hydra_opt.runtime import batching, mapping, scheduling
from hydra_opt.runtime.batching import *  # noqa: F403
from hydra_opt.runtime.mapping import *  # noqa: F403
from hydra_opt.runtime.scheduling import *  # noqa: F403

__all__: list[str] = [*batching.__all__, *mapping.__all__, *scheduling.__all__]
