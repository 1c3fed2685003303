"""Shared types of the paper-reproduction report (issue 8): a :class:`Row` per paper number, a :class:`Section`
per experiment, their JSON form and the markdown rendering of ``docs/reproduction.md``.

Every experiment module ``hydra_opt/experiments/<key>.py`` returns one :class:`Section`; the driver
(:func:`hydra_opt.experiments.run_reproduction`) stores it as JSON and renders all sections with
:func:`render_markdown`. A row whose hydra_opt value differs from the paper's by more than 25 % and has no
comment is flagged "cause not stated" in the rendered table, so an unexplained gap cannot go unnoticed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "Row",
    "Section",
    "FLAG_TOLERANCE",
    "UNSTATED",
    "section_to_json",
    "section_from_json",
    "render_markdown",
    "format_value",
    "render_rows",
    "render_section",
]

#: Relative difference |ours/paper - 1| above which a row needs a comment stating the cause.
FLAG_TOLERANCE = 0.25
#: What the rendered table shows in place of a missing comment on a row beyond the tolerance.
UNSTATED = "**cause not stated**"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))


@dataclass(frozen=True)
class Row:
    """One reported number: the paper's value next to hydra_opt's.

    Attributes:
        item: What is measured, e.g. ``"CP vs RR throughput, Nemotron-H chat B*"``.
        paper: The paper's value (None when the paper gives none, e.g. a hydra_opt-only measurement).
        ours: hydra_opt's value (None when not measured).
        unit: Unit of both values (``"x"`` for ratios, ``"tok/s"``, ``"s"``, ``"%"``...).
        comment: Why the values differ (a measured cause), or what the row means.
    """

    item: str
    paper: float | None
    ours: float | None
    unit: str
    comment: str = ""

    @property
    def ratio(self) -> float | None:
        """``ours / paper`` when both are finite non-zero numbers, else None."""
        if not (_is_number(self.paper) and _is_number(self.ours)):
            return None
        if self.paper == 0 or self.ours == 0:
            return None
        return float(self.ours) / float(self.paper)

    @property
    def flagged(self) -> bool:
        """True when the ratio is off by more than :data:`FLAG_TOLERANCE` and no comment states why."""
        r = self.ratio
        return r is not None and abs(r - 1.0) > FLAG_TOLERANCE and not self.comment.strip()


@dataclass
class Section:
    """One experiment's part of the report.

    Attributes:
        key: Experiment key (``hydra_fig10``...), also the module name and the JSON file stem.
        title: Heading, e.g. ``"HYDRA Fig. 10 / Fig. 11 — placement"``.
        intro_md: Markdown before the table: setup (models, workloads, designs, options, what is simulated).
        rows: The table rows.
        figures: PNG file names relative to the figures folder (``<out>/reproduction/``).
        extra_md: Markdown after the table and figures (discussion, per-design tables).
        wall_s: Wall time of the experiment, s.
        quick: Whether it ran in quick mode.
    """

    key: str
    title: str
    intro_md: str
    rows: list[Row] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    extra_md: str = ""
    wall_s: float = 0.0
    quick: bool = True


def section_to_json(section: Section, **meta: Any) -> dict:
    """A JSON-ready dict of ``section``; ``meta`` (commit, date, ...) is stored under ``"meta"``.

    Non-finite numbers become None (JSON has no NaN).
    """
    d = asdict(section)
    for row in d["rows"]:
        for k in ("paper", "ours"):
            v = row[k]
            row[k] = float(v) if _is_number(v) else None
    d["wall_s"] = float(section.wall_s) if _is_number(section.wall_s) else 0.0
    d["meta"] = dict(meta)
    return d


def section_from_json(data: dict) -> Section:
    """The inverse of :func:`section_to_json` (``meta`` is ignored; read it from the dict)."""
    rows = [Row(item=str(r["item"]), paper=r.get("paper"), ours=r.get("ours"), unit=str(r.get("unit", "")),
                comment=str(r.get("comment", ""))) for r in data.get("rows", [])]
    return Section(
        key=str(data["key"]),
        title=str(data.get("title", data["key"])),
        intro_md=str(data.get("intro_md", "")),
        rows=rows,
        figures=[str(f) for f in data.get("figures", [])],
        extra_md=str(data.get("extra_md", "")),
        wall_s=float(data.get("wall_s", 0.0) or 0.0),
        quick=bool(data.get("quick", True)),
    )


def format_value(v: float | None) -> str:
    """A number with 3–4 significant digits (``—`` for None)."""
    if not _is_number(v):
        return "—"
    v = float(v)
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e6 or a < 1e-3:
        return f"{v:.3g}"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    return f"{v:.3g}"


def _cell(text: str) -> str:
    """Table-safe text (no pipes or newlines)."""
    return text.replace("|", "\\|").replace("\n", " ").strip()


def render_rows(rows: list[Row]) -> str:
    """The markdown table item | paper | hydra_opt | ratio | comment."""
    lines = ["| item | paper | hydra_opt | ratio | comment |", "|---|---:|---:|---:|---|"]
    for r in rows:
        unit = f" {r.unit}" if r.unit and r.unit != "x" else ("×" if r.unit == "x" else "")
        paper = format_value(r.paper) + (unit if _is_number(r.paper) else "")
        ours = format_value(r.ours) + (unit if _is_number(r.ours) else "")
        ratio = "—" if r.ratio is None else f"{r.ratio:.2f}"
        comment = _cell(r.comment) if not r.flagged else UNSTATED
        lines.append(f"| {_cell(r.item)} | {paper} | {ours} | {ratio} | {comment} |")
    return "\n".join(lines)


def render_section(section: Section, fig_prefix: str = "reproduction", meta: dict | None = None) -> str:
    """One section as markdown (heading, intro, table, figures, extra, run line)."""
    parts = [f"## {section.title}", ""]
    if section.intro_md.strip():
        parts += [section.intro_md.strip(), ""]
    if section.rows:
        parts += [render_rows(section.rows), ""]
        n_flag = sum(r.flagged for r in section.rows)
        if n_flag:
            parts += [f"{n_flag} row(s) differ by more than {FLAG_TOLERANCE:.0%} without a stated cause.", ""]
    for fig in section.figures:
        parts += [f"![{fig}]({fig_prefix}/{fig})", ""]
    if section.extra_md.strip():
        parts += [section.extra_md.strip(), ""]
    if not section.rows and not section.wall_s and not meta:
        return "\n".join(parts)  # placeholder (not built / not run): no run line
    run = f"*{'quick' if section.quick else 'full'} mode, {section.wall_s:.0f} s wall"
    if meta:
        if meta.get("commit"):
            run += f", commit {meta['commit']}"
        if meta.get("date"):
            run += f", {meta['date']}"
    parts += [run + "*", ""]
    return "\n".join(parts)


def render_markdown(sections: list[Section], commit: str, metas: dict[str, dict] | None = None,
                    fig_prefix: str = "reproduction") -> str:
    """The whole ``reproduction.md``.

    Args:
        sections: Sections in report order.
        commit: Commit the report was rendered at (each section's own run commit comes from ``metas``).
        metas: Per-key metadata from the JSON files (commit, date) shown under each section.
        fig_prefix: Folder of the figures relative to the markdown file.
    """
    metas = metas or {}
    n_rows = sum(len(s.rows) for s in sections)
    n_flag = sum(r.flagged for s in sections for r in s.rows)
    n_over = sum(1 for s in sections for r in s.rows if r.ratio is not None and abs(r.ratio - 1) > FLAG_TOLERANCE)
    head = [
        "# Reproduction of the HYDRA and DynaCore papers with hydra_opt",
        "",
        f"Rendered at commit `{commit}` by `python -m hydra_opt report --reproduce`. Each section states the "
        "setup, then one row per paper number: paper value | hydra_opt value | ratio (hydra_opt / paper) | "
        f"comment. Rows that differ by more than {FLAG_TOLERANCE:.0%} carry a comment with the measured cause; "
        f"a missing one is shown as {UNSTATED}. Raw results: `reproduction/<key>.json`.",
        "",
        f"{n_rows} rows, {n_over} beyond ±{FLAG_TOLERANCE:.0%}, {n_flag} of them without a stated cause.",
        "",
        "| section | rows | mode | wall |",
        "|---|---:|---|---:|",
    ]
    for s in sections:
        head.append(f"| [{_cell(s.title)}](#{_anchor(s.title)}) | {len(s.rows)} | {'quick' if s.quick else 'full'} "
                    f"| {s.wall_s:.0f} s |")
    head.append("")
    body = [render_section(s, fig_prefix, metas.get(s.key)) for s in sections]
    return "\n".join(head + body).rstrip() + "\n"


def _anchor(title: str) -> str:
    """GitHub-style heading anchor."""
    out = []
    for ch in title.lower().strip():
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch == " ":
            out.append("-")
    return "".join(out)
