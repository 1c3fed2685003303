"""DynaCore §8 reproduction (issue 8 item 7): Fig. 10, Fig. 11, §8.5 serving (Fig. 12), Fig. 13, Fig. 14.

Everything is computed from ``hydra_opt.hardware.dynacore`` (the core model of issue 3) and, for the multi-device
experiments, :mod:`hydra_opt.experiments.disagg` (prefill/decode-disaggregated serving):

* **Fig. 11** — Llama-3-8B decode step (weight GEMMs, as ``dynacore sweep``) at batch 1…256 on the fixed 128×128
  SA, Planaria, SARA and DynaCore (16 × 32×32; decode W4A16, baselines W8A8): saturation batches, batch-256
  latencies, speed-ups at batch 1 and 256.
* **Fig. 10** — one request on one device (prefill + every decode step, attention included): end-to-end latency
  and energy of DynaCore vs BitFusion (W8A8), SA+DQ (W8A8/W4A16), FIGLUT (W4A16), Planaria and SARA (W8A8).
* **§8.5 / Fig. 12** — eight devices serving Llama-3.1-8B with P/D disaggregation (4+4 for ShareGPT and the Dolly
  stand-in, 6+2 for Mooncake), 16 GB/s links, FP16 KV (128 KiB/token) moved at the hand-off; TTFT/TPOT of
  DynaCore vs Planaria and FIGLUT (paper averages over workloads: 2.97×/3.50× TTFT, 8.02×/36.55× TPOT).
* **Fig. 13** — static 8-device systems (SA-only, SIMD-only, 4 SA prefill + 4 SIMD decode) vs DynaCore, all with
  the same PE count and the disaggregated precision policy.
* **Fig. 14** — cumulative ablation on Llama-2-7B: single device at batch 1 (a, b) and serving the Dolly stand-in
  (c, d).

Workloads: ShareGPT (shipped length profile, Poisson 1 req/s), Dolly stand-in = the shipped ``chat`` profile
(LMSYS-Chat short prompts, mean 78 tokens vs Dolly's 17.9; Poisson 1 req/s) — Dolly itself is not in
``shared/data`` — and the Mooncake FAST'25 conversation trace with its real timestamps (read from
``data/traces/`` of the shared data folder, :mod:`hydra_opt.experiments.paths`; never copied into the project).
Quick mode: 150 requests per workload, output lengths as sampled; full mode: 1000 requests (≈10 min here).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from hydra_opt.experiments.common import Row, Section
from hydra_opt.experiments.paths import ExperimentPaths

__all__ = ["run", "PAPER", "single_device", "serving_requests", "run_serving", "ARCH_POLICIES"]

#: Paper values (DynaCore, Sec. 8). Fig. 11 / Sec. 8.4; Fig. 10 / Sec. 8.3; Fig. 12 / Sec. 8.5; Fig. 13 / Sec. 8.5;
#: Fig. 14 / Sec. 8.6.
PAPER: dict[str, Any] = {
    "fig11_saturation": {"systolic": 128, "planaria": 32, "sara": 4, "dynacore": 1},
    "fig11_b256_ms": {"dynacore": 60.7, "sara": 66.5, "planaria": 75.2, "systolic": 126.9},
    "fig11_speedup_b1": 85.2,
    "fig11_speedup_b256": 2.09,
    "fig10_e2e_speedup": {"systolic": 23.07, "bitfusion": 23.81, "figlut": 14.13, "planaria": 7.57, "sara": 2.48},
    "fig10_decode_speedup": {"planaria": 23.03, "sara": 3.48},
    "fig10_energy_gain": {"bitfusion": 4.96, "systolic": 13.76, "figlut": 7.39, "planaria": 5.71, "sara": 2.86},
    "serving_ttft_gain": {"planaria": 2.97, "figlut": 3.50},
    "serving_tpot_gain": {"planaria": 8.02, "figlut": 36.55},
    "fig13_dolly_tpot_s": {"hetero": 0.032, "dynacore": 0.0017},
    "fig14_prefill_b1": {"dq": 1.93, "splittable": 5.69, "pyramid": 1.25},
    "fig14_decode_b1": {"dq": 1.0, "splittable": 39.1, "split_k": 2.20},
    "fig14_ttft": {"dq": 1.87, "splittable": 5.99, "pyramid": 1.26},
    "fig14_tpot": {"dq": 1.0, "splittable": 8.24, "split_k": 1.11, "pyramid": 3.41},
}

#: (prefill datapath, decode datapath) per architecture (Table 2: baselines one precision for both phases;
#: BitFusion is INT8 only, FIGLUT W4A16 only; "systolic" is the paper's systolic array with DQ).
ARCH_POLICIES: dict[str, tuple[str, str]] = {
    "dynacore": ("w8a8", "w4a16"),
    "systolic": ("w8a8", "w4a16"),
    "bitfusion": ("w8a8", "w8a8"),
    "figlut": ("w4a16", "w4a16"),
    "planaria": ("w8a8", "w8a8"),
    "sara": ("w8a8", "w8a8"),
    "simd": ("w8a8", "w4a16"),
}

#: Serving workloads: key → (label, P/D split).
WORKLOADS: dict[str, tuple[str, tuple[int, int]]] = {
    "sharegpt": ("ShareGPT (Poisson 1 req/s)", (4, 4)),
    "dolly": ("Dolly stand-in: chat profile (Poisson 1 req/s)", (4, 4)),
    "mooncake": ("Mooncake conversation (real timestamps)", (6, 2)),
}

SERVING_MODEL = "llama-3.1-8b"
#: Requests per serving workload in quick / full mode (tests shrink these).
QUICK_REQUESTS = 150
FULL_REQUESTS = 1000
MOONCAKE_FILE = "mooncake_fast25_conversation_trace.jsonl"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# ---------------------------------------------------------------------------------------------------------------
# Fig. 11
# ---------------------------------------------------------------------------------------------------------------
def _fig11(fig_dir: Path) -> tuple[list[Row], str, dict]:
    from hydra_opt.hardware.dynacore import ConfigTable, decode_step, get_architecture, saturation_batch
    from hydra_opt.workload.models import load_model

    model = load_model("llama-3-8b")
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    names = ("systolic", "planaria", "sara", "dynacore")
    lat: dict[str, dict[int, float]] = {}
    macs_b256 = 0.0
    for a in names:
        t = ConfigTable(get_architecture(a))
        pol = "disaggregated" if a == "dynacore" else "w8a8"
        steps = {b: decode_step(t, model, b, 0, pol, attention=False) for b in batches}
        lat[a] = {b: s.latency_s * 1e3 for b, s in steps.items()}
        macs_b256 = steps[256].macs
    sat = {a: saturation_batch(lat[a]) for a in names}
    pes, f = 16384, 500e6
    floor_w8 = macs_b256 / (pes * 2 * f) * 1e3
    floor_fp = macs_b256 / (pes * f) * 1e3
    need = macs_b256 / (PAPER["fig11_b256_ms"]["dynacore"] * 1e-3) / f
    cause256 = (
        f"at batch 256 every 16,384-PE design is compute-bound: Llama-3-8B's {macs_b256 / 1e12:.2f} TMAC need "
        f"{floor_w8:.0f} ms at W8A8 (2 products/PE/cycle) and {floor_fp:.0f} ms at W4A16's FP16 arithmetic; the "
        f"paper's 60.7 ms needs {need:,.0f} MAC/cycle (≈{need / pes:.1f}× our PE count at one product) — a larger "
        "device than its text describes (Tables 2/3 empty in our copy); SA matches the paper within 2 %"
    )
    rows: list[Row] = []
    for a in names:
        rows.append(Row(f"Fig. 11 decode saturation batch, {a}", PAPER["fig11_saturation"][a], sat[a], "requests",
                        "knee = largest batch within 10 % of the batch-1 latency"))
    for a in names:
        r = lat[a][256] / PAPER["fig11_b256_ms"][a]
        rows.append(Row(f"Fig. 11 decode latency at batch 256, {a}", PAPER["fig11_b256_ms"][a], lat[a][256], "ms",
                        "" if abs(r - 1) <= 0.25 else cause256))
    sp1 = lat["systolic"][1] / lat["dynacore"][1]
    rows.append(Row("Fig. 11 DynaCore speed-up over SA at batch 1", PAPER["fig11_speedup_b1"], sp1, "x",
                    f"DynaCore batch 1 sits on the W4 weight-stream floor ({lat['dynacore'][1]:.3f} ms for 3.75 GB at "
                    "4 TB/s); 85.2× would need it below that floor"))
    sp256 = lat["systolic"][256] / lat["dynacore"][256]
    rows.append(Row("Fig. 11 DynaCore speed-up over SA at batch 256", PAPER["fig11_speedup_b256"], sp256, "x",
                    cause256 + "; DynaCore decodes W4A16 on FP16 arithmetic (half the W8A8 rate of the SA)"))
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for a in names:
        ax.plot(batches, [lat[a][b] for b in batches], marker="o", label=a)
    for a, v in PAPER["fig11_b256_ms"].items():
        ax.scatter([256], [v], marker="x", color="k")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (requests)")
    ax.set_ylabel("decode step latency (ms)")
    ax.set_title("Fig. 11: Llama-3-8B decode (x = paper at 256)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    name = "dynacore_fig11.png"
    fig.savefig(fig_dir / name, dpi=110)
    plt.close(fig)
    return rows, name, {"latency_ms": lat, "saturation": sat}


# ---------------------------------------------------------------------------------------------------------------
# Fig. 10 — single device, one request
# ---------------------------------------------------------------------------------------------------------------
def single_device(
    arch: str, model: Any, prompt: int, output: int, stride: int = 32, policy: tuple[str, str] | None = None
) -> dict[str, float]:
    """Latency (s) and energy (J) of one request on one device: prefill of ``prompt`` tokens, then ``output − 1``
    decode steps at contexts ``prompt … prompt + output − 2`` (sampled every ``stride`` steps, midpoint rule).

    Also returns the DRAM part (``dram_j``) and the leakage part (``leak_j``) of the energy. ``policy`` overrides
    :data:`ARCH_POLICIES` (prefill, decode datapaths)."""
    from hydra_opt.hardware.dynacore import ConfigTable, get_architecture, pass_cost

    pdp, ddp = policy or ARCH_POLICIES[arch]
    a = get_architecture(arch)
    t = ConfigTable(a)
    e_dram = a.energy.dram_pj_per_byte * 1e-12
    pre = pass_cost(t, model, [0], [prompt], pdp)
    dram_b = pre.dram_bytes
    dec_s = dec_j = 0.0
    n = output - 1
    j = 0
    while j < n:
        k = min(stride, n - j)
        c = prompt + j + k // 2
        s = pass_cost(t, model, [c], [1], ddp)
        dec_s += s.latency_s * k
        dec_j += s.energy_j * k
        dram_b += s.dram_bytes * k
        j += k
    lat = pre.latency_s + dec_s
    return {"prefill_s": pre.latency_s, "decode_s": dec_s, "prefill_j": pre.energy_j, "decode_j": dec_j,
            "latency_s": lat, "energy_j": pre.energy_j + dec_j, "dram_j": dram_b * e_dram,
            "leak_j": a.static_power_w * lat, "decode_steps": float(n)}


def _gmean(xs: list[float]) -> float:
    return float(math.exp(np.mean(np.log(xs))))


def _fig10(fig_dir: Path, quick: bool) -> tuple[list[Row], str, dict]:
    from hydra_opt.workload.models import load_model

    names = ("bitfusion", "systolic", "figlut", "planaria", "sara", "dynacore")
    models = ["llama-3.1-8b"] if quick else ["llama-2-7b", "llama-2-13b", "llama-3.1-8b"]
    prompts = [1024] if quick else [512, 1024, 2048]
    output = 256
    res: dict[str, list[dict]] = {a: [] for a in names}
    for mn in models:
        model = load_model(mn)
        for p in prompts:
            for a in names:
                res[a].append(single_device(a, model, p, output))
    dyn = res["dynacore"]

    def gain(a: str, key: str) -> float:
        return _gmean([x[key] / y[key] for x, y in zip(res[a], dyn)])

    setup = f"{'/'.join(models)}, prompt {'/'.join(map(str, prompts))} tokens, {output} output tokens"

    def mean(a: str, key: str) -> float:
        return float(np.mean([x[key] for x in res[a]]))

    # Output length at which the paper's end-to-end ratio would hold with our per-phase times:
    # (P_a + n·d_a) / (P_d + n·d_d) = r  →  n = (r·P_d − P_a) / (d_a − r·d_d).
    def n_star(a: str, r: float) -> float | None:
        steps = mean("dynacore", "decode_steps")
        da, dd = mean(a, "decode_s") / steps, mean("dynacore", "decode_s") / steps
        den = da - r * dd
        n = (r * mean("dynacore", "prefill_s") - mean(a, "prefill_s")) / den if den > 0 else -1.0
        return n if n > 0 else None

    sens = {}
    model0 = load_model(models[-1])
    for a in ("planaria", "sara"):
        sens[a] = single_device(a, model0, prompts[-1], output, policy=("fp16", "fp16"))
    dyn0 = single_device("dynacore", model0, prompts[-1], output)
    rows: list[Row] = []
    for a, pv in PAPER["fig10_e2e_speedup"].items():
        g = gain(a, "latency_s")
        pre = gain(a, "prefill_s")
        dec = gain(a, "decode_s")
        share = mean("dynacore", "prefill_s") / mean("dynacore", "latency_s")
        ns = n_star(a, pv)
        cm = (f"{setup}; prefill ratio {pre:.2f}×, decode-phase ratio {dec:.1f}× (batch-1 decode step "
              f"{mean(a, 'decode_s') / mean(a, 'decode_steps') * 1e3:.1f} ms vs DynaCore "
              f"{mean('dynacore', 'decode_s') / mean('dynacore', 'decode_steps') * 1e3:.2f} ms); DynaCore's prefill "
              f"is {share:.0%} of its end-to-end time. The end-to-end ratio depends on the output length, which the "
              "paper does not state: "
              + (f"with our phase times the paper's {pv}× holds at ≈{ns:.0f} output tokens" if ns else
                 f"no output length gives the paper's {pv}× with our phase times (decode-phase ratio too small)"))
        rows.append(Row(f"Fig. 10 end-to-end speed-up of DynaCore over {a}", pv, g, "x", cm))
    for a, pv in PAPER["fig10_decode_speedup"].items():
        g = gain(a, "decode_s")
        floor = {"planaria": 32, "sara": 4}[a]
        fp = sens[a]["decode_s"] / dyn0["decode_s"]
        rows.append(Row(f"Fig. 10 decode-phase speed-up over {a}", pv, g, "x",
                        f"{setup}; at batch 1 {a}'s {floor}×{floor} floor uses 1/{floor} of each sub-array's rows, at "
                        f"W8A8 (2 INT8 products/PE/cycle, 1 B weights). Measured: with {a} at FP16 (no DQ) the ratio "
                        f"is {fp:.1f}× — the paper's baseline precision (Table 2) is not in our copy"))
    for a, pv in PAPER["fig10_energy_gain"].items():
        g = gain(a, "energy_j")
        dram_share = mean("dynacore", "dram_j") / mean("dynacore", "energy_j")
        rows.append(Row(f"Fig. 10 energy gain of DynaCore over {a}", pv, g, "x",
                        f"{setup}; measured shares: DRAM is {dram_share:.0%} "
                        f"of DynaCore's energy and {mean(a, 'dram_j') / mean(a, 'energy_j'):.0%} of {a}'s, leakage "
                        f"{mean('dynacore', 'leak_j') / mean('dynacore', 'energy_j'):.1%} vs "
                        f"{mean(a, 'leak_j') / mean(a, 'energy_j'):.0%}: with 31.2 pJ/B HBM and literature 28 nm "
                        "leakage (docs/dynacore.md §1.7) the weights re-read every decode step dominate and are the "
                        "same bytes on every design of equal weight precision, so energy tracks weight bytes, not "
                        "time; the paper's synthesis/CACTI/DRAMSim3 constants (not in our copy) weigh time more"))
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    base = res["bitfusion"]
    x = np.arange(len(names))
    for ax, (pk, dk, lab) in zip(axes, (("prefill_s", "decode_s", "latency"), ("prefill_j", "decode_j", "energy"))):
        tot = "latency_s" if lab == "latency" else "energy_j"
        pre = [_gmean([r[pk] / b[tot] for r, b in zip(res[a], base)]) for a in names]
        dec = [_gmean([r[dk] / b[tot] for r, b in zip(res[a], base)]) for a in names]
        ax.bar(x, pre, label="prefill")
        ax.bar(x, dec, bottom=pre, label="decode")
        ax.set_xticks(x, names, rotation=20)
        ax.set_ylabel(f"{lab} normalised to BitFusion")
        ax.set_title(f"Fig. 10: end-to-end {lab}")
        ax.legend()
    fig.tight_layout()
    name = "dynacore_fig10.png"
    fig.savefig(fig_dir / name, dpi=110)
    plt.close(fig)
    return rows, name, {a: v for a, v in res.items()}


# ---------------------------------------------------------------------------------------------------------------
# Serving (Sec. 8.5, Fig. 12–14)
# ---------------------------------------------------------------------------------------------------------------
def serving_requests(key: str, n: int, seed: int = 0, max_total_tokens: int | None = None,
                     traces_dir: Path | None = None):
    """The requests of serving workload ``key`` (``sharegpt``, ``dolly``, ``mooncake``): the first ``n``
    (``mooncake`` is read from ``traces_dir``, default :attr:`ExperimentPaths.traces_dir` of the defaults)."""
    from hydra_opt.workload.workload import Requests, load_workload, truncate

    if key == "mooncake":
        from hydra_opt.workload.traces import load_trace

        path = (traces_dir or ExperimentPaths.default().traces_dir) / MOONCAKE_FILE
        tr = load_trace(path, "mooncake")
        assert tr.arrival_s is not None
        o = np.argsort(tr.arrival_s, kind="stable")[:n]
        p, out = truncate(tr.prompt_tokens[o], tr.output_tokens[o], max_total_tokens)
        return Requests(tr.arrival_s[o] - tr.arrival_s[o][0], p, out)
    w = load_workload("sharegpt" if key == "sharegpt" else "chat")
    r = w.requests(seed=seed)
    p, out = truncate(r.prompt_tokens[:n], r.output_tokens[:n], max_total_tokens)
    return Requests(r.arrival_s[:n], p, out)


class _Costs:
    """Device step-time models shared across runs (their lookup tables are the expensive part)."""

    def __init__(self) -> None:
        self._c: dict[tuple, Any] = {}

    def get(self, arch: Any, model: str, pdp: str, ddp: str, label: str | None = None):
        from hydra_opt.experiments.disagg import DynaCoreDeviceCost

        key = (label or arch, model, pdp, ddp)
        if key not in self._c:
            self._c[key] = DynaCoreDeviceCost(arch, model, pdp, ddp)
        return self._c[key]


def run_serving(reqs: Any, prefill_cost: Any, decode_cost: Any, split: tuple[int, int], model: Any) -> dict:
    """One disaggregated serving run → the result's ``to_dict()``."""
    from hydra_opt.experiments.disagg import DisaggOptions, simulate_disagg

    kvb = model.kv_bytes_per_token("fp16")
    res = simulate_disagg(reqs, prefill_cost, decode_cost, kvb, DisaggOptions(n_prefill=split[0], n_decode=split[1]))
    return res.to_dict()


def _serving(fig_dir: Path, quick: bool, seed: int, traces_dir: Path) -> tuple[list[Row], list[str], str, dict]:
    from hydra_opt.workload.models import load_model

    n = QUICK_REQUESTS if quick else FULL_REQUESTS
    model = load_model(SERVING_MODEL)
    costs = _Costs()
    wl = {}
    for k in WORKLOADS:
        try:
            wl[k] = serving_requests(k, n, seed, model.max_position, traces_dir)
        except Exception as exc:  # noqa: BLE001 - a missing trace file skips that workload, stated in the report
            wl[k] = exc
    runs: dict[tuple[str, str], dict] = {}

    def sim(wk: str, label: str, pre: Any, dec: Any, split: tuple[int, int] | None = None) -> dict | None:
        r = wl[wk]
        if isinstance(r, Exception):
            return None
        out = run_serving(r, pre, dec, split or WORKLOADS[wk][1], model)
        runs[(wk, label)] = out
        return out

    # Fig. 12: homogeneous systems.
    for wk in WORKLOADS:
        for a in ("dynacore", "planaria", "figlut"):
            c = costs.get(a, SERVING_MODEL, *ARCH_POLICIES[a])
            sim(wk, a, c, c)
        # Sensitivity: Planaria without DQ (FP16 both phases) — the paper's Table 2 precision is not in our copy.
        c = costs.get("planaria", SERVING_MODEL, "fp16", "fp16", label="planaria-fp16")
        sim(wk, "planaria-fp16", c, c)
    # Fig. 13: static systems with the same PE count and policy.
    sa = costs.get("systolic", SERVING_MODEL, "w8a8", "w4a16")
    vec = costs.get("simd", SERVING_MODEL, "w8a8", "w4a16")
    for wk in WORKLOADS:
        sim(wk, "sa-only", sa, sa)
        sim(wk, "simd-only", vec, vec)
        sim(wk, "hetero-4sa+4simd", sa, vec, (4, 4))

    ok = [wk for wk in WORKLOADS if not isinstance(wl[wk], Exception)]
    rows: list[Row] = []
    # Single-device step times that explain the serving ratios.
    dyn_c = costs.get("dynacore", SERVING_MODEL, *ARCH_POLICIES["dynacore"])
    pl_c = costs.get("planaria", SERVING_MODEL, *ARCH_POLICIES["planaria"])
    fg_c = costs.get("figlut", SERVING_MODEL, *ARCH_POLICIES["figlut"])
    plf_c = costs.get("planaria", SERVING_MODEL, "fp16", "fp16", label="planaria-fp16")
    pre2k = {k: c.prefill_s(np.array([2048])) for k, c in
             (("dynacore", dyn_c), ("planaria", pl_c), ("figlut", fg_c), ("planaria-fp16", plf_c))}
    dec1 = {k: c.decode_s(np.array([1024])) for k, c in
            (("dynacore", dyn_c), ("planaria", pl_c), ("figlut", fg_c), ("planaria-fp16", plf_c))}

    def ratios(base: str, metric: str) -> dict[str, float]:
        return {wk: runs[(wk, base)][metric] / runs[(wk, "dynacore")][metric] for wk in ok}

    util = {wk: {a: (runs[(wk, a)]["prefill_util"], runs[(wk, a)]["decode_util"]) for a in
                 ("dynacore", "planaria", "figlut")} for wk in ok}
    for base in ("planaria", "figlut"):
        tt = ratios(base, "ttft_mean_s")
        tp = ratios(base, "tpot_mean_s")
        avg_tt = float(np.mean(list(tt.values()))) if tt else None
        avg_tp = float(np.mean(list(tp.values()))) if tp else None
        per = ", ".join(f"{wk} {v:.2f}×" for wk, v in tt.items())
        rows.append(Row(
            f"§8.5 TTFT improvement of DynaCore over {base} (mean over {len(ok)} workloads)",
            PAPER["serving_ttft_gain"][base], avg_tt, "x",
            f"per workload {per}. Measured cause: 2048-token prefill on one device takes {pre2k['dynacore']:.3f} s "
            f"(DynaCore W8A8), {pre2k[base]:.3f} s ({base}, {ARCH_POLICIES[base][0].upper()}); long-prompt prefill is "
            "compute-bound on the same 16,384 PEs, so only the datapath rate (2 INT8 products/PE/cycle at W8A8 vs 1 "
            "at W4A16/FP16) separates them"
            + (" — the paper's 'Planaria does not accelerate large prefill GEMMs' is not reproducible with a W8A8 "
               "Planaria (FP16 Planaria: sensitivity rows below)" if base == "planaria" else
               "; FIGLUT's W4A16 prefill runs one FP16×INT4 product per unit per cycle")))
        per = ", ".join(f"{wk} {v:.2f}×" for wk, v in tp.items())
        ud = ", ".join(f"{wk} {util[wk][base][1]:.0%}" for wk in ok)
        rows.append(Row(
            f"§8.5 TPOT improvement of DynaCore over {base} (mean over {len(ok)} workloads)",
            PAPER["serving_tpot_gain"][base], avg_tp, "x",
            f"per workload {per}. Measured cause: decode step at batch 1, context 1024 is {dec1['dynacore'] * 1e3:.2f} "
            f"ms (DynaCore) vs {dec1[base] * 1e3:.2f} ms ({base}); {base}'s decode-pool utilisation {ud} — where it "
            "nears 100 % requests queue for decode slots and TPOT grows with load (Mooncake: long contexts make "
            "attention GEMVs dominate on fixed 128-row tiles)"))
    # Sensitivity rows: Planaria at FP16.
    if ok:
        tt = ratios("planaria-fp16", "ttft_mean_s")
        tp = ratios("planaria-fp16", "tpot_mean_s")
        rows.append(Row("§8.5 TTFT improvement over Planaria at FP16 (sensitivity)",
                        PAPER["serving_ttft_gain"]["planaria"], float(np.mean(list(tt.values()))), "x",
                        f"Planaria without DQ: 2048-token prefill {pre2k['planaria-fp16']:.3f} s (FP16 rate = half "
                        f"W8A8); per workload {', '.join(f'{k} {v:.2f}×' for k, v in tt.items())}"))
        rows.append(Row("§8.5 TPOT improvement over Planaria at FP16 (sensitivity)",
                        PAPER["serving_tpot_gain"]["planaria"], float(np.mean(list(tp.values()))), "x",
                        f"batch-1 decode step {dec1['planaria-fp16'] * 1e3:.2f} ms; per workload "
                        f"{', '.join(f'{k} {v:.2f}×' for k, v in tp.items())}"))
    # Fig. 13.
    statics = ("sa-only", "simd-only", "hetero-4sa+4simd")
    if "dolly" in ok:
        h = runs[("dolly", "hetero-4sa+4simd")]["tpot_mean_s"]
        d = runs[("dolly", "dynacore")]["tpot_mean_s"]
        simd1 = vec.decode_s(np.array([128]))
        dyn1 = dyn_c.decode_s(np.array([128]))
        why = (f"our SIMD device (128 lanes × 128-wide dot products, W4 weights at the DynaCore port width) decodes a "
               f"batch-1 step at context 128 in {simd1 * 1e3:.2f} ms vs DynaCore {dyn1 * 1e3:.2f} ms: both sit on the "
               "W4 weight-stream floor, so a GEMV-specialised device loses nothing at light load; the paper's SIMD "
               "device is evidently much slower (its configuration is in the empty Table 2)")
        rows.append(Row("Fig. 13 Dolly TPOT, heterogeneous 4 SA + 4 SIMD", PAPER["fig13_dolly_tpot_s"]["hetero"], h,
                        "s", why))
        rows.append(Row("Fig. 13 Dolly TPOT, DynaCore", PAPER["fig13_dolly_tpot_s"]["dynacore"], d, "s",
                        "Dolly stand-in = chat profile (prompts 78 tokens mean vs Dolly's 17.9), light load (mean "
                        f"decode batch {runs[('dolly', 'dynacore')]['mean_decode_batch']:.2f}): TPOT ≈ the batch-1 "
                        "step on the W4 weight-stream floor (3.75 GB / 4 TB/s = 0.94 ms) plus attention"))
        p13 = PAPER["fig13_dolly_tpot_s"]
        rows.append(Row("Fig. 13 Dolly TPOT ratio heterogeneous / DynaCore", p13["hetero"] / p13["dynacore"], h / d,
                        "x", why))
    for metric, label in (("ttft_mean_s", "TTFT"), ("tpot_mean_s", "TPOT")):
        wins = [wk for wk in ok if all(runs[(wk, "dynacore")][metric] <= runs[(wk, s_)][metric] * 1.02
                                        for s_ in statics)]
        detail = "; ".join(
            f"{wk}: " + ", ".join(f"{s_} {runs[(wk, s_)][metric] / runs[(wk, 'dynacore')][metric]:.2f}×"
                                  for s_ in statics) for wk in ok)
        if ok:
            rows.append(Row(f"Fig. 13 share of workloads where DynaCore's {label} matches or beats every static system "
                            "(within 2 %)", 1.0, len(wins) / len(ok), "fraction",
                            f"static/DynaCore {label} (> 1 = DynaCore better): {detail}. "
                            + ("Measured cause of the TPOT losses: the SIMD device decodes on the same W4 weight-"
                               "stream floor as DynaCore (batch-1 steps above) and light load keeps decode batches "
                               "at ≈1, so SIMD/heterogeneous decode ties or slightly beats DynaCore"
                               if label == "TPOT" else
                               "TTFT: the SA prefills as fast as DynaCore only where prompts are long; SIMD prefill "
                               "has no weight reuse; the fixed 4:4 split has only 4 prefill devices on Mooncake "
                               "(DynaCore 6)")))

    # Fig. 14 (c)(d): cumulative ablation in serving, Llama-2-7B on the Dolly stand-in.
    abl_rows, abl_data = _ablation_serving(quick, seed)
    rows += abl_rows
    figs = _serving_figs(fig_dir, runs, ok, abl_data)
    intro = (
        f"§8.5 setup: {SERVING_MODEL}, eight devices (16,384 PEs, 500 MHz, 8 MB, 4 TB/s each), P/D split 4+4 "
        "(ShareGPT, Dolly stand-in) or 6+2 (Mooncake), 16 GB/s point-to-point links per (prefill, decode) pair, FP16 "
        f"KV ({model.kv_bytes_per_token('fp16') / 1024:.0f} KiB/token) moved after prefill and counted in TTFT, FCFS "
        "prefill batches (≤ 8 requests, ≤ 8192 tokens), continuous-batching decode (≤ 256 requests/device), "
        f"{n} requests per workload (`hydra_opt.experiments.disagg`)."
    )
    loads = []
    for wk in ok:
        r = wl[wk]
        span = float(r.arrival_s.max() - r.arrival_s.min()) or 1.0
        work = sum(dyn_c.prefill_s(np.array([p])) for p in r.prompt_tokens.tolist())
        loads.append(f"{wk} {len(r)} requests over {span:.0f} s, mean prompt {np.mean(r.prompt_tokens):.0f} / "
                     f"output {np.mean(r.output_tokens):.0f} tokens, offered DynaCore prefill load "
                     f"{work / (WORKLOADS[wk][1][0] * span):.2f}")
    intro += (" Load (sum of single-request DynaCore prefill times over prefill devices × arrival span; > 1 = the "
              "prefill pool is overloaded and TTFT is mostly queueing): " + "; ".join(loads) + ".")
    missing = [f"{k}: {wl[k]}" for k in WORKLOADS if isinstance(wl[k], Exception)]
    if missing:
        intro += " Skipped (input not found): " + "; ".join(missing) + "."
    table = ["", "| workload | system | TTFT mean (s) | TPOT mean (ms) | prefill util | decode util | "
             "mean decode batch |", "|---|---|---|---|---|---|---|"]
    for (wk, label), d in runs.items():
        table.append(f"| {wk} | {label} | {d['ttft_mean_s']:.3f} | {d['tpot_mean_s'] * 1e3:.2f} | "
                     f"{d['prefill_util']:.2f} | {d['decode_util']:.2f} | {d['mean_decode_batch']:.1f} |")
    extra = "\n".join(table)
    return rows, figs, intro + "\n" + extra, {"runs": {f"{k[0]}/{k[1]}": v for k, v in runs.items()}}


def _ablation_variants() -> list[tuple[str, Any, str, str]]:
    from hydra_opt.hardware.dynacore import dynacore, systolic

    return [
        ("vanilla", systolic(), "fp16", "fp16"),
        ("dq", systolic(), "w8a8", "w4a16"),
        ("splittable", dynacore(32, 16, split_k=False, pyramid=False), "w8a8", "w4a16"),
        ("split_k", dynacore(32, 16, pyramid=False), "w8a8", "w4a16"),
        ("pyramid", dynacore(32, 16), "w8a8", "w4a16"),
    ]


def _ablation_serving(quick: bool, seed: int) -> tuple[list[Row], dict]:
    from hydra_opt.experiments.disagg import DynaCoreDeviceCost
    from hydra_opt.hardware.dynacore import ConfigTable, decode_step, prefill
    from hydra_opt.workload.models import load_model

    model = load_model("llama-2-7b")
    reqs = serving_requests("dolly", QUICK_REQUESTS if quick else FULL_REQUESTS, seed, model.max_position)
    res: dict[str, dict] = {}
    single: dict[str, dict[str, float]] = {}
    pm = int(round(float(np.mean(reqs.prompt_tokens))))  # the stand-in's mean prompt (Dolly: 17.9 tokens)
    for name, arch, pdp, ddp in _ablation_variants():
        c = DynaCoreDeviceCost(arch, model, pdp, ddp, lam=0.0)
        res[name] = run_serving(reqs, c, c, (4, 4), model)
        t = ConfigTable(arch, lam=0.0)  # latency-only search: each added component can only help
        single[name] = {
            "prefill_s": prefill(t, model, 18, 1, pdp).latency_s,
            "decode_s": decode_step(t, model, 1, 18, ddp).latency_s,
            "prefill_mean_s": prefill(t, model, pm, 1, pdp).latency_s,
        }
    order = [v[0] for v in _ablation_variants()]
    rows: list[Row] = []

    def steps(data: dict[str, dict], key: str) -> dict[str, float]:
        return {b: data[a][key] / data[b][key] for a, b in zip(order, order[1:])}

    sp = steps(single, "prefill_s")
    sd = steps(single, "decode_s")
    spm = steps(single, "prefill_mean_s")
    st = steps(res, "ttft_mean_s")
    so = steps(res, "tpot_mean_s")
    batch = {k: v["mean_decode_batch"] for k, v in res.items()}
    cm = {
        ("prefill", "splittable"): "our spatial-only 32×32 cores already fill 18-row prefill GEMMs better than the "
        "paper's simulator: 16 × 32×32 tiles vs one 128-row tile of which 18 rows work (7.1 = 128/18)",
        ("prefill", "pyramid"): "in our model padded passes are cheap (weight tiles stay resident, fill is small), so "
        "packing an 18-token batch changes latency by < 1 % (docs/dynacore.md §1.3)",
        ("decode", "splittable"): "our spatial-only cores reach 25–75 % utilisation on Llama-2-7B GEMVs (N = 4096…"
        "11008); the paper's simulator loses more there (docs/dynacore.md §3.1)",
    }
    for k, pv in PAPER["fig14_prefill_b1"].items():
        r = sp[k] / pv
        rows.append(Row(f"Fig. 14(a) prefill b=1 (18 tokens), + {k}", pv, sp[k], "x",
                        "" if abs(r - 1) <= 0.25 else cm.get(("prefill", k), "")))
    for k, pv in PAPER["fig14_decode_b1"].items():
        r = sd[k] / pv
        rows.append(Row(f"Fig. 14(b) decode b=1, + {k}", pv, sd[k], "x",
                        "" if abs(r - 1) <= 0.25 else cm.get(("decode", k), "")))
    for k, pv in PAPER["fig14_ttft"].items():
        r = st[k] / pv
        c = ""
        if abs(r - 1) > 0.25:
            c = (f"the Dolly stand-in's prompts average {pm} tokens (Dolly: 17.9); measured single-device prefill gain "
                 f"of + {k} at {pm} tokens is {spm[k]:.2f}× (at 18 tokens {sp[k]:.2f}×): the taller the prefill GEMM, "
                 f"the less a monolithic array idles; light load (prefill util {res[k]['prefill_util']:.2f}) so TTFT "
                 "≈ prefill time")
        rows.append(Row(f"Fig. 14(c) serving TTFT, + {k}", pv, st[k], "x", c))
    for k, pv in PAPER["fig14_tpot"].items():
        r = so[k] / pv
        c = ""
        if abs(r - 1) > 0.25:
            if k == "pyramid":
                c = (f"mean decode batch with Split-K is {batch['split_k']:.2f} requests: at 1 req/s DynaCore decodes "
                     "almost every step at batch 1-2, where packing has nothing to pack; the vanilla SA's batches are "
                     f"{batch['vanilla']:.1f} (its slow steps make requests pile up)")
            elif k == "splittable":
                c = (f"the single-device batch-1 step gain is already {sd[k]:.1f}× (paper 39.1×, Fig. 14(b) row); in "
                     f"serving the DQ array's decode pool runs at {res['dq']['decode_util']:.0%} utilisation with "
                     f"{batch['dq']:.1f} requests per step, so its TPOT adds queueing for slots, while the splittable "
                     f"array decodes at batch {batch['splittable']:.2f}")
            else:
                c = (f"single-device batch-1 decode gain of + {k} is {sd[k]:.2f}× (paper 2.20×); our serving decode "
                     f"batches are {batch[k]:.2f} requests (light load at 1 req/s), so the batch-1 gain carries over; "
                     "the paper's 1.11× implies larger batches in its run (its arrival rate is not stated)")
        rows.append(Row(f"Fig. 14(d) serving TPOT, + {k}", pv, so[k], "x", c))
    return rows, {"single": single, "serving": res, "steps": {"prefill": sp, "decode": sd, "ttft": st, "tpot": so}}


def _serving_figs(fig_dir: Path, runs: dict, ok: list[str], abl: dict) -> list[str]:
    plt = _plt()
    out = []
    groups = [("dynacore", "planaria", "figlut", "planaria-fp16"), ("dynacore", "sa-only", "simd-only",
                                                                    "hetero-4sa+4simd")]
    for gi, (labels, fname, title) in enumerate(
        ((groups[0], "dynacore_fig12_serving.png", "§8.5 / Fig. 12: homogeneous 8-device systems"),
         (groups[1], "dynacore_fig13_static.png", "Fig. 13: static systems vs DynaCore"))):
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        x = np.arange(len(ok))
        w = 0.8 / len(labels)
        for ax, metric, unit in zip(axes, ("ttft_mean_s", "tpot_mean_s"), ("TTFT mean (s)", "TPOT mean (s)")):
            for i, lab in enumerate(labels):
                ax.bar(x + i * w, [runs[(wk, lab)][metric] for wk in ok], w, label=lab)
            ax.set_xticks(x + 0.4 - w / 2, ok)
            ax.set_yscale("log")
            ax.set_ylabel(unit)
            ax.grid(True, axis="y", alpha=0.3)
        axes[0].legend(fontsize=8)
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(fig_dir / fname, dpi=110)
        plt.close(fig)
        out.append(fname)
    fig, axes = plt.subplots(1, 4, figsize=(13, 3.4))
    for ax, (key, pkey, title) in zip(axes, (("prefill", "fig14_prefill_b1", "(a) prefill b=1"),
                                              ("decode", "fig14_decode_b1", "(b) decode b=1"),
                                              ("ttft", "fig14_ttft", "(c) serving TTFT"),
                                              ("tpot", "fig14_tpot", "(d) serving TPOT"))):
        ks = list(abl["steps"][key])
        x = np.arange(len(ks))
        ax.bar(x - 0.2, [abl["steps"][key][k] for k in ks], 0.4, label="hydra_opt")
        ax.bar(x + 0.2, [PAPER[pkey].get(k, np.nan) for k in ks], 0.4, label="paper")
        ax.set_xticks(x, ks, rotation=30, fontsize=8)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_ylabel("speed-up over previous step (x)")
    axes[0].legend(fontsize=8)
    fig.suptitle("Fig. 14: cumulative ablation, Llama-2-7B")
    fig.tight_layout()
    fig.savefig(fig_dir / "dynacore_fig14_ablation.png", dpi=110)
    plt.close(fig)
    out.append("dynacore_fig14_ablation.png")
    return out


# ---------------------------------------------------------------------------------------------------------------
def run(quick: bool, fig_dir: Path, seed: int = 0, *, paths: ExperimentPaths | None = None) -> Section:
    """Run the DynaCore §8 reproduction (traces from ``paths``' shared data folder); PNGs go to ``fig_dir``."""
    t0 = time.perf_counter()
    fig_dir = Path(fig_dir)
    fig_dir.mkdir(parents=True, exist_ok=True)
    r11, f11, _ = _fig11(fig_dir)
    r10, f10, _ = _fig10(fig_dir, quick)
    rs, fs, serving_md, _ = _serving(fig_dir, quick, seed, (paths or ExperimentPaths.default()).traces_dir)
    intro = (
        "All numbers come from the DynaCore core model (`hydra_opt.hardware.dynacore`, issue 3: Table 2 device — "
        "28 nm, 500 MHz, 8 MB buffer, 4 TB/s, 16,384 multipliers for every architecture; DynaCore = 16 cores of "
        "32×32, W8A8 prefill + W4A16 decode; Planaria/SARA W8A8, BitFusion W8A8, FIGLUT W4A16, SA with DQ) and the "
        "disaggregated serving simulator `hydra_opt.experiments.disagg`. Paper ratios are 'DynaCore better by ×'. "
        "The paper's Tables 2–3 (baseline configurations, device setup) are empty in our copy, so baseline "
        "precisions and the SIMD device are our reading of the text."
    )
    return Section(
        key="dynacore",
        title="DynaCore §8 — batch sweep, single-device comparison, disaggregated serving, static systems, ablation",
        intro_md=intro,
        rows=r11 + r10 + rs,
        figures=[f11, f10, *fs],
        extra_md=serving_md,
        wall_s=time.perf_counter() - t0,
        quick=quick,
    )
