"""The simulator's engine knobs: how the event-driven engine models a run, never *which* run it is.

What run is served and measured (horizon, requests and arrivals, TTFT and window rules, precision, presets, token
budget, pipeline depth, preemption rules) is the :class:`~hydra_opt.evaluate.scenario.Scenario`, which the
estimator reads too; design policies (batching, scheduler, placement, max batch) are the design's. Defaults are
physically clean (docs/simulator.md): links and HBM ports shared by max-min fairness, one task per block.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from hydra_opt.config.errors import ConfigError

__all__ = ["SimOptions"]

_CHOICES = {
    "sharing": ("fair", "maxmin", "equal", "none"),
    "mapping": ("bottleneck", "artifact"),
}


@dataclass(frozen=True)
class SimOptions:
    """How the simulator's engine models a run.

    Attributes:
        hop_latency_s: NoI per-hop latency, s (10 ns, the artifact's link latency).
        sharing: NoI bandwidth sharing: ``fair`` (default; per-resource max-min water-filling, incremental —
            ``simulator/flows.py``), ``maxmin`` (exact global max-min, ``hardware.noi.FlowNetwork``), ``equal``
            (equal split per resource) or ``none`` (no contention).
        page_tokens: Tokens per KV page (continuous batching allocates in pages; static reserves whole requests).
        placement_seed: Seed of the ``random`` placement (None: the simulation seed).
        link_bins_s: Bin width of the per-link utilisation time series, s (None: totals only); in ``raw.link_series``
            as (bin start times, utilisation per bin × link).
        mapping: How the initial mapping Ω (used by the static and elastic schedulers) is computed:
            ``bottleneck`` (default; HYDRA Eqs. 3–5, ``runtime.mapping.map_tasks``) or ``artifact`` (the artifact's
            static mapper: blocks in model order to the chiplet leaving the least variance of accumulated latency,
            priced at batch 32 × context 32 without communication; METHODS §2d). Not part of ``Scenario.paper()``.
        fuse_blocks: Run consecutive blocks that Ω maps to the same chiplet, with weights on the same memory, as
            one task (per-block compute rooflines add; their bytes are one flow; docs/simulator.md "Block
            fusion"). Fewer events, but a batch then holds the chiplet for the whole run of blocks, which changes
            results by a few per cent; default False (one task per block). fcfs/worksteal have no Ω: never fused.
        debug: Check invariants (memory ≤ capacity, request conservation) after every event.
    """

    hop_latency_s: float = 10e-9
    sharing: str = "fair"
    page_tokens: int = 16
    placement_seed: int | None = None
    link_bins_s: float | None = None
    mapping: str = "bottleneck"
    fuse_blocks: bool = False
    debug: bool = False

    def __post_init__(self) -> None:
        for key, allowed in _CHOICES.items():
            v = getattr(self, key)
            if v not in allowed:
                raise ConfigError(f"must be one of {', '.join(map(str, allowed))}", key=key, value=v)
        if self.link_bins_s is not None and not self.link_bins_s > 0:
            raise ConfigError("must be > 0", key="link_bins_s", value=self.link_bins_s)
        if self.page_tokens < 1:
            raise ConfigError("must be >= 1", key="page_tokens", value=self.page_tokens)

    def with_(self, **changes) -> SimOptions:
        """A copy with ``changes`` applied."""
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """Plain dict (for JSON)."""
        return asdict(self)
