"""Reports of a study: Pareto front table with B* and M_T, CSV, interactive HTML, PNG, markdown, design export.

Definitions (HYDRA §VI-B; METHODS §2g):

* **front** — the non-dominated COMPLETE (simulated) feasible trials under the study's objectives;
* **M_T** — the front design with the highest simulated throughput;
* **B\\*** — among front designs whose throughput exceeds the *average* throughput of all simulated feasible
  designs of the study, the one with the highest throughput/TTFT ratio (falls back to the whole front when none
  exceeds the average). The HYDRA artifact averages over a TTFT "focus window" around the exhaustive front; a
  study only simulates promoted designs, so hydra_opt averages over those (documented in ``docs/dse.md``).

B* and M_T are defined when the objectives include ``throughput_tok_s`` and ``ttft_s``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from hydra_opt.config import ConfigError
from hydra_opt.dse.reasons import count_reasons, format_reasons, trial_infeasible, trial_reason
from hydra_opt.dse.trial_design import design_label, trial_design
from hydra_opt.evaluate.front import pareto_mask, select_bstar_mt

__all__ = [
    "FrontRow",
    "front_rows",
    "format_front_table",
    "write_report",
    "export_design",
    "trials_frame",
    "design_label",
    "log_axis",
    "reasons_lines",
    "study_title",
    "pareto_figure",
    "publish_to_dashboard",
    "DASHBOARD_PLOT_ID",
    "LOG_AXIS_RATIO",
]


@dataclass
class FrontRow:
    """One trial on the simulated front."""

    number: int
    values: list[float]
    est: list[float | None]
    design: dict[str, Any]
    mark: str = ""


def _metrics(study: optuna.Study) -> list[str]:
    names = study.user_attrs.get("hydra_opt_metrics")
    if names:
        return list(names)
    return [f"obj{i}" for i in range(len(study.directions))]


def _feasible(t: FrozenTrial) -> bool:
    return all(float(c) <= 0 for c in t.user_attrs.get("constraints", ()))


def front_rows(study: optuna.Study) -> tuple[list[FrontRow], dict[str, Any]]:
    """The simulated Pareto front (sorted by the first objective) and facts (B*, M_T, average throughput)."""
    metrics = _metrics(study)
    maximize = [d == StudyDirection.MAXIMIZE for d in study.directions]
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if t.values and _feasible(t)]
    # One row per distinct design (duplicates reuse values).
    seen: set[str] = set()
    uniq = []
    for t in done:
        k = t.user_attrs.get("design_key", str(t.number))
        if k not in seen:
            seen.add(k)
            uniq.append(t)
    facts: dict[str, Any] = {"bstar": None, "mt": None, "average_tp": None, "n_simulated": len(uniq)}
    if not uniq:
        return [], facts
    vals = np.array([t.values for t in uniq], dtype=float)
    mask = pareto_mask(vals, maximize)
    rows = [
        FrontRow(t.number, list(t.values), [t.user_attrs.get(f"est_{m}") for m in metrics], trial_design(t))
        for t, keep in zip(uniq, mask)
        if keep
    ]
    if "throughput_tok_s" in metrics and "ttft_s" in metrics:
        i_tp, i_ttft = metrics.index("throughput_tok_s"), metrics.index("ttft_s")
        tp, ttft = vals[:, i_tp], vals[:, i_ttft]
        avg = float(np.mean(tp))
        b, m = select_bstar_mt(tp, ttft, mask, avg)
        facts.update(bstar=uniq[b].number, mt=uniq[m].number, average_tp=avg)
        for r in rows:
            marks = [s for s, n in (("B*", facts["bstar"]), ("M_T", facts["mt"])) if n == r.number]
            r.mark = ",".join(marks)
    rows.sort(key=lambda r: (r.values[0] if not maximize[0] else -r.values[0], r.number))
    return rows, facts


def format_front_table(study: optuna.Study, *, names: Sequence[str] | None = None) -> str:
    """The front as a fixed-width text table (values simulated, estimates in parentheses)."""
    rows, facts = front_rows(study)
    metric_names = list(names or study.metric_names or _metrics(study))
    if not rows:
        return "Pareto front: no simulated feasible trial yet."
    head = ["mark", "trial", *metric_names, *(f"est {n}" for n in metric_names), "design"]
    lines = []
    for r in rows:
        lines.append(
            [r.mark, str(r.number), *(_fmt(v) for v in r.values), *(_fmt(v) for v in r.est), design_label(r.design)]
        )
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines]
    if facts.get("average_tp") is not None:
        out.append(
            f"B* = best throughput/TTFT among front designs above the average simulated throughput "
            f"({facts['average_tp']:.4g} tok/s over {facts['n_simulated']} simulated designs); M_T = max throughput."
        )
    return "\n".join(out)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    v = float(v)
    if not math.isfinite(v):
        return str(v)
    return f"{v:.4g}"


def trials_frame(study: optuna.Study):
    """All trials as a pandas DataFrame: number, state, promotion, est_*, sim_*, feasibility, design columns."""
    import pandas as pd

    metrics = _metrics(study)
    recs = []
    for t in study.get_trials(deepcopy=False):
        d = trial_design(t)
        rec: dict[str, Any] = {
            "trial": t.number,
            "state": t.state.name,
            "promotion": t.user_attrs.get("promotion", ""),
            "feasible": _feasible(t) and "infeasible" not in t.user_attrs,
            "infeasible": "; ".join(trial_infeasible(t)),
        }
        rec["outcome"], rec["reason"] = trial_reason(t)
        for m in metrics:
            rec[f"est_{m}"] = t.user_attrs.get(f"est_{m}")
            rec[f"sim_{m}"] = t.user_attrs.get(f"sim_{m}")
        for k, v in (d.get("chiplets") or {}).items():
            rec[f"n_{k}"] = v
        for k in ("n_mem", "memory", "d2d_bw_gbps", "max_batch", "placement", "batching", "scheduler", "precision"):
            if k in d:
                rec[k] = d[k]
        rec["design_key"] = t.user_attrs.get("design_key")
        recs.append(rec)
    if not recs:  # no trial yet (a run stopped before its first one): the columns, no rows
        return pd.DataFrame(columns=["trial", "state", "promotion", "feasible", "infeasible", "outcome", "reason",
                                     *(f"{w}_{m}" for m in metrics for w in ("est", "sim")), "design_key"])
    return pd.DataFrame.from_records(recs)


def write_report(study: optuna.Study, out_dir: str | Path) -> dict[str, Path]:
    """Write ``front.csv``, ``trials.csv``, ``pareto.html``, ``pareto.png`` and ``summary.md`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    metrics = _metrics(study)
    names = list(study.metric_names or metrics)
    rows, facts = front_rows(study)
    df = trials_frame(study)
    paths = {k: out / f for k, f in (("front", "front.csv"), ("trials", "trials.csv"), ("html", "pareto.html"),
                                     ("png", "pareto.png"), ("summary", "summary.md"))}
    df.to_csv(paths["trials"], index=False)
    import pandas as pd

    front = pd.DataFrame.from_records(
        [{"mark": r.mark, "trial": r.number, **{f"sim_{m}": v for m, v in zip(metrics, r.values)},
          **{f"est_{m}": v for m, v in zip(metrics, r.est)}, "design": design_label(r.design)} for r in rows]
    )
    front.to_csv(paths["front"], index=False)
    _plots(df, rows, facts, metrics, names, paths, study_title(study))
    _summary(study, df, rows, facts, metrics, names, paths)
    return paths


def study_title(study: optuna.Study) -> str:
    """``study: model on workload`` and, on a second line, ``objective vs objective`` (pairs from the study's
    ``hydra_opt_pairs`` attribute)."""
    pairs = []
    for key in study.user_attrs.get("hydra_opt_pairs") or []:
        model, _, workload = str(key).partition("/")
        pairs.append(f"{_short_ref(model)} on {_short_ref(workload)}")
    what = ", ".join(pairs[:3]) + (f" (+{len(pairs) - 3} pairs)" if len(pairs) > 3 else "")
    names = list(study.metric_names or _metrics(study))
    return f"{study.study_name}: {what or 'study'}\n{' vs '.join(names)}"


def _short_ref(ref: str) -> str:
    """A model/workload name, or the stem of a file path."""
    return Path(ref).stem if ref.endswith((".yaml", ".yml", ".csv", ".jsonl", ".json")) else ref


#: A positive axis whose values span at least this max/min ratio is drawn logarithmic.
LOG_AXIS_RATIO = 20.0


def log_axis(*columns: Any) -> bool:
    """Whether the values of ``columns`` (together) are positive and span >= :data:`LOG_AXIS_RATIO`."""
    vals = np.concatenate([np.asarray(c, dtype=float).ravel() for c in columns]) if columns else np.zeros(0)
    vals = vals[np.isfinite(vals)]
    return bool(vals.size >= 2 and vals.min() > 0 and vals.max() / vals.min() >= LOG_AXIS_RATIO)


def _plot_data(df, rows, metrics):
    """(estimated feasible, simulated, front) frames of the first two objectives."""
    mx = metrics[0]
    est = df[df["feasible"] & df[f"est_{mx}"].notna()]
    sim = df[df[f"sim_{mx}"].notna() & (df["outcome"] == "simulated")]
    front_ids = {r.number for r in rows}
    fr = sim[sim["trial"].isin(front_ids)].sort_values(f"sim_{mx}")
    return est, sim, fr


def _plotly_figure(df, rows, facts, metrics, names, title: str):
    """The interactive Pareto plot: estimates, simulations, the simulated front, B* and M_T; titled axes."""
    import plotly.graph_objects as go

    mx, my = metrics[0], metrics[1]
    est, sim, fr = _plot_data(df, rows, metrics)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=est[f"est_{mx}"], y=est[f"est_{my}"], mode="markers", name="estimated (all feasible)",
                             marker=dict(color="lightgray", size=6), text=est["trial"].map(lambda n: f"trial {n}")))
    fig.add_trace(go.Scatter(x=sim[f"sim_{mx}"], y=sim[f"sim_{my}"], mode="markers", name="simulated (promoted)",
                             marker=dict(color="royalblue", size=8), text=sim["trial"].map(lambda n: f"trial {n}")))
    fig.add_trace(go.Scatter(x=fr[f"sim_{mx}"], y=fr[f"sim_{my}"], mode="lines+markers", name="simulated front",
                             line=dict(color="crimson"), marker=dict(color="crimson", size=10),
                             text=fr["trial"].map(lambda n: f"trial {n}")))
    for key, sym in (("bstar", "star"), ("mt", "triangle-up")):
        n = facts.get(key)
        if n is None:
            continue
        row = sim[sim["trial"] == n]
        fig.add_trace(go.Scatter(x=row[f"sim_{mx}"], y=row[f"sim_{my}"], mode="markers+text",
                                 name="B*" if key == "bstar" else "M_T", text=["B*" if key == "bstar" else "M_T"],
                                 textposition="top center" if key == "bstar" else "bottom center",
                                 marker=dict(symbol=sym, size=18, color="gold",
                                                                        line=dict(color="black", width=1))))
    head, _, sub = title.partition("\n")
    fig.update_layout(title=f"{head}<br><sup>{sub}: estimated vs simulated</sup>", xaxis_title=names[0],
                      yaxis_title=names[1], template="plotly_white")
    fig.update_xaxes(type="log" if log_axis(est[f"est_{mx}"], sim[f"sim_{mx}"]) else "linear", tickformat=".4~g")
    fig.update_yaxes(type="log" if log_axis(est[f"est_{my}"], sim[f"sim_{my}"]) else "linear", tickformat=".4~g")
    fig.update_traces(hovertemplate="%{text}<br>%{x:.4~g}, %{y:.4~g}<extra>%{fullData.name}</extra>")
    return fig


def pareto_figure(study: optuna.Study):
    """The report's interactive Pareto plot of a study (``plotly.graph_objects.Figure``; None below 2 objectives)."""
    metrics = _metrics(study)
    if len(metrics) < 2:
        return None
    rows, facts = front_rows(study)
    return _plotly_figure(trials_frame(study), rows, facts, metrics, list(study.metric_names or metrics),
                          study_title(study))


#: ``graph_object_id`` of the Pareto plot hydra_opt saves into a study for optuna-dashboard.
DASHBOARD_PLOT_ID = "hydra-opt-pareto"


def publish_to_dashboard(study: optuna.Study) -> None:
    """Save what optuna-dashboard cannot compute into the study: the study note (trials by outcome, top reasons,
    the simulated front with B*/M_T) and the titled Pareto plot (the dashboard's own plot has no axis titles)."""
    try:
        from optuna_dashboard import save_note, save_plotly_graph_object
    except ImportError:  # pragma: no cover - optuna-dashboard is a dependency
        return
    table = format_front_table(study).splitlines()
    # The B*/M_T definition is one long line: a paragraph (wrapped), not part of the fixed-width block.
    tail = [table.pop()] if table and table[-1].startswith("B* =") else []
    save_note(study, "## hydra_opt summary\n\n```\n" + "\n".join([*reasons_lines(study), "", *table]) + "\n```\n\n"
              + "\n".join(tail) + "\n")
    fig = pareto_figure(study)
    if fig is not None:
        save_plotly_graph_object(study, fig, graph_object_id=DASHBOARD_PLOT_ID)


def _plots(df, rows, facts, metrics, names, paths, title: str = "") -> None:
    if len(metrics) < 2:
        paths["html"].write_text("<p>single-objective study: no Pareto plot</p>", encoding="utf-8")
        return
    mx, my = metrics[0], metrics[1]
    # plotly.js embedded (≈4.6 MB): the report opens offline and from an archive.
    _plotly_figure(df, rows, facts, metrics, names, title).write_html(str(paths["html"]), include_plotlyjs=True)
    est, sim, fr = _plot_data(df, rows, metrics)
    logx = log_axis(est[f"est_{mx}"], sim[f"sim_{mx}"])
    logy = log_axis(est[f"est_{my}"], sim[f"sim_{my}"])

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figm, ax = plt.subplots(figsize=(7, 5), dpi=120)
    ax.scatter(est[f"est_{mx}"], est[f"est_{my}"], s=10, c="lightgray", label="estimated (all feasible)")
    ax.scatter(sim[f"sim_{mx}"], sim[f"sim_{my}"], s=18, c="royalblue", label="simulated (promoted)")
    ax.plot(fr[f"sim_{mx}"], fr[f"sim_{my}"], "-o", c="crimson", ms=5, label="simulated front")
    for key, mk, lab in (("bstar", "*", "B*"), ("mt", "^", "M_T")):
        n = facts.get(key)
        if n is not None:
            row = sim[sim["trial"] == n]
            ax.scatter(row[f"sim_{mx}"], row[f"sim_{my}"], s=220, marker=mk, c="gold", edgecolors="k", label=lab, zorder=5)
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_title(f"{title}: estimated vs simulated", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    figm.tight_layout()
    figm.savefig(paths["png"])
    plt.close(figm)


def reasons_lines(study: optuna.Study) -> list[str]:
    """Finished trials counted by outcome, with the top reasons of those not simulated (``hydra_opt.dse.reasons``)."""
    counts = count_reasons(study.get_trials(deepcopy=False))
    head = ", ".join(f"{c.outcome} {c.count}" for c in counts) or "no finished trial"
    return [f"trials by outcome: {head}", *format_reasons(counts)]


def _summary(study, df, rows, facts, metrics, names, paths) -> None:
    n = len(df)
    by = df["state"].value_counts().to_dict() if n else {}
    infeasible = int((df["infeasible"] != "").sum()) if n else 0
    complete = by.get("COMPLETE", 0)
    simulated = int(sum(1 for t in study.get_trials(deepcopy=False) if "sim_wall_s" in t.user_attrs))
    feasible_finished = complete + by.get("PRUNED", 0) - infeasible
    lines = [
        f"# Study `{study.study_name}`",
        "",
        f"- trials: {n} ({', '.join(f'{k} {v}' for k, v in sorted(by.items()))})",
        f"- infeasible (PRUNED with constraint > 0): {infeasible}",
        f"- promotion rate: {simulated / feasible_finished:.1%} of feasible finished trials simulated ({simulated} simulations)" if feasible_finished else "- promotion rate: n/a",
        f"- objectives: {', '.join(names)}",
        "",
        "## Trials by outcome (why a trial was not simulated)",
        "",
        "```",
        *reasons_lines(study),
        "```",
        "",
        "## Pareto front (simulated)",
        "",
        "| mark | trial | " + " | ".join(names) + " | design |",
        "|---|---|" + "---|" * len(names) + "---|",
    ]
    for r in rows:
        lines.append(f"| {r.mark} | {r.number} | " + " | ".join(_fmt(v) for v in r.values) + f" | {design_label(r.design)} |")
    if facts.get("average_tp") is not None:
        lines += ["", f"B* = highest throughput/TTFT among front designs above the average simulated throughput "
                      f"({facts['average_tp']:.4g} tok/s); M_T = highest throughput (HYDRA §VI-B)."]
    lines += ["", "Files: `front.csv`, `trials.csv`, `pareto.html`, `pareto.png`."]
    paths["summary"].write_text("\n".join(lines) + "\n", encoding="utf-8")


def export_design(study: optuna.Study, number: int, path: str | Path) -> Path:
    """Write trial ``number``'s design as ``kind: design`` YAML (accepted by ``python -m hydra_opt simulate``)."""
    from hydra_opt.dse.artifacts import write_design_yaml

    trials = [t for t in study.get_trials(deepcopy=False) if t.number == number]
    if not trials:
        raise ConfigError(f"is not a trial of study {study.study_name!r} (it has {len(study.trials)})",
                          key="--export-design", value=number)
    design = trial_design(trials[0])
    if not design:
        raise ConfigError("has no stored design", key="--export-design", value=number)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    write_design_yaml(design, p, header=f"trial {number} of study {study.study_name} ({trials[0].state.name})")
    return p
