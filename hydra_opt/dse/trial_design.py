"""The design a trial evaluated, as stored on the trial: the full dict (system attribute) and its one-line label
(user attribute, short enough for the dashboard's trial panel). Written by :mod:`hydra_opt.dse.objective`, read by
:mod:`hydra_opt.dse.report`, the CLI and the exhaustive mode — a leaf module, so none of them import each other for it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DESIGN_ATTR", "design_label", "trial_design"]

#: Trial system attribute holding the full design dict (the user attribute of that name holds its label).
DESIGN_ATTR = "design"


def trial_design(t: Any) -> dict[str, Any]:
    """The design dict of a (frozen) trial: the system attribute, or the user attribute of older studies."""
    d = t.system_attrs.get(DESIGN_ATTR)
    if isinstance(d, dict):
        return d
    d = t.user_attrs.get(DESIGN_ATTR)
    return d if isinstance(d, dict) else {}


def design_label(design: dict[str, Any] | str | None) -> str:
    """Compact design text: ``tscs_d=17 tscs_p=5 HBM=2 D2D=256GB/s B=8`` (a label is returned as is)."""
    if isinstance(design, str):
        return design
    if not design:
        return "?"
    parts = [f"{k}={v}" for k, v in (design.get("chiplets") or {}).items()]
    parts.append(f"HBM={design.get('n_mem')}")
    if "d2d_bw_gbps" in design:
        parts.append(f"D2D={design['d2d_bw_gbps']}GB/s")
    if "max_batch" in design:
        parts.append(f"B={design['max_batch']}")
    for k in ("placement", "batching", "scheduler"):
        if k in design and design[k] not in ("cp", "static"):
            parts.append(f"{k}={design[k]}")
    if design.get("dynacore"):
        parts.append("dynacore=" + ",".join(f"{k}:{v}" for k, v in design["dynacore"].items()))
    return " ".join(parts)
