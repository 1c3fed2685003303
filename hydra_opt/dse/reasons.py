"""Why a trial was not simulated: one vocabulary for the run summary, ``report`` and the dashboard note.

Every finished trial of a study falls in one *outcome*:

* ``simulated`` — promoted and simulated (COMPLETE, values = simulated objectives);
* ``infeasible`` — the design cannot be built or cannot serve the model (PRUNED, Optuna constraint > 0, reasons in
  the user attribute ``infeasible``);
* ``duplicate`` — the design was already simulated in this study; its values are in ``sim_*`` but the trial is not a
  front candidate of its own (PRUNED, ``duplicate_of`` = the simulated trial);
* ``not promoted`` — estimated, not simulated (PRUNED, ``promotion`` = the pruner's reason);
* ``failed`` — the trial raised or its worker died (FAIL).

:func:`trial_reason` gives one trial's (outcome, reason); :func:`count_reasons` counts them; :func:`format_reasons`
prints the counts with the most common reasons spelled out. Reasons that differ only in numbers (e.g. memory
shortfalls of different designs) count as one reason; the first one met is shown as the example.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from optuna.trial import FrozenTrial, TrialState

__all__ = [
    "OUTCOMES",
    "PROMOTION_TEXT",
    "ReasonCount",
    "count_reasons",
    "format_reasons",
    "note_markdown",
    "save_trial_note",
    "trial_infeasible",
    "trial_reason",
]

#: Outcomes in the order they are reported.
OUTCOMES: tuple[str, ...] = ("simulated", "infeasible", "duplicate", "not promoted", "failed")

#: What a ``promotion`` user-attribute value means for a trial that was not simulated.
PROMOTION_TEXT: dict[str, str] = {
    "dominated": "estimate dominated: outside the estimated front by more than the pruner's epsilon/k_ranks",
    "collecting": "estimate-only phase (pruner.min_estimates): collecting estimates before promoting",
    "deferred": "calibrated plan: simulations are spent at the end of the study",
    "simulation-budget": "budget.max_simulations reached",
    "non-finite-estimate": "estimate not finite (the design cannot serve the load, e.g. unbounded TTFT)",
    "non-finite-simulation": "simulated, but an objective value was not finite",
}

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*(?:e[-+]?\d+)?")


def trial_reason(t: FrozenTrial) -> tuple[str, str]:
    """``(outcome, reason)`` of a finished trial (``("", "")`` for RUNNING/WAITING trials)."""
    ua = t.user_attrs
    if t.state in (TrialState.COMPLETE, TrialState.PRUNED) and ua.get("duplicate_of") is not None:
        return "duplicate", "design already simulated in this study (values reused)"
    if t.state == TrialState.COMPLETE:
        return "simulated", f"promoted: {ua.get('promotion', '?')}"
    if t.state == TrialState.FAIL:
        return "failed", str(t.system_attrs.get("fail_reason", "raised or its worker died")).splitlines()[0][:200]
    if t.state != TrialState.PRUNED:
        return "", ""
    if ua.get("infeasible"):
        return "infeasible", trial_infeasible(t)[0]
    promo = str(ua.get("promotion", ""))
    if "sim_wall_s" in ua:
        promo = "non-finite-simulation"
    return "not promoted", PROMOTION_TEXT.get(promo, promo or "not estimated")


def trial_infeasible(t: FrozenTrial) -> list[str]:
    """All infeasibility reasons of a trial (system attribute ``infeasible``; older studies: the user attribute,
    a list; the user attribute is one short line with the first reason)."""
    reasons = t.system_attrs.get("infeasible")
    if isinstance(reasons, (list, tuple)) and reasons:
        return [str(r) for r in reasons]
    ua = t.user_attrs.get("infeasible")
    if isinstance(ua, (list, tuple)):
        return [str(r) for r in ua]
    return [str(ua)] if ua else []


@dataclass
class ReasonCount:
    """Trials of one outcome and their reasons (most common first)."""

    outcome: str
    count: int = 0
    reasons: list[tuple[str, int]] = field(default_factory=list)  # (example reason, count)


def count_reasons(trials: Iterable[FrozenTrial]) -> list[ReasonCount]:
    """Counts by outcome (in :data:`OUTCOMES` order, empty outcomes left out) and by reason within each."""
    per: dict[str, Counter[str]] = {o: Counter() for o in OUTCOMES}
    example: dict[tuple[str, str], str] = {}
    for t in trials:
        outcome, reason = trial_reason(t)
        if not outcome:
            continue
        shape = _NUMBER.sub("#", reason)
        per[outcome][shape] += 1
        example.setdefault((outcome, shape), reason)
    out = []
    for o in OUTCOMES:
        if per[o]:
            ranked = sorted(per[o].items(), key=lambda kv: (-kv[1], kv[0]))
            out.append(ReasonCount(o, sum(per[o].values()), [(example[(o, s)], n) for s, n in ranked]))
    return out


def format_reasons(counts: list[ReasonCount], *, top: int = 3, width: int = 110) -> list[str]:
    """Lines ``infeasible 8: 8x chiplets: no chiplet can run mamba blocks in prefill`` (top reasons per outcome)."""
    lines = []
    for c in counts:
        if c.outcome == "simulated":
            continue
        lines.append(f"  {c.outcome} {c.count}:")
        for reason, n in c.reasons[:top]:
            text = reason if len(reason) <= width else reason[: width - 3] + "..."
            lines.append(f"    {n:4d} x {text}")
        if len(c.reasons) > top:
            rest = sum(n for _, n in c.reasons[top:])
            lines.append(f"    {rest:4d} x ({len(c.reasons) - top} other reasons; see trials.csv)")
    return lines


def note_markdown(outcome: str, reasons: list[str], *, detail: str = "") -> str:
    """A trial note (optuna-dashboard Markdown) stating the outcome and its reasons, one per line."""
    head = {
        "infeasible": "**Infeasible** — the design cannot be built or cannot serve the model:",
        "duplicate": "**Duplicate** — not a front candidate of its own:",
        "not promoted": "**Not promoted** — estimated only, not simulated:",
        "simulated": "**Simulated**:",
    }.get(outcome, f"**{outcome}**:")
    body = "\n".join(f"- {r}" for r in reasons)
    return f"{head}\n\n{body}\n" + (f"\n{detail}\n" if detail else "")


def save_trial_note(trial: object, body: str) -> None:
    """Attach ``body`` as the trial's optuna-dashboard note (shown wrapped on the trial page); no-op without the
    optuna-dashboard package."""
    try:
        from optuna_dashboard import save_note
    except ImportError:  # pragma: no cover - optuna-dashboard is a dependency; the note is a convenience
        return
    save_note(trial, body)
