"""The scenario: one frozen description of a served run, read by the estimator and the simulator alike.

A run is a design (hardware + runtime policies, ``hydra_opt.system.design``) serving a model and a workload under a
:class:`Scenario`: how long, which requests arriving when, how TTFT and throughput are measured, at which precision,
with which chiplet-library and placement presets, with which continuous-batching token budget and pipeline depth,
and how preempted requests are treated. ``simulate(design, model, workload, scenario=...)`` and
``estimate(design, model, workload, scenario=...)`` read the same object, so the estimate describes the run the
simulator performs; each evaluator's own knobs (``SimOptions``: NoI sharing model, page size, block fusion, debug;
``EstimatorOptions``: sample counts and model efficiencies) never change *what* run is described.

:meth:`Scenario.paper` is the HYDRA artifact's setup (METHODS §2c/§2e/§2g), defined here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from hydra_opt.config.errors import ConfigError

__all__ = ["Scenario", "scenario_from_mapping", "SCENARIO_KEYS"]

_CHOICES = {
    "ttft_from": ("arrival", "batch_start"),
    "window": ("measure", "whole_run"),
    "preempt_requeue": ("front", "back"),
    "placement_preset": ("clean", "paper"),
    "library_preset": (None, "clean", "paper"),
    "preset": ("default", "paper"),
}


@dataclass(frozen=True)
class Scenario:
    """What run is served and how it is measured (docs/simulator.md "Scenario", docs/metrics.md).

    Attributes:
        horizon_s: Served time limit, s (None: the workload's horizon if it has one, else until every request has
            completed).
        n_requests: Use only the first ``n_requests`` requests of the workload (None: all).
        arrival_interval_s: If set, replace the workload's arrival times by fixed arrivals every this many seconds
            starting at 0 (the artifact's 10 ms replay).
        precision: Precision name (``hydra_opt.workload.precision``): bytes per weight/activation/KV element
            (None: the design's).
        library_preset: Chiplet-library preset (``hydra_opt.hardware.chiplets``; None: the library default,
            ``"paper"``: the artifact's 144 mm² profiles as coded).
        placement_preset: ``"clean"`` (placement sizes KV for the workload's mean context) or ``"paper"`` (the
            artifact's memory split; ``hydra_opt.system.placement.place``).
        ttft_from: ``"arrival"`` (default; includes queueing) or ``"batch_start"`` (the artifact's: from the start
            of the batch the request was admitted to).
        window: Throughput window: ``"measure"`` (default: output tokens emitted inside ``[warmup, end]`` divided by
            its length; warm-up = ``warmup_frac`` of the arrival span, end = last arrival or horizon) or
            ``"whole_run"`` (the artifact's: all tokens emitted, including those of requests later preempted,
            divided by the served time).
        warmup_frac: Fraction of the arrival span excluded at the start of the measurement window.
        token_budget: Continuous batching: maximum new tokens of one prefill pass (Σ over the batch).
        max_batches: Batches in flight at once (pipeline depth); None = number of compute chiplets.
        lend: Elastic scheduler cross-phase lending (decode chiplets may take prefill work and vice versa).
        preempt_requeue: Where a preempted request re-enters the waiting queue (``front`` default, ``back``: the
            artifact's).
        preempt_restart: True: a preempted request restarts from scratch (the artifact's); False (default): it
            keeps its tokens and recomputes its context in one prefill pass.
        slo: Service-level objectives (issue 15's ``Slo``; None: none).
        preset: ``"paper"`` when built by :meth:`paper` (reported in results), else ``"default"``.
    """

    horizon_s: float | None = None
    n_requests: int | None = None
    arrival_interval_s: float | None = None
    precision: str | None = None
    library_preset: str | None = None
    placement_preset: str = "clean"
    ttft_from: str = "arrival"
    window: str = "measure"
    warmup_frac: float = 0.1
    token_budget: int = 8192
    max_batches: int | None = None
    lend: bool = False
    preempt_requeue: str = "front"
    preempt_restart: bool = False
    slo: Any = None
    preset: str = "default"

    def __post_init__(self) -> None:
        for key, allowed in _CHOICES.items():
            v = getattr(self, key)
            if v not in allowed:
                raise ConfigError(f"must be one of {', '.join(map(str, allowed))}", key=key, value=v)
        for key in ("horizon_s", "arrival_interval_s"):
            v = getattr(self, key)
            if v is not None and not v > 0:
                raise ConfigError("must be > 0", key=key, value=v)
        for key in ("n_requests", "max_batches", "token_budget"):
            v = getattr(self, key)
            if v is not None and int(v) < 1:
                raise ConfigError("must be >= 1", key=key, value=v)
        if not 0 <= self.warmup_frac < 1:
            raise ConfigError("must be in [0, 1)", key="warmup_frac", value=self.warmup_frac)

    @classmethod
    def paper(cls, **overrides: Any) -> Scenario:
        """The HYDRA artifact's setup (METHODS §2c/§2e/§2g): 10 ms fixed arrivals, 5,000 requests, 100 s,
        1 byte per element, the artifact's chiplet profiles and memory split, TTFT from batch start, whole-run
        throughput, preempted requests restart at the back of the queue.
        """
        base: dict[str, Any] = dict(
            horizon_s=100.0,
            n_requests=5000,
            arrival_interval_s=0.01,
            precision="int8",
            library_preset="paper",
            placement_preset="paper",
            ttft_from="batch_start",
            window="whole_run",
            preempt_requeue="back",
            preempt_restart=True,
            preset="paper",
        )
        base.update(overrides)
        return cls(**base)

    @property
    def paper_preset(self) -> bool:
        """True when built by :meth:`paper`."""
        return self.preset == "paper"

    def with_(self, **changes: Any) -> Scenario:
        """A copy with ``changes`` applied."""
        return replace(self, **changes)

    def library(self) -> Any:
        """The chiplet library this scenario prices chiplets with (``ChipletLibrary.default(library_preset)``)."""
        from hydra_opt.hardware.chiplets import ChipletLibrary

        return ChipletLibrary.default(self.library_preset) if self.library_preset else ChipletLibrary.default()

    def header(self) -> str:
        """One line naming the run (printed first by the ``simulate`` and ``estimate`` commands)."""
        def fmt(v: Any) -> str:
            return "all" if v is None else f"{v:g}" if isinstance(v, float) else str(v)

        arrivals = "workload" if self.arrival_interval_s is None else f"every {self.arrival_interval_s:g} s"
        return (f"scenario {self.preset}: horizon {fmt(self.horizon_s)} s, requests {fmt(self.n_requests)}, "
                f"arrivals {arrivals}, precision {self.precision or 'design'}, TTFT from {self.ttft_from}, "
                f"window {self.window}, library {self.library_preset or 'default'}, placement preset "
                f"{self.placement_preset}, token budget {self.token_budget}")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for JSON)."""
        d = asdict(self)
        if self.slo is not None and hasattr(self.slo, "to_dict"):
            d["slo"] = self.slo.to_dict()
        return d


#: Keys a study's ``scenario:`` block may set (``preset`` selects the base: ``default`` or ``paper``).
SCENARIO_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Scenario) if f.name not in ("preset", "slo"))


def scenario_from_mapping(data: Mapping[str, Any] | None, *, file: str | None = None, key: str = "scenario") -> Scenario:
    """A :class:`Scenario` from a study's ``scenario:`` mapping; ``preset: paper`` starts from :meth:`Scenario.paper`.

    Raises:
        ConfigError: For an unknown key, preset or value (located at ``file``: ``key.<name>``).
    """
    data = dict(data or {})
    preset = data.pop("preset", None)
    if preset not in (None, "paper", "default"):
        raise ConfigError("is not one of: default, paper", file=file, key=f"{key}.preset", value=preset)
    for k in data:
        if k not in SCENARIO_KEYS:
            raise ConfigError(f"is not a scenario setting; allowed: preset, {', '.join(SCENARIO_KEYS)}", file=file,
                              key=f"{key}.{k}")
    try:
        return Scenario.paper(**data) if preset == "paper" else Scenario(**data)
    except ConfigError as exc:
        raise ConfigError(exc.problem, file=file, key=f"{key}.{exc.key}" if exc.key else key, value=exc.value,
                          show_value=exc.show_value) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"rejected: {exc}", file=file, key=key) from None
