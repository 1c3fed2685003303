"""Feasibility of a design point: a list of reasons why it cannot be built or cannot serve a model (never raises).

Checks (HYDRA Sec. III-C/IV-A, Table III):

* the compute + memory chiplets fit the package's slots;
* memory chiplets fit on the outer ring (HBMs sit on the ring: at most 16 on a 6 x 4 grid);
* every chiplet type is known and its composition fits the per-slot area budget (and leaves room for compute);
* with a model: weights + the minimum per-request state fit the memory capacity, where the minimum is
  ``max_batch`` requests under static batching (a batch is admitted whole) and 1 request under continuous
  batching, each with KV cache for ``min_context_tokens`` tokens plus its SSM/conv state;
* with a model: the largest block's weights fit one memory chiplet (a block's weights are not split);
* with a model: for every block family of the model and both phases there is a chiplet built for it
  (``allow_fallback=True`` accepts any chiplet of the family, as the artifact's fallback list does).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from hydra_opt.config import ConfigError
from hydra_opt.hardware.types import PHASES, ChipletType
from hydra_opt.system.design import DesignPoint, load_design
from hydra_opt.system.materialise import chiplet_type, memory_type

__all__ = ["Issue", "feasibility", "feasibility_issues", "min_memory_bytes", "validate_design_file"]


@dataclass(frozen=True)
class Issue:
    """One reason a design is infeasible, with the design key it concerns.

    Attributes:
        key: Design-file key path (``"n_mem"``, ``"chiplets.tscs_p"``, ...).
        message: The reason, a sentence with numbers and units.
    """

    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


def _library(library: Any):
    if library is not None:
        return library
    from hydra_opt.hardware.chiplets import ChipletLibrary

    return ChipletLibrary.default()


def _model(model: Any):
    if model is None or not isinstance(model, str):
        return model
    from hydra_opt.workload.models import load_model  # lower layer, imported lazily

    return load_model(model)


def min_memory_bytes(design: DesignPoint, model: Any, *, min_context_tokens: int = 1) -> float:
    """Weights + minimum per-request state of ``model`` under ``design``'s precision and batching, bytes."""
    from hydra_opt.workload.precision import get_precision

    prec = get_precision(design.precision)
    n_req = design.max_batch if design.batching == "static" else 1
    per_req = model.kv_bytes_per_token(prec) * min_context_tokens + model.state_bytes_per_seq(prec)
    return float(model.weight_bytes(prec)) + n_req * float(per_req)


def feasibility_issues(
    design: DesignPoint,
    model: Any = None,
    library: Any = None,
    *,
    min_context_tokens: int = 1,
    allow_fallback: bool = False,
) -> list[Issue]:
    """All reasons ``design`` is infeasible, as :class:`Issue` records (empty list = feasible)."""
    issues: list[Issue] = []
    pkg = design.package
    if design.n_chiplets > pkg.n_slots:
        issues.append(
            Issue(
                "chiplets",
                f"{design.n_compute} compute + {design.n_mem} memory chiplets = {design.n_chiplets} exceed the "
                f"{pkg.n_slots} slots of the {pkg.width}x{pkg.height} package",
            )
        )
    if design.n_mem > pkg.n_ring:
        issues.append(
            Issue("n_mem", f"{design.n_mem} memory chiplets exceed the {pkg.n_ring} outer-ring slots")
        )
    if design.n_mem == 0:
        issues.append(Issue("n_mem", "a design needs at least one memory chiplet to hold the weights"))
    if design.n_compute == 0:
        issues.append(Issue("chiplets", "a design needs at least one compute chiplet"))

    lib = _library(library)
    chips: list[ChipletType] = []
    for name, _count in design.counts:
        key = f"chiplets.{name}"
        if name not in lib:
            issues.append(Issue(key, f"is not a known chiplet; allowed: {', '.join(lib.names())}"))
            continue
        try:
            chip = chiplet_type(design, name, lib)
        except ConfigError as exc:
            issues.append(Issue(key, exc.problem))
            continue
        chips.append(chip)
        if chip.area_mm2 > design.slot_area_mm2 + 1e-9:
            issues.append(
                Issue(key, f"area {chip.area_mm2:.2f} mm² exceeds the {design.slot_area_mm2:g} mm² slot budget")
            )
        if chip.cores <= 0 or chip.macs_per_cycle <= 0:
            issues.append(
                Issue(
                    key,
                    f"leaves no room for compute at {design.d2d_bw_gbps:g} GB/s D2D links in a "
                    f"{design.slot_area_mm2:g} mm² slot",
                )
            )

    mem = None
    try:
        mem = memory_type(design)
    except ConfigError as exc:
        issues.append(Issue("memory", exc.problem))
    if mem is not None and mem.area_mm2 > design.slot_area_mm2 + 1e-9:
        issues.append(
            Issue("memory", f"{mem.name} footprint {mem.area_mm2:g} mm² exceeds the {design.slot_area_mm2:g} mm² slot")
        )

    m = _model(model)
    if m is not None:
        if mem is not None:
            need = min_memory_bytes(design, m, min_context_tokens=min_context_tokens)
            have = design.n_mem * mem.capacity_bytes
            if need > have:
                n_req = design.max_batch if design.batching == "static" else 1
                issues.append(
                    Issue(
                        "n_mem",
                        f"weights + state of {n_req} request(s) need {need / 2**30:.2f} GiB but "
                        f"{design.n_mem} x {mem.name} hold {have / 2**30:.2f} GiB",
                    )
                )
            per_block = getattr(m, "block_weight_bytes", None)
            if per_block is not None:
                from hydra_opt.workload.precision import get_precision

                largest = max((float(x) for x in per_block(get_precision(design.precision))), default=0.0)
                # A block's weights live on one memory chiplet (placement maps block -> memory slot).
                if largest > mem.capacity_bytes:
                    issues.append(
                        Issue(
                            "memory",
                            f"the largest block's weights ({largest / 2**30:.2f} GiB) exceed one {mem.name} "
                            f"({mem.capacity_bytes / 2**30:.2f} GiB)",
                        )
                    )
        families = sorted({b.family for b in m.blocks})
        for fam in families:
            for phase in PHASES:
                ok = any(
                    (fam in c.families) if allow_fallback else c.can_run(fam, phase) for c in chips
                )
                if not ok:
                    issues.append(
                        Issue(
                            "chiplets",
                            f"no chiplet can run {fam} blocks in {phase} "
                            f"(model {getattr(m, 'name', '?')} needs it)",
                        )
                    )
    return issues


def feasibility(
    design: DesignPoint,
    model: Any = None,
    library: Any = None,
    *,
    min_context_tokens: int = 1,
    allow_fallback: bool = False,
) -> list[str]:
    """Reasons ``design`` is infeasible (``"key: reason"`` strings); an empty list means feasible.

    Args:
        design: The design point.
        model: A ``hydra_opt.workload.models.Model`` or a model name, or ``None`` for hardware-only checks.
        library: A :class:`~hydra_opt.hardware.chiplets.ChipletLibrary` (default: the shipped one).
        min_context_tokens: Context length of the minimum per-request KV cache, tokens.
        allow_fallback: Accept any chiplet of a block family for both phases.
    """
    try:
        issues = feasibility_issues(
            design, model, library, min_context_tokens=min_context_tokens, allow_fallback=allow_fallback
        )
    except Exception as exc:  # noqa: BLE001 - the contract is "reasons, never exceptions"
        return [f"design: could not be checked ({type(exc).__name__}: {exc})"]
    return [str(i) for i in issues]


def validate_design_file(path: str | os.PathLike[str]) -> DesignPoint:
    """The ``validate`` command for ``kind: design``: parse, then refuse a physically infeasible package.

    Only model-independent checks run here (slots, ring, areas); model-dependent ones need a model
    (:func:`feasibility`).
    """
    design = load_design(path)
    issues = feasibility_issues(design)
    if issues:
        first = issues[0]
        raise ConfigError(first.message, file=str(path), key=first.key)
    return design
