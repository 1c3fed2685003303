"""Simulation options, and the *paper preset* that reproduces the HYDRA artifact's experimental setup.

Defaults are physically clean (docs/simulator.md, docs/metrics.md): TTFT from arrival, throughput over a
measurement window without warm-up and drain, per-request context lengths, links and HBM ports shared by
max-min fairness, preempted requests keep their progress (recomputed on resume) and go back to the head of the
queue. :meth:`SimOptions.paper` switches to the artifact's definitions (METHODS §2c, §2e, §2g).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from hydra_opt.config.errors import ConfigError

__all__ = ["SimOptions"]

_CHOICES = {
    "ttft_from": ("arrival", "batch_start"),
    "throughput_window": ("measure", "whole_run"),
    "sharing": ("fair", "maxmin", "equal", "none"),
    "preempt_requeue": ("front", "back"),
    "batching": (None, "static", "continuous", "chunked"),
    "scheduler": (None, "static", "fcfs", "worksteal", "elastic"),
    "placement": (None, "cp", "rr", "random"),
    "mapping": ("bottleneck", "artifact"),
}


@dataclass(frozen=True)
class SimOptions:
    """How a simulation runs and what it measures.

    Attributes:
        horizon_s: Simulated time limit, s (None: the workload's horizon if it has one, else until every request
            has completed).
        n_requests: Use only the first ``n_requests`` requests of the workload (None: all).
        arrival_interval_s: If set, replace the workload's arrival times by fixed arrivals every this many
            seconds starting at 0 (the artifact's 10 ms replay).
        precision: Precision name (``hydra_opt.workload.precision``): bytes per weight/activation/KV element
            (None: the design's).
        hop_latency_s: NoI per-hop latency, s (10 ns, the artifact's link latency).
        library_preset: Chiplet-library preset (``hydra_opt.hardware.chiplets``; None: the library default,
            ``"paper"`` in the paper preset: the artifact's 144 mm² profiles as coded).
        ttft_from: ``"arrival"`` (default; includes queueing) or ``"batch_start"`` (the artifact's: from the start
            of the batch the request was admitted to; excludes queueing).
        throughput_window: ``"measure"`` (default: output tokens emitted inside ``[warmup, end]`` divided by its
            length, where warm-up = ``warmup_frac`` of the arrival span and end = last arrival or horizon) or
            ``"whole_run"`` (the artifact's: all tokens emitted, including those of requests later preempted,
            divided by the simulated time).
        warmup_frac: Fraction of the arrival span excluded at the start of the measurement window.
        sharing: NoI bandwidth sharing: ``fair`` (default; per-resource max-min water-filling, incremental —
            ``simulator/flows.py``), ``maxmin`` (exact global max-min, ``hardware.noi.FlowNetwork``), ``equal``
            (equal split per resource) or ``none`` (no contention).
        page_tokens: Tokens per KV page (continuous batching allocates in pages; static reserves whole requests).
        token_budget: Continuous batching: maximum new tokens per pass (Σ over the batch).
        max_batches: Batches in flight at once (pipeline depth); None = number of compute chiplets.
        lend: Elastic scheduler cross-phase lending.
        preempt_requeue: Where a preempted request re-enters the waiting queue (``front`` default, ``back``: the
            artifact's).
        preempt_restart: True: a preempted request restarts from scratch (generated tokens are lost; the
            artifact's); False (default): it keeps its tokens and recomputes its context in one prefill pass.
        batching, scheduler, placement: Override the design's policy (None: the design's).
        max_batch: Override the design's maximum batch size (None: the design's).
        placement_seed: Seed of the ``random`` placement (None: the simulation seed).
        link_bins_s: Bin width of the per-link utilisation time series, s (None: totals only); in ``raw.link_series``
            as (bin start times, utilisation per bin × link).
        mapping: How the initial mapping Ω (used by the static and elastic schedulers) is computed:
            ``bottleneck`` (default; HYDRA Eqs. 3–5, ``runtime.mapping.map_tasks``) or ``artifact`` (the artifact's
            static mapper: blocks in model order to the chiplet leaving the least variance of accumulated latency,
            priced at batch 32 × context 32 without communication; METHODS §2d). Not part of :meth:`paper`.
        fuse_blocks: Run consecutive blocks that Ω maps to the same chiplet, with weights on the same memory, as
            one task (per-block compute rooflines add; their bytes are one flow; docs/simulator.md "Block
            fusion"). Fewer events, but a batch then holds the chiplet for the whole run of blocks, which changes
            results by a few per cent; default False (one task per block). fcfs/worksteal have no Ω: never fused.
        debug: Check invariants (memory ≤ capacity, request conservation) after every event.
        paper_preset: True when built by :meth:`paper` (reported in results).
    """

    horizon_s: float | None = None
    n_requests: int | None = None
    arrival_interval_s: float | None = None
    precision: str | None = None
    hop_latency_s: float = 10e-9
    library_preset: str | None = None
    ttft_from: str = "arrival"
    throughput_window: str = "measure"
    warmup_frac: float = 0.1
    sharing: str = "fair"
    page_tokens: int = 16
    token_budget: int = 8192
    max_batches: int | None = None
    lend: bool = False
    preempt_requeue: str = "front"
    preempt_restart: bool = False
    batching: str | None = None
    scheduler: str | None = None
    placement: str | None = None
    max_batch: int | None = None
    placement_seed: int | None = None
    link_bins_s: float | None = None
    mapping: str = "bottleneck"
    fuse_blocks: bool = False
    debug: bool = False
    paper_preset: bool = False

    def __post_init__(self) -> None:
        for key, allowed in _CHOICES.items():
            v = getattr(self, key)
            if v not in allowed:
                raise ConfigError(f"must be one of {', '.join(map(str, allowed))}", key=key, value=v)
        for key in ("horizon_s", "arrival_interval_s", "link_bins_s"):
            v = getattr(self, key)
            if v is not None and not v > 0:
                raise ConfigError("must be > 0", key=key, value=v)
        for key in ("n_requests", "max_batches", "max_batch"):
            v = getattr(self, key)
            if v is not None and int(v) < 1:
                raise ConfigError("must be >= 1", key=key, value=v)
        if self.page_tokens < 1 or self.token_budget < 1:
            raise ConfigError("must be >= 1", key="page_tokens/token_budget", value=(self.page_tokens, self.token_budget))
        if not 0 <= self.warmup_frac < 1:
            raise ConfigError("must be in [0, 1)", key="warmup_frac", value=self.warmup_frac)

    @classmethod
    def paper(cls, **overrides) -> SimOptions:
        """The HYDRA artifact's setup (METHODS §2c/§2e/§2g): 10 ms fixed arrivals, 5,000 requests, 100 s,
        1 byte per element, TTFT from batch start, whole-run throughput, preempted requests restart at the back.
        """
        base = dict(
            horizon_s=100.0,
            n_requests=5000,
            arrival_interval_s=0.01,
            precision="int8",
            library_preset="paper",
            ttft_from="batch_start",
            throughput_window="whole_run",
            preempt_requeue="back",
            preempt_restart=True,
            paper_preset=True,
        )
        base.update(overrides)
        return cls(**base)

    def with_(self, **changes) -> SimOptions:
        """A copy with ``changes`` applied."""
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """Plain dict (for JSON)."""
        return asdict(self)
