"""HYDRA Fig. 8 / §VI-B: estimator-selected Pareto points vs an exhaustive front, B* and M_T, and hydra_opt's
simulation of the artifact's published fronts (issue 8 item 1).

Per workload (model × dataset; the study files ``studies/paper/fig8_{llama3,mamba2,nemotron_h}.yaml``: HYDRA
artifact model shapes, the ``hydra-*`` replays, CP placement, static batching and scheduling, ``Scenario.paper``
with a shortened horizon):

1. the vectorised estimator screens the enumerated Table III space (full mode: every design; quick mode: a
   stratified subset) and proposes ``k`` designs along its estimated front, always including its estimated B* and
   M_T (:func:`hydra_opt.experiments.fronts.select_candidates`);
2. a stratified sample S of the screened designs (round-robin over batch × D2D bandwidth × HBM-count strata) is
   simulated; the *reference* ("exhaustive") front is the front of every simulated design, S ∪ candidates — the
   documented sub-space that stands in for the paper's exhaustive sweep, which this machine cannot afford;
3. B* and M_T (HYDRA §VI-B; the B* throughput floor = the mean simulated throughput of S, an unbiased estimate of
   the design-space average) of the reference set and of the simulated candidates; the estimator's gap =
   1 − TP(candidates' B*) / TP(reference B*), the same for M_T (paper, Nemotron-H-LW: 8 % and 12 %).

Artifact comparison (Llama-3, Mamba-2): designs of the published fronts
(``reference/hydra_artifact/pareto_fronts`` of the shared data folder, :mod:`hydra_opt.experiments.paths`) are
simulated with hydra_opt under ``Scenario.paper``;
Spearman's ρ of throughput (and TTFT) between the published and our values over those designs, and whether the
published B*/M_T (recomputed on the simulated subset) stay B*/M_T with our numbers. In full mode each published
M_T design also runs the artifact-rule ladder (:mod:`hydra_opt.experiments.artifact_probe`), so an offset from
the published throughput comes with a measured cause.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from hydra_opt.experiments.artifact_probe import ARTIFACT_DECODE_BW_GBPS, STEP_LABELS, probe_ladder
from hydra_opt.experiments.common import Row, Section
from hydra_opt.experiments.paths import ExperimentPaths
from hydra_opt.experiments.fronts import (
    artifact_front_path,
    bstar_mt,
    front_mask,
    load_artifact_front,
    pick_along_front,
    select_candidates,
    simulate_cached,
    spearman,
    stratified_sample,
)

__all__ = ["run", "QUICK", "FULL", "PAPER", "MODEL_KEYS", "study_file", "WorkloadResult", "run_workload",
           "compare_artifact", "ARTIFACT_DECODE_BW_GBPS"]

#: Model keys; each has a study file ``studies/paper/fig8_<key>.yaml`` (model, space, simulate/estimate options).
MODEL_KEYS = ("llama3", "mamba2", "nemotron_h")


def study_file(model_key: str, paths: ExperimentPaths | None = None) -> Path:
    """The Fig. 8 study file of ``model_key`` in the checkout of ``paths`` (default :meth:`ExperimentPaths.default`)."""
    return (paths or ExperimentPaths.default()).paper_dir / f"fig8_{model_key}.yaml"

DATASETS = ("hydra-arxiv", "hydra-bwb", "hydra-chat", "hydra-longwriter")

#: Paper values (HYDRA §VI-B "Accuracy of the Markov-based performance estimator", Fig. 8; §VI-B Methodology).
PAPER = {
    "nemotron_lw_bstar_gap_pct": 8.0,   # "in the Nemotron-H–LW workload, B* exhibits a 8% throughput gap"
    "nemotron_lw_mt_gap_pct": 12.0,     # "the throughput of M_T deviates by approximately 12%"
    "reduction_min_x": 2520.0,          # "reducing the number of simulated design points by 2520–8520×"
    "reduction_max_x": 8520.0,
}

#: Quick mode (≤ ~2 min here): 2 workloads, 400 screened designs, 8 stratified + 4 estimator picks, 10 s runs;
#: the artifact comparison on Llama-3 CHAT with 6 published designs, 10 simulated s.
QUICK: dict[str, Any] = dict(
    workloads=(("nemotron_h", "hydra-longwriter"), ("llama3", "hydra-chat")),
    screen=400, n_strat=8, k=4, horizon_s=10.0,
    artifact=(("llama3", "hydra-chat"),), artifact_designs=6, artifact_horizon_s=10.0,
)
#: Full mode: all 12 workloads, the whole space screened, 24 stratified + 8 picks, 20 s runs; every published
#: front file (Llama-3, Mamba-2 × 4) with up to 6 designs at the artifact's 100 s.
FULL: dict[str, Any] = dict(
    workloads=tuple((m, d) for m in ("llama3", "mamba2", "nemotron_h") for d in DATASETS),
    screen=None, n_strat=24, k=8, horizon_s=20.0,
    artifact=tuple((m, d) for m in ("llama3", "mamba2") for d in DATASETS), artifact_designs=6,
    artifact_horizon_s=100.0,
)

_SHORT = {"hydra-arxiv": "ARXIV", "hydra-bwb": "BWB", "hydra-chat": "CHAT", "hydra-longwriter": "LW"}
_MODEL_LABEL = {"llama3": "Llama-3", "mamba2": "Mamba-2", "nemotron_h": "Nemotron-H"}


def _evaluator(spec: Any, horizon_s: float, **sim_over: Any) -> Any:
    """The study's evaluator with the horizon (and ``sim_over``) overridden (estimator window = whole run, as the
    paper preset)."""
    from hydra_opt.evaluate.evaluators import HydraEvaluator

    scn = {**(spec.scenario or {}), "horizon_s": float(horizon_s)}
    sim = {**(spec.simulate_options or {}), **sim_over}
    est = {**(spec.estimate_options or {}), "window_s": (0.0, float(horizon_s))}
    return HydraEvaluator(estimate_options=est, simulate_options=sim, file=spec.file, scenario=scn,
                          design_overrides=spec.design_overrides)


@dataclasses.dataclass
class WorkloadResult:
    """Everything measured on one workload (values in tok/s and s; indices into ``designs``)."""

    model_key: str
    model: str
    workload: str
    n_space: int
    n_screened: int
    est_wall_s: float
    sim_wall_s: float
    designs: list[dict[str, Any]]
    est_tp: np.ndarray
    est_ttft: np.ndarray
    strat: list[int]
    picks: list[int]
    sim_tp: dict[int, float]
    sim_ttft: dict[int, float]

    @property
    def label(self) -> str:
        return f"{_MODEL_LABEL[self.model_key]}-{_SHORT.get(self.workload, self.workload)}"

    def arrays(self, idx: list[int]) -> tuple[np.ndarray, np.ndarray]:
        return (np.array([self.sim_tp[i] for i in idx], dtype=float),
                np.array([self.sim_ttft[i] for i in idx], dtype=float))

    def summary(self) -> dict[str, Any]:
        """Reference front, B*/M_T of the reference and of the estimator's picks, gaps (fractions)."""
        ref_idx = sorted(set(self.strat) | set(self.picks))
        tp, tt = self.arrays(ref_idx)
        s_tp, _ = self.arrays(self.strat)
        served = s_tp[np.isfinite(s_tp) & (s_tp > 0)]
        floor = float(served.mean()) if served.size else None
        mask = front_mask(tp, tt)
        b, m = bstar_mt(tp, tt, mask, floor)
        p_tp, p_tt = self.arrays(self.picks)
        pb, pm = bstar_mt(p_tp, p_tt, None, floor)
        out: dict[str, Any] = dict(workload=self.label, n_space=self.n_space, n_screened=self.n_screened,
                                   n_sim=len(ref_idx), est_wall_s=self.est_wall_s, sim_wall_s=self.sim_wall_s,
                                   front=int(mask.sum()), floor_tp=floor,
                                   front_from_picks=int(sum(mask[j] for j, i in enumerate(ref_idx)
                                                            if i in self.picks)))
        if b < 0 or pb < 0:
            out.update(bstar_gap=math.nan, mt_gap=math.nan)
            return out
        ref_b, ref_m = ref_idx[b], ref_idx[m]
        pick_b, pick_m = self.picks[pb], self.picks[pm]
        out.update(
            ref_bstar=ref_b, ref_mt=ref_m, pick_bstar=pick_b, pick_mt=pick_m,
            ref_bstar_tp=self.sim_tp[ref_b], ref_bstar_ttft=self.sim_ttft[ref_b],
            ref_mt_tp=self.sim_tp[ref_m], ref_mt_ttft=self.sim_ttft[ref_m],
            pick_bstar_tp=self.sim_tp[pick_b], pick_bstar_ttft=self.sim_ttft[pick_b],
            pick_mt_tp=self.sim_tp[pick_m], pick_mt_ttft=self.sim_ttft[pick_m],
            bstar_gap=1.0 - self.sim_tp[pick_b] / self.sim_tp[ref_b],
            mt_gap=1.0 - self.sim_tp[pick_m] / self.sim_tp[ref_m],
            bstar_same=pick_b == ref_b, mt_same=pick_m == ref_m,
            # Estimate vs simulation of the designs the estimator itself calls B* and M_T.
            est_bstar_err=self.est_tp[pick_b] / self.sim_tp[pick_b] - 1.0 if self.sim_tp[pick_b] > 0 else math.nan,
            est_mt_err=self.est_tp[pick_m] / self.sim_tp[pick_m] - 1.0 if self.sim_tp[pick_m] > 0 else math.nan,
        )
        return out


def run_workload(model_key: str, workload: str, *, screen: int | None, n_strat: int, k: int, horizon_s: float,
                 seed: int = 0, log=print, paths: ExperimentPaths | None = None) -> WorkloadResult:
    """Screen, select, simulate one (model, workload) pair (module docstring, steps 1–2)."""
    from hydra_opt.dse.exhaustive import run_exhaustive
    from hydra_opt.evaluate.objectives import DEFAULT_OBJECTIVES
    from hydra_opt.dse.spec import load_study_spec

    spec = load_study_spec(study_file(model_key, paths))
    model = spec.pairs[0][0]
    ev = _evaluator(spec, horizon_s)
    space = list(spec.space.enumerate())
    screened = [space[i] for i in stratified_sample(space, screen, seed)] if screen else space
    res = run_exhaustive(screened, [(model, workload)], DEFAULT_OBJECTIVES, ev, simulate=0)
    est_tp = np.where(res.feasible, res.est["throughput_tok_s"], np.nan)
    est_tt = np.where(res.feasible, res.est["ttft_s"], np.nan)
    feasible = np.flatnonzero(res.feasible)
    strat = [int(feasible[j]) for j in stratified_sample([screened[i] for i in feasible], n_strat, seed + 1)]
    picks = select_candidates(est_tp, est_tt, k)
    sim_tp: dict[int, float] = {}
    sim_tt: dict[int, float] = {}
    sim_wall = 0.0
    for i in sorted(set(strat) | set(picks)):
        metrics, wall = simulate_cached(ev, screened[i], model, workload)
        sim_tp[i] = float(metrics.get("throughput_tok_s", math.nan))
        sim_tt[i] = float(metrics.get("ttft_mean_s", math.nan))
        sim_wall += wall
    log(f"[hydra_fig8] {model} {workload}: screened {len(screened)} in {res.est_wall_s:.1f} s, "
        f"simulated {len(sim_tp)} in {sim_wall:.1f} s")
    return WorkloadResult(model_key, model, workload, len(space), len(screened), res.est_wall_s, sim_wall, screened,
                          est_tp, est_tt, strat, picks, sim_tp, sim_tt)


def compare_artifact(model_key: str, workload: str, *, n_designs: int, horizon_s: float,
                     log=print, probe: bool = False, paths: ExperimentPaths | None = None) -> dict[str, Any] | None:
    """Simulate up to ``n_designs`` of the published front (spread along it, published B* and M_T included).

    With ``probe``, the published M_T design also runs the artifact-rule ladder of
    :mod:`hydra_opt.experiments.artifact_probe` (batch limit, half-rate MACs, attention costing, reserved NoI
    bandwidth, then prefill slowed to the published TTFT): a measured account of where an offset comes from.
    None when the artifact has no front for the pair, or the shared data folder of ``paths`` does not hold it.
    """
    from hydra_opt.dse.spec import load_study_spec

    paths = paths or ExperimentPaths.default()
    spec = load_study_spec(study_file(model_key, paths))
    model = spec.pairs[0][0]
    path = artifact_front_path(model, workload, paths.artifact_fronts)
    if path is None or not path.exists():
        return None
    pts = load_artifact_front(path)
    ptp = np.array([p.throughput_tok_s for p in pts])
    ptt = np.array([p.ttft_s for p in pts])
    pb, pm = bstar_mt(ptp, ptt)
    chosen = sorted({pb, pm} | set(pick_along_front(ptp, ptt, np.arange(len(pts)), max(n_designs - 1, 1))))
    chosen = [i for i in chosen if i >= 0]
    ev = _evaluator(spec, horizon_s)
    ours_tp, ours_tt, wall = [], [], 0.0
    for i in chosen:
        metrics, w = simulate_cached(ev, pts[i].design, model, workload)
        ours_tp.append(float(metrics.get("throughput_tok_s", math.nan)))
        ours_tt.append(float(metrics.get("ttft_mean_s", math.nan)))
        wall += w
    ours_tp_a, ours_tt_a = np.array(ours_tp), np.array(ours_tt)
    sub_tp, sub_tt = ptp[chosen], ptt[chosen]
    # B*/M_T recomputed on the simulated subset, once with the published numbers and once with ours.
    sb, sm = bstar_mt(sub_tp, sub_tt, np.ones(len(chosen), dtype=bool))
    ob, om = bstar_mt(ours_tp_a, ours_tt_a, np.ones(len(chosen), dtype=bool))
    ratio = ours_tp_a / sub_tp
    ladder = None
    if probe and ev.scenario.paper_preset:
        from hydra_opt.experiments._hydra_sims import SimRun

        i = chosen[sm]
        ladder = probe_ladder(pts[i].design, model, workload, SimRun(ev.scenario, ev.sim_options),
                              published_ttft_s=float(ptt[i]))
    log(f"[hydra_fig8] artifact {model} {workload}: {len(chosen)} of {len(pts)} published front designs "
        f"simulated in {wall:.1f} s")
    return dict(
        file=path.name, tag=f"{_MODEL_LABEL[model_key]}-{_SHORT[workload]}", n_front=len(pts), n=len(chosen),
        wall_s=wall, horizon_s=horizon_s, labels=[pts[i].label for i in chosen],
        published_tp=sub_tp.tolist(), published_ttft=sub_tt.tolist(), ours_tp=ours_tp, ours_ttft=ours_tt,
        rho_tp=spearman(sub_tp, ours_tp_a), rho_ttft=spearman(sub_tt, ours_tt_a),
        mt_same=bool(sm == om), bstar_same=bool(sb == ob),
        pub_mt=chosen[sm], pub_bstar=chosen[sb], pub_mt_tp=float(sub_tp[sm]), ours_at_pub_mt_tp=float(ours_tp_a[sm]),
        pub_bstar_ttft=float(sub_tt[sb]), ours_at_pub_bstar_ttft=float(ours_tt_a[sb]),
        median_tp_ratio=float(np.nanmedian(ratio)) if np.isfinite(ratio).any() else math.nan,
        zero_tp=int(np.sum(~(ours_tp_a > 0))), pub_mt_ttft=float(sub_tt[sm]), ladder=ladder,
    )


def _ladder_cause(a: dict[str, Any]) -> str:
    """The measured cause sentence of a published-M_T offset from its artifact-rule ladder (``compare_artifact``)."""
    lad, pub_tp, pub_tt = a["ladder"], a["pub_mt_tp"], a["pub_mt_ttft"]
    steps = {k: (tp, tt) for k, tp, tt in lad["steps"]}
    names = {"limit": f"the artifact's batch limit ({lad['limit']} batches)", "half_rate": "half-rate MACs",
             "attention": "its attention costing",
             "reserved": f"reserved unshared {lad['reserved_gbps']:.0f} GB/s flows"}
    chain = ", ".join(f"{names[k]} → {steps[k][0]:.0f} tok/s (×{steps[k][0] / pub_tp:.2f}), TTFT {steps[k][1]:.1f} s"
                      for k in ("limit", "half_rate", "attention", "reserved") if k in steps)
    ours_tt = steps["ours"][1]
    text = (f"probes (cumulative; artifact_probe ladder, table below): {chain}; the published TTFT is "
            f"{pub_tt:.1f} s vs our {ours_tt:.1f} s")
    if "prefill_fit" not in steps:
        return text + "; the TTFT already matches, no prefill fit"
    tp, tt = steps["prefill_fit"]
    r = tp / pub_tp
    text += (f"; with the prefill chiplets' MAC rate ×{lad['prefill_scale']:.2f} more, so that TTFT matches "
             f"({tt:.1f} s), the design simulates at {tp:.0f} tok/s (×{r:.2f} of published)")
    if abs(r - 1) <= 0.25:
        return text + (": the offset is explained by the rules above plus a prefill pass as slow as the published "
                       f"TTFT implies (the published TTFT is {pub_tt / ours_tt:.1f}× ours)")
    return text + ": the artifact's prefill speed does not explain it"


def _ladder_summary(lads: list[dict[str, Any]]) -> str:
    """One measured sentence on how far the ladder's last step lands from the published throughput, for the fronts
    whose published M_T is off by more than 25 % and for those that already agree (its limits)."""
    def last(a: dict[str, Any]) -> float:
        return a["ladder"]["steps"][-1][1] / a["pub_mt_tp"]

    off = [a for a in lads if abs(a["ours_at_pub_mt_tp"] / a["pub_mt_tp"] - 1) > 0.25]
    ok = [a for a in lads if a not in off]

    def span(group: list[dict[str, Any]]) -> str:
        vals = sorted(last(a) for a in group)
        each = ", ".join(f"{a['tag']} ×{last(a):.2f}" for a in group)
        return f"×{vals[0]:.2f}–×{vals[-1]:.2f} ({each})" if vals else "—"

    return (f"Last step of the ladder vs the published throughput: on the {len(off)} published M_T designs hydra_opt "
            f"simulates more than 25 % away from their published value it lands at {span(off)}; on the {len(ok)} that "
            f"already agree within 25 % at {span(ok)}. The ladder is a measurement of the long-prompt offsets (the "
            "published TTFT pins how slow the artifact's prefill pass is), not an emulation of the artifact: where the "
            "artifact's rules added here slow our run more than the published numbers show, the last step lands "
            "below 1.")


def _pct(x: float) -> float:
    return 100.0 * x if x is not None and math.isfinite(x) else math.nan


def _plot(results: list[WorkloadResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(results)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for ax, r in zip(axes.flat, results):
        s = r.summary()
        ref_idx = sorted(set(r.strat) | set(r.picks))
        tp, tt = r.arrays(ref_idx)
        ok = np.isfinite(tp) & np.isfinite(tt) & (tp > 0)
        ax.scatter(tt[ok], tp[ok], s=12, c="0.7", label="simulated (stratified)")
        mask = front_mask(tp, tt)
        order = np.argsort(tt[mask])
        ax.plot(tt[mask][order], tp[mask][order], "r-o", ms=3, lw=1, label="reference front")
        ptp, ptt = r.arrays(r.picks)
        pok = np.isfinite(ptp) & np.isfinite(ptt) & (ptp > 0)
        ax.scatter(ptt[pok], ptp[pok], s=22, c="tab:blue", label="estimator picks (simulated)")
        etp, ett = r.est_tp[r.picks], r.est_ttft[r.picks]
        eok = np.isfinite(etp) & np.isfinite(ett) & (etp > 0)
        ax.scatter(ett[eok], etp[eok], s=22, facecolors="none", edgecolors="tab:blue", label="their estimates")
        for key, mk in (("ref_bstar", "*"), ("ref_mt", "^")):
            if key in s:
                i = s[key]
                ax.scatter([r.sim_ttft[i]], [r.sim_tp[i]], marker=mk, s=120, c="red", zorder=5)
        for key, mk in (("pick_bstar", "*"), ("pick_mt", "^")):
            if key in s:
                i = s[key]
                ax.scatter([r.sim_ttft[i]], [r.sim_tp[i]], marker=mk, s=60, c="tab:blue", zorder=6)
        ax.set_title(r.label, fontsize=9)
        ax.set_xlabel("TTFT [s]", fontsize=8)
        ax.set_ylabel("throughput [tok/s]", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6, loc="lower right")
    fig.suptitle("HYDRA Fig. 8 with hydra_opt: reference front (red; ★ B*, ▲ M_T) vs estimator picks (blue)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_artifact(arts: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
    for a in arts:
        axes[0].scatter(a["published_tp"], a["ours_tp"], s=14, label=a["tag"])
        axes[1].scatter(a["published_ttft"], a["ours_ttft"], s=14, label=a["tag"])
    for ax, name in zip(axes, ("throughput [tok/s]", "TTFT [s]")):
        lo, hi = ax.get_xlim()
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xlabel(f"artifact (published) {name}", fontsize=8)
        ax.set_ylabel(f"hydra_opt (paper preset) {name}", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].legend(fontsize=6)
    fig.suptitle("Published Fig. 8 front designs re-simulated by hydra_opt", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fmt(x: Any, nd: int = 1) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def run(quick: bool, fig_dir: Path, seed: int = 0, *, log=print, paths: ExperimentPaths | None = None,
        **overrides: Any) -> Section:
    """Run the Fig. 8 reproduction (``overrides`` replace entries of :data:`QUICK` / :data:`FULL`)."""
    t0 = time.perf_counter()
    cfg = dict(QUICK if quick else FULL)
    cfg.update(overrides)
    fig_dir = Path(fig_dir)
    fig_dir.mkdir(parents=True, exist_ok=True)
    results = [run_workload(m, w, screen=cfg["screen"], n_strat=cfg["n_strat"], k=cfg["k"],
                            horizon_s=cfg["horizon_s"], seed=seed, log=log, paths=paths) for m, w in cfg["workloads"]]
    arts = [a for a in (compare_artifact(m, w, n_designs=cfg["artifact_designs"],
                                         horizon_s=cfg["artifact_horizon_s"], log=log,
                                         probe=cfg["artifact_horizon_s"] >= 100, paths=paths)
                        for m, w in cfg["artifact"]) if a is not None]
    sums = [r.summary() for r in results]
    figures = []
    if results:
        _plot(results, fig_dir / "hydra_fig8.png")
        figures.append("hydra_fig8.png")
    if arts:
        _plot_artifact(arts, fig_dir / "hydra_fig8_artifact.png")
        figures.append("hydra_fig8_artifact.png")

    rows: list[Row] = []
    h = cfg["horizon_s"]
    for s, r in zip(sums, results):
        if r.label == "Nemotron-H-LW":
            for key, name in (("bstar", "B*"), ("mt", "M_T")):
                ours = _pct(s.get(f"{key}_gap", math.nan))
                paper = PAPER[f"nemotron_lw_{key}_gap_pct"]
                comment = (f"gap = 1 − TP(B*/M_T among the {len(r.picks)} simulated estimator picks) / TP(B*/M_T "
                           f"of the {s['n_sim']}-design reference set), {h:.0f} s paper-preset runs")
                if math.isfinite(ours) and abs(ours - paper) > 0.25 * paper:
                    comment += (f"; measured: the pick simulates at {_fmt(s.get(f'pick_{key}_tp'))} tok/s vs "
                                f"{_fmt(s.get(f'ref_{key}_tp'))} tok/s for the reference "
                                f"{'(same design)' if s.get(f'{key}_same') else '(a different design)'}, and the "
                                f"estimate of the estimator's own {name} is off by "
                                f"{_fmt(_pct(s.get(f'est_{key}_err', math.nan)), 0)} %; the reference is a "
                                f"{s['n_sim']}-design sub-space, not the paper's exhaustive sweep")
                rows.append(Row(f"{name} throughput gap, Nemotron-H-LW (Fig. 8)", paper, ours, "%", comment))
    for s in sums:
        rows.append(Row(f"M_T recovery {s['workload']} (TP of picks' M_T / reference M_T)", None,
                        _pct(1.0 - s["mt_gap"]) if math.isfinite(s["mt_gap"]) else None, "%",
                        f"{s['front_from_picks']} of {s['front']} reference-front designs are estimator picks"))
    if sums:
        red = [s["n_screened"] / max(1, len(r.picks)) for s, r in zip(sums, results)]
        note = (f"screened designs / simulated estimator picks ({cfg['k']} picks per workload); the paper simulates "
                "only B* and M_T (2 designs: 5,040/2 = 2,520, 17,040/2 = 8,520)")
        if quick:
            note += "; quick mode screens only a 400-design stratified subset"
        rows.append(Row("simulation reduction vs exhaustive, smallest (§VI-B)", PAPER["reduction_min_x"], min(red),
                        "x", note))
        rows.append(Row("simulation reduction vs exhaustive, largest (§VI-B)", PAPER["reduction_max_x"], max(red),
                        "x", note))
    for a in arts:
        rows.append(Row(f"Spearman ρ throughput, published vs hydra_opt, {a['tag']} ({a['n']} front designs)", None,
                        a["rho_tp"], "", f"ρ TTFT {_fmt(a['rho_ttft'], 2)}; M_T {'same' if a['mt_same'] else 'different'}, "
                                         f"B* {'same' if a['bstar_same'] else 'different'} on this subset"))
        ratio = a["ours_at_pub_mt_tp"] / a["pub_mt_tp"] if a["pub_mt_tp"] else math.nan
        comment = f"the published M_T design simulated by hydra_opt ({a['horizon_s']:.0f} s paper preset)"
        if math.isfinite(ratio) and abs(ratio - 1) > 0.25:
            comment += (f"; measured: median hydra_opt/published throughput over the {a['n']} designs = "
                        f"{a['median_tp_ratio']:.2f} (ρ {_fmt(a['rho_tp'], 2)}), so the offset is "
                        f"{'systematic' if abs(a['median_tp_ratio'] - ratio) < 0.15 else 'design-specific'}")
            if a["horizon_s"] < 100:
                comment += (f"; this run covers {a['horizon_s']:.0f} s of the artifact's 100 s, and whole-run "
                            "throughput includes the start-up ramp")
            elif a.get("ladder"):
                comment += "; " + _ladder_cause(a)
            else:
                comment += ("; the paper preset deliberately omits the artifact's reserved per-task NoI bandwidth, "
                            "first-request batch costing and half-rate FC layers (docs/simulator.md); not probed")
        rows.append(Row(f"M_T throughput of the published M_T design, {a['tag']}", a["pub_mt_tp"],
                        a["ours_at_pub_mt_tp"], "tok/s", comment))

    strat_txt = "a 400-design stratified subset of" if quick else "every design of"
    intro = (
        f"Setup: HYDRA artifact model shapes (`*@hydra`), the paper's dataset replays (`hydra-*`: 10 ms fixed "
        f"arrivals, 5,000 requests), CP placement, static batching and scheduling, `Scenario.paper(horizon_s="
        f"{h:.0f})` (the artifact runs 100 s; shortened for this machine's budget), estimator with the paper "
        f"placement preset, TTFT from batch start and the whole run as its window. Studies: "
        f"`studies/paper/fig8_{{llama3,mamba2,nemotron_h}}.yaml`. Per workload the vectorised estimator screens "
        f"{strat_txt} the Table III space and proposes {cfg['k']} designs along its estimated front (its B* and M_T "
        f"first). The **reference front** (standing in for the paper's exhaustive sweep) is the simulated front of "
        f"a documented sub-space: {cfg['n_strat']} designs sampled round-robin over the batch × D2D × HBM-count "
        f"strata (seed {seed + 1}) plus the estimator's picks. B* floor = mean simulated throughput of the "
        f"stratified sample. Gap = 1 − TP(B* or M_T among the simulated picks) / TP(reference B* or M_T). "
        f"The artifact comparison simulates up to {cfg['artifact_designs']} designs of each published front "
        f"(spread along it, its B*/M_T included) for {cfg['artifact_horizon_s']:.0f} simulated s."
    )
    if overrides:
        shown = {k: v for k, v in overrides.items() if k != "workloads"}
        intro += (f" **Subset run** ({'quick' if quick else 'full'}-mode settings with overrides): workloads "
                  f"{', '.join(r.label for r in results)}"
                  + (f"; {', '.join(f'{k} = {v}' for k, v in shown.items())}" if shown else "")
                  + " — the other workloads were not run for this result (machine budget).")
    lines = ["| workload | screened | est. wall s | simulated | sim wall s | ref. front (picks) | ref B* TP/TTFT | "
             "picks' B* TP/TTFT | ref M_T TP | picks' M_T TP | B* gap | M_T gap | est. err B*/M_T |",
             "|---|---:|---:|---:|---:|---|---|---|---:|---:|---:|---:|---|"]
    for s in sums:
        lines.append(
            f"| {s['workload']} | {s['n_screened']} of {s['n_space']} | {s['est_wall_s']:.1f} | {s['n_sim']} | "
            f"{s['sim_wall_s']:.0f} | {s['front']} ({s['front_from_picks']}) | "
            f"{_fmt(s.get('ref_bstar_tp'))} / {_fmt(s.get('ref_bstar_ttft'), 2)} | "
            f"{_fmt(s.get('pick_bstar_tp'))} / {_fmt(s.get('pick_bstar_ttft'), 2)} | {_fmt(s.get('ref_mt_tp'))} | "
            f"{_fmt(s.get('pick_mt_tp'))} | {_fmt(_pct(s['bstar_gap']))} % | {_fmt(_pct(s['mt_gap']))} % | "
            f"{_fmt(_pct(s.get('est_bstar_err', math.nan)), 0)} % / {_fmt(_pct(s.get('est_mt_err', math.nan)), 0)} % |")
    extra = ["Per workload (TP in tok/s, TTFT in s; *est. err* = estimate / simulation − 1 of the estimator's own "
             "B* and M_T):", "", *lines, ""]
    if arts:
        extra += ["Published fronts re-simulated (throughput tok/s, TTFT s; published → hydra_opt):", "",
                  "| front | designs | ρ TP | ρ TTFT | M_T same | B* same | median TP ratio | no tokens | wall s |",
                  "|---|---:|---:|---:|---|---|---:|---:|---:|"]
        for a in arts:
            extra.append(f"| {a['tag']} | {a['n']} of {a['n_front']} | {_fmt(a['rho_tp'], 2)} | "
                         f"{_fmt(a['rho_ttft'], 2)} | {_fmt(a['mt_same'])} | {_fmt(a['bstar_same'])} | "
                         f"{_fmt(a['median_tp_ratio'], 2)} | {a['zero_tp']} | {a['wall_s']:.0f} |")
        extra.append("")
        lads = [a for a in arts if a.get("ladder")]
        if lads:
            extra += ["Artifact-rule probes on each published M_T design (`hydra_opt/experiments/artifact_probe.py`; "
                      "cumulative steps, 100 s paper preset; *× pub.* = throughput / published throughput):", "",
                      "| front (published TP / TTFT) | step | throughput tok/s | × pub. | mean TTFT s |",
                      "|---|---|---:|---:|---:|"]
            for a in lads:
                head = f"{a['tag']} ({a['pub_mt_tp']:.0f} / {a['pub_mt_ttft']:.1f})"
                for k, tp, tt in a["ladder"]["steps"]:
                    label = STEP_LABELS[k] + (f" (×{a['ladder']['prefill_scale']:.2f})" if k == "prefill_fit" else "")
                    extra.append(f"| {head} | {label} | {tp:.1f} | {tp / a['pub_mt_tp']:.2f} | {tt:.2f} |")
                    head = ""
            extra += ["", _ladder_summary(lads), ""]
        for a in arts:
            pairs = "; ".join(f"{lab}: {p:.0f}→{o:.0f} tok/s, {pt:.2f}→{ot:.2f} s" for lab, p, o, pt, ot in
                              zip(a["labels"], a["published_tp"], a["ours_tp"], a["published_ttft"], a["ours_ttft"]))
            extra.append(f"* {a['tag']}: {pairs}")
        extra.append("")
    elif cfg["artifact"]:
        folder = (paths or ExperimentPaths.default()).artifact_fronts
        extra += [f"Published fronts not re-simulated: no artifact front CSV under `{folder}` (shared data folder: "
                  "`report --reproduce --shared DIR` or `$HYDRA_OPT_SHARED`).", ""]
    wall = time.perf_counter() - t0
    extra.append(f"Wall time: {wall:.0f} s ({'quick' if quick else 'full'} mode).")
    return Section(key="hydra_fig8", title="HYDRA Fig. 8 / §VI-B — estimator-selected vs exhaustive Pareto fronts",
                   intro_md=intro, rows=rows, figures=figures, extra_md="\n".join(extra), wall_s=wall, quick=quick)
