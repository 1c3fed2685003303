"""HYDRA Fig. 9 (§VI-D–E): communication-aware placement (CP), + elastic task scheduling (ET), + dynamic batching
(DB) against the round-robin/static/static baseline, for B* and M_T.

Setup in ``studies/paper/hydra_fig9.yaml``. Quick mode: Nemotron-H-4B on its four datasets (the artifact's Fig. 10
designs) at a short horizon; full mode: also Llama-3 and Mamba-2 (designs picked from the artifact's published
fronts), 100 simulated s. hydra_opt reports what its simulator measures: the artifact's stored CP+ET+DB values are
post-scaled (×1.2 throughput, ×0.56 TTFT in most B* rows; METHODS §2g), ours are not.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from hydra_opt.experiments import _hydra_sims as hs
from hydra_opt.experiments._hydra_sims import DS_LABEL, OBJ_LABEL
from hydra_opt.experiments.common import Row, Section
from hydra_opt.experiments.paths import ExperimentPaths

__all__ = ["run", "PAPER"]

#: HYDRA abstract, §VI-D and §VI-E (Fig. 9).
PAPER = {
    "full_tp_mean": 1.55,  # "1.55× the throughput ... on average relative to the static baseline" (§VI-E summary)
    "full_ttft_lower_pct": 43.7,  # "43.7 % lower TTFT on average"
    "full_tp_max": 2.3,  # "throughput gains reaching up to 2.3×"
    "cp_mt_tp": (1.03, 2.00),  # §VI-D: "CP improves throughput by 3 %–100 % ... for M_T"
    "cp_nemo_arxiv_bstar_tp": 1.3,  # §VI-D: "Nemotron-H-ArXiv under B*, CP improves throughput by 1.3×"
    "cp_nemo_arxiv_bstar_ttft": 1.06,  # "... with only a 1.06× increase in TTFT"
    "et_tp": (1.03, 2.50),  # §VI-E: elastic scheduling "3 %–150 % higher throughput"
    "et_ttft_lower": (1.02, 3.14),  # "... and 1.02×–3.14× lower TTFT"
    "db_tp_gain_pct": 15.0,  # "dynamic batching achieves a 15 % throughput gain"
    "db_ttft_lower_pct": 23.0,  # "... while reducing TTFT by 23 % on average"
}
VARIANTS = ("RR", "CP", "CP+ET", "CP+ET+DB")


def run(quick: bool, fig_dir: Path, seed: int = 0, *, models: list[str] | None = None,
        datasets: list[str] | None = None, horizon_s: float | None = None,
        spec_path: str | Path | None = None, paths: ExperimentPaths | None = None) -> Section:
    """Simulate baseline + 3 variants per model × dataset × objective and build the section."""
    t0 = time.perf_counter()
    Path(fig_dir).mkdir(parents=True, exist_ok=True)
    spec = hs.load_spec("hydra_fig9", spec_path, paths, horizon_s=horizon_s)
    h = hs.horizon(spec, quick)
    short = h < 100
    ds_map: dict[str, str] = spec["datasets"]
    dss = list(datasets or ds_map)
    objs: list[str] = spec["objectives"]
    mspecs: dict[str, dict] = spec["models"]
    mkeys = list(models or (spec.get("quick_models", list(mspecs)) if quick else list(mspecs)))
    variants: dict[str, dict] = spec["variants"]
    post = spec.get("artifact_post_scaling", {"throughput": 1.2, "ttft_bstar": 0.56})

    res = {}
    for mk in mkeys:
        ms = mspecs[mk]
        for d in dss:
            for o in objs:
                design = hs.load_design_cached(hs.design_path(spec, ms["design"], dataset=d, objective=o))
                if ms.get("baseline", "same-design-rr") == "same-design-rr":
                    base_design, base_over = design, {"placement": "rr"}
                else:
                    base_design = hs.load_design_cached(hs.design_path(spec, ms["baseline"], dataset=d, objective=o))
                    base_over = {}
                for v, pol in variants.items():
                    if v == "RR":
                        dsg, over = base_design, dict(base_over)
                        # Policies equal to the design's own are not overridden (shares Fig. 10/12 runs).
                        over.update({k: val for k, val in pol.items() if getattr(dsg, k) != val and k != "placement"})
                    else:
                        dsg = design
                        over = {k: val for k, val in pol.items() if getattr(dsg, k) != val}
                    res[mk, d, o, v] = hs.simulate_cached(dsg, ms["model"], ds_map[d],
                                                          hs.sim_options(spec, quick, **over), seed)

    bars = [(mk, d, o) for mk in mkeys for o in objs for d in dss]
    tp = {(b, v): hs.safe_ratio(res[(*b, v)].throughput_tok_s, res[(*b, "RR")].throughput_tok_s) for b in bars
          for v in VARIANTS}
    tt = {(b, v): hs.safe_ratio(res[(*b, v)].ttft_mean_s, res[(*b, "RR")].ttft_mean_s) for b in bars for v in VARIANTS}
    full_tp = [tp[b, "CP+ET+DB"] for b in bars]
    full_tt = [tt[b, "CP+ET+DB"] for b in bars]
    n = len(bars)
    m_tp, m_tt = hs.finite_mean(full_tp), hs.finite_mean(full_tt)
    # Measured decomposition of the full gain into its three steps (geometric chain CP → ET → DB).
    step_cp = hs.finite_mean([tp[b, "CP"] for b in bars])
    step_et = hs.finite_mean([hs.safe_ratio(tp[b, "CP+ET"], tp[b, "CP"]) for b in bars])
    step_db = hs.finite_mean([hs.safe_ratio(tp[b, "CP+ET+DB"], tp[b, "CP+ET"]) for b in bars])
    by_model = {mk: hs.finite_mean([tp[b, "CP+ET+DB"] for b in bars if b[0] == mk]) for mk in mkeys}
    where = (f"{n} bars ({', '.join(mkeys)} × {len(dss)} datasets × {len(objs)} objectives)")
    only = f", {', '.join(mkeys)} only" if len(mkeys) < len(mspecs) else ""
    hnote = (f"{'quick mode' if quick else 'short run'}: {h:g} simulated s (paper 100 s){only}; " if short else "")
    decomposition = (f"{hnote}measured steps (mean over bars): CP ×{step_cp:.2f}, ET ×{step_et:.2f}, DB ×{step_db:.2f}; "
                     f"by model: {', '.join(f'{k} ×{v:.2f}' for k, v in by_model.items())}; the artifact's CP+ET+DB "
                     f"values are post-scaled ×{post['throughput']} TP (METHODS §2g), so the paper's unscaled mean is "
                     f"≈ {PAPER['full_tp_mean'] / post['throughput']:.2f}×")
    rows = [
        Row(f"CP+ET+DB vs RR/static/static, mean throughput ratio over {where}", PAPER["full_tp_mean"], m_tp, "x",
            decomposition if not (abs(m_tp / PAPER["full_tp_mean"] - 1) <= 0.25) else
            f"artifact post-scales CP+ET+DB TP by ×{post['throughput']}; unscaled paper ≈ "
            f"{PAPER['full_tp_mean'] / post['throughput']:.2f}×"),
        Row("CP+ET+DB vs RR/static/static, mean TTFT reduction", PAPER["full_ttft_lower_pct"], 100 * (1 - m_tt), "%",
            f"{hnote}mean TTFT ratio {m_tt:.2f} (ours) vs 0.563 (paper); steps: CP ×"
            f"{hs.finite_mean([tt[b, 'CP'] for b in bars]):.2f}, ET "
            f"×{hs.finite_mean([hs.safe_ratio(tt[b, 'CP+ET'], tt[b, 'CP']) for b in bars]):.2f}, "
            f"DB ×{hs.finite_mean([hs.safe_ratio(tt[b, 'CP+ET+DB'], tt[b, 'CP+ET']) for b in bars]):.2f}; the "
            "artifact multiplies most B* "
            f"CP+ET+DB TTFTs by {post['ttft_bstar']} (METHODS §2g), hydra_opt does not"),
    ]
    imax = hs.finite_extreme(dict(enumerate(full_tp)), max)
    b = bars[imax]
    rows.append(Row("CP+ET+DB vs baseline, max throughput ratio", PAPER["full_tp_max"], full_tp[imax], "x",
                    f"at {b[0]} {DS_LABEL[b[1]]} {OBJ_LABEL[b[2]]}: CP ×{tp[b, 'CP']:.2f}, CP+ET ×{tp[b, 'CP+ET']:.2f}"
                    + (f"; {hnote.rstrip('; ')}" if short else "")))
    mt_bars = [b for b in bars if b[2] == "mt"]
    if mt_bars:
        cp_mt = {b: tp[b, "CP"] for b in mt_bars}
        for j, (fn, name) in enumerate(((min, "min"), (max, "max"))):
            bb = hs.finite_extreme(cp_mt, fn)
            v = cp_mt[bb]
            rows.append(Row(f"CP vs RR, M_T throughput, {name} over {len(mt_bars)} workloads", PAPER["cp_mt_tp"][j], v,
                            "x", f"at {bb[0]} {DS_LABEL[bb[1]]}"
                                 + ("; the CP and RR designs differ (artifact manifest)"
                                    if mspecs[bb[0]].get("baseline", "same-design-rr") != "same-design-rr" else
                                    "; same design, placement only")
                                 + f"; measured TTFT ratio ×{tt[bb, 'CP']:.2f}; HBM port utilisation max/mean CP "
                                   f"{hs.hbm_port_util(res[(*bb, 'CP')])} vs RR {hs.hbm_port_util(res[(*bb, 'RR')])}, "
                                   f"completed requests CP {res[(*bb, 'CP')].completed_requests} / RR "
                                   f"{res[(*bb, 'RR')].completed_requests}"
                            + (f"; {hnote.rstrip('; ')}" if short else "")))
    na = ("nemotron-h", "arxiv", "bstar")
    if na in [tuple(x) for x in bars]:
        rows.append(Row("CP vs RR, Nemotron-H ArXiv B* throughput", PAPER["cp_nemo_arxiv_bstar_tp"], tp[na, "CP"], "x",
                        f"same pair as Fig. 10 ArXiv B* (see that section's absolute table){'; ' + hnote.rstrip('; ') if short else ''}"))
        rows.append(Row("CP vs RR, Nemotron-H ArXiv B* TTFT", PAPER["cp_nemo_arxiv_bstar_ttft"], tt[na, "CP"], "x",
                        "TTFT ratio CP / RR (> 1 = CP slower to first token)"))
    et_tp = {b: hs.safe_ratio(tp[b, "CP+ET"], tp[b, "CP"]) for b in bars}
    et_tt = {b: hs.safe_ratio(tt[b, "CP"], tt[b, "CP+ET"]) for b in bars}
    for label, table, key in (("throughput ratio", et_tp, "et_tp"), ("TTFT reduction factor", et_tt, "et_ttft_lower")):
        for j, (fn, name) in enumerate(((min, "min"), (max, "max"))):
            bb = hs.finite_extreme(table, fn)
            v, paper = table[bb], PAPER[key][j]
            cmt = f"at {bb[0]} {DS_LABEL[bb[1]]} {OBJ_LABEL[bb[2]]}"
            if math.isfinite(v) and abs(v / paper - 1) > 0.25:
                r_et, r_cp = res[(*bb, "CP+ET")], res[(*bb, "CP")]
                cmt += (f": CP {r_cp.throughput_tok_s:.0f} tok/s, TTFT {r_cp.ttft_mean_s:.2f} s, mean busy "
                        f"{hs.finite_mean(r_cp.chiplet_busy_frac):.0%} → CP+ET {r_et.throughput_tok_s:.0f} tok/s, TTFT "
                        f"{r_et.ttft_mean_s:.2f} s, mean busy {hs.finite_mean(r_et.chiplet_busy_frac):.0%}"
                        + (f"; {hnote.rstrip('; ')}" if short else ""))
            rows.append(Row(f"ET (CP+ET vs CP), {label}, {name} over bars", paper, v, "x", cmt))
    db_r = [hs.safe_ratio(tp[b, "CP+ET+DB"], tp[b, "CP+ET"]) for b in bars]
    db_t = [hs.safe_ratio(tt[b, "CP+ET+DB"], tt[b, "CP+ET"]) for b in bars]
    db_tp, db_tt = hs.finite_mean(db_r), hs.finite_mean(db_t)
    fin_r = [v for v in db_r if math.isfinite(v)] or [math.nan]
    fin_t = [v for v in db_t if math.isfinite(v)] or [math.nan]
    rows.append(Row("DB (CP+ET+DB vs CP+ET), mean throughput gain", PAPER["db_tp_gain_pct"], 100 * (db_tp - 1), "%",
                    f"the paper's figure includes the artifact's ×{post['throughput']} post-scaling of CP+ET+DB "
                    f"(METHODS §2g; 20 % of the gain by itself); measured per-bar gains "
                    f"{min(fin_r):.2f}–{max(fin_r):.2f}×"
                    + (f"; {hnote.rstrip('; ')}" if short else "")))
    rows.append(Row("DB (CP+ET+DB vs CP+ET), mean TTFT reduction", PAPER["db_ttft_lower_pct"], 100 * (1 - db_tt), "%",
                    f"artifact post-scales most B* CP+ET+DB TTFTs by {post['ttft_bstar']} (METHODS §2g); measured "
                    f"per-bar TTFT ratios {min(fin_t):.2f}–{max(fin_t):.2f}"
                    + (f"; {hnote.rstrip('; ')}" if short else "")))

    figures = []
    for o in objs:
        ob = [b for b in bars if b[2] == o]
        groups = [f"{b[0]} {DS_LABEL[b[1]]}" for b in ob]
        for metric, table in (("tp", tp), ("ttft", tt)):
            name = f"hydra_fig9_{o}_{metric}.png"
            hs.bar_chart(fig_dir / name, groups, {v: [table[b, v] for b in ob] for v in VARIANTS[1:]},
                      title=f"Fig. 9 ({OBJ_LABEL[o]}): {'throughput' if metric == 'tp' else 'TTFT'} normalised to "
                            f"RR/static/static, {h:g} simulated s",
                      ylabel=f"normalised {'throughput' if metric == 'tp' else 'TTFT'}")
            figures.append(name)
    lines = ["Absolute values (simulated):", "",
             "| model | dataset | objective | variant | TP (tok/s) | TTFT (s) | TP / RR | TTFT / RR | completed |",
             "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for b in bars:
        for v in VARIANTS:
            r = res[(*b, v)]
            lines.append(f"| {b[0]} | {DS_LABEL[b[1]]} | {OBJ_LABEL[b[2]]} | {v} | {r.throughput_tok_s:.1f} | "
                         f"{r.ttft_mean_s:.3f} | {tp[b, v]:.2f} | {tt[b, v]:.2f} | {r.completed_requests} |")
    covered = ", ".join(f"{mk} (`{mspecs[mk]['model']}`)" for mk in mkeys)
    intro = (
        f"Setup (`studies/paper/hydra_fig9.yaml`): {covered} × {', '.join(DS_LABEL[d] for d in dss)}, B* and M_T. "
        "Variants: RR = round-robin placement, static batching, static scheduling (the normalisation); CP = "
        "communication-aware placement; CP+ET = + elastic task scheduling; CP+ET+DB = + dynamic (continuous) "
        "batching. Nemotron-H uses the artifact's Fig. 10 designs (its RR baseline design differs from the CP design, "
        "as in the artifact); Llama-3 and Mamba-2 (full mode) use designs picked from the artifact's published CP "
        "fronts (`studies/paper/designs/fig9-*.yaml`) with the same design under RR as the baseline (the artifact's "
        f"Fig. 9 manifest is not published). `Scenario.paper(horizon_s={h:g})`, seed {seed}; all values simulated. "
        "The paper's CP+ET+DB numbers include the artifact's fixed post-scaling (×1.2 throughput, ×0.56 TTFT in most "
        "B* rows; METHODS §2g); hydra_opt reports the unscaled simulation."
        + (f" **{'Quick mode' if quick else 'Short run'}**: {', '.join(mkeys)}, {h:g} simulated s." if short else "")
    )
    return Section(key="hydra_fig9", title="HYDRA Fig. 9 / §VI-D–E — CP, CP+ET, CP+ET+DB vs RR/static/static",
                   intro_md=intro, rows=rows, figures=figures, extra_md="\n".join(lines),
                   wall_s=time.perf_counter() - t0, quick=quick)
