"""Quantisation accuracy cost of a package's precisions, percentage points vs FP16 (DynaCore paper, Sec. 8.2).

The measured figures are :data:`~hydra_opt.hardware.dynacore.precision.ACCURACY_DROP_PCT` (Llama-3.1-8B); this
module prices a (prefill, decode) precision pair (:func:`pair_accuracy_cost`) and a design whose chiplets serve the
two phases at their precisions (:func:`design_accuracy_cost`). docs/dynacore.md §1.6.
"""

from __future__ import annotations

import math
from typing import Any

from hydra_opt.config.errors import ConfigError
from hydra_opt.hardware.dynacore.chiplet import DynaCoreSettings
from hydra_opt.hardware.dynacore.precision import ACCURACY_DROP_PCT, POLICIES, get_datapath

__all__ = ["design_accuracy_cost", "pair_accuracy_cost"]

#: (weight bits, activation bits) of precision names without a DynaCore datapath. Assumption: an 8-bit float W8A8
#: costs no more accuracy than the measured INT8 W8A8 (no FP8 figure exists in the DynaCore paper).
_EXTRA_BITS: dict[str, tuple[int, int]] = {"fp8": (8, 8)}


def _bits(name: str) -> tuple[int, int]:
    """(weight bits, activation bits) of a precision name (``int8`` = W8A8, ``bf16`` = FP16 widths)."""
    low = str(name).lower()
    if low in _EXTRA_BITS:
        return _EXTRA_BITS[low]
    dp = get_datapath(low, key="precision")
    return dp.weight_bits, dp.act_bits


def pair_accuracy_cost(prefill: str, decode: str) -> float:
    """Accuracy cost, percentage points vs FP16, of prefilling at ``prefill`` and decoding at ``decode``.

    A pair the DynaCore paper measured (Sec. 8.2: FP16 0, disaggregated W8A8+W4A16 0.07, W8A8 0.09, W4A8 1.51,
    W4A16 2.81) gets its figure. Another pair gets the smallest figure among the measured policies that are at most
    as precise in both phases (no more weight and no more activation bits): an upper bound under the assumption
    that quantising less never costs accuracy. So FP16 prefill + W4A16 decode → 0.07 (the disaggregated pair is
    at most as precise), FP16 prefill + W8A8 decode → 0.09, W8A8 prefill + FP16 decode → 0.07.

    Raises:
        ConfigError: For a precision name without operand widths (none of the shipped ones).
    """
    p, d = _bits(prefill), _bits(decode)
    best = math.inf
    for name, pol in POLICIES.items():
        pp, dd = _bits(pol.prefill), _bits(pol.decode)
        if (pp, dd) == (p, d):
            return float(ACCURACY_DROP_PCT[name])
        if pp[0] <= p[0] and pp[1] <= p[1] and dd[0] <= d[0] and dd[1] <= d[1]:
            best = min(best, float(ACCURACY_DROP_PCT[name]))
    if not math.isfinite(best):
        raise ConfigError("has no accuracy figure (no measured policy is at most as precise)", key="precision",
                          value=f"{prefill}+{decode}")
    return best


def design_accuracy_cost(design: Any, *, precision: str | None = None, library: Any = None) -> float:
    """Quantisation accuracy cost of a design, percentage points vs FP16 (0 = full precision).

    Each compute chiplet applies a precision in the phases it serves: library chiplets (``tscs_p``, ``tscs_d``,
    ...) run ``precision`` (a study's ``simulate: {precision: ...}``), else the design's ``precision`` (HYDRA's
    ``int8`` = W8A8), in the phases their library entry lists; DynaCore chiplets serve both phases at the design's
    ``dynacore`` prefill/decode precisions (default W8A8 + W4A16). A request may be prefilled by any prefill-capable
    chiplet and decoded by any decode-capable one, so the cost is the worst :func:`pair_accuracy_cost` over those
    (prefill, decode) pairs. Examples: an int8 HYDRA design 0.09; ``tscs_p`` + DynaCore (W8A8, W4A16) 0.07 (the
    paper's disaggregated pair); an FP16 design 0. The figures are Llama-3.1-8B's and are reused for every model
    (docs/dynacore.md §1.6): an objective, not a prediction.

    Args:
        design: A ``hydra_opt.system.design.DesignPoint`` (read: ``counts``, ``precision``, ``dynacore``).
        precision: Precision forced on the library chiplets (None: ``design.precision``).
        library: Chiplet library (default: the shipped one).
    """
    if library is None:
        from hydra_opt.hardware.chiplets import ChipletLibrary

        library = ChipletLibrary.default()
    prec = precision or design.precision
    prefill: set[str] = set()
    decode: set[str] = set()
    for name, n in design.counts:
        if n <= 0:
            continue
        if name == "dynacore":
            dyn = design.dynacore if design.dynacore is not None else DynaCoreSettings()  # same defaults
            prefill.add(dyn.prefill_precision)
            decode.add(dyn.decode_precision)
            continue
        try:
            phases = library.spec(name).phases
        except ConfigError:  # a hook/provider chiplet other than DynaCore: assume it serves both phases
            phases = frozenset({"prefill", "decode"})
        if "prefill" in phases:
            prefill.add(prec)
        if "decode" in phases:
            decode.add(prec)
    prefill, decode = prefill or decode, decode or prefill  # a one-phase design is infeasible; price what it has
    if not prefill:
        return 0.0
    return max(pair_accuracy_cost(p, d) for p in sorted(prefill) for d in sorted(decode))
