"""The runtime-policy vocabulary: batching, task-scheduler and placement names, spelled once.

Every layer that names a policy (the design, search spaces, the simulator's runtime, the estimator, the CLI) takes
its names from here, so adding a policy (e.g. a ``chunked`` batcher) is one edit plus its implementation.
"""

from __future__ import annotations

__all__ = ["BATCHINGS", "DYNAMIC_SCHEDULERS", "PLACEMENTS", "POLICY_CHOICES", "SCHEDULERS", "scheduler_code"]

#: Request batching: ``static`` (a batch starts full and runs to completion), ``continuous`` (iteration-level) or
#: ``chunked`` (continuous with chunked prefill: one pass carries decodes and prefill chunks within the token budget).
BATCHINGS: tuple[str, ...] = ("static", "continuous", "chunked")
#: Task schedulers (``hydra_opt.runtime.scheduling``): the static mapping Ω, FCFS, work stealing, elastic Ω.
SCHEDULERS: tuple[str, ...] = ("static", "fcfs", "worksteal", "elastic")
#: Schedulers that move work between chiplets of a type at run time (the estimator balances their loads).
DYNAMIC_SCHEDULERS: tuple[str, ...] = ("fcfs", "worksteal", "elastic")
#: Chiplet placement (``hydra_opt.system.placement``): communication-aware, round-robin, random.
PLACEMENTS: tuple[str, ...] = ("cp", "rr", "random")
#: Design field → allowed names (the policy fields a design, a search space or an override may set).
POLICY_CHOICES: dict[str, tuple[str, ...]] = {"batching": BATCHINGS, "scheduler": SCHEDULERS, "placement": PLACEMENTS}


def scheduler_code(name: str) -> int:
    """Integer code of a scheduler name (its index in :data:`SCHEDULERS`; the estimator's vectorised arrays)."""
    return SCHEDULERS.index(name)
