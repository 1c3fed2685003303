"""``python -m hydra_opt dynacore`` — the DynaCore core model's worked checks and batch sweeps.

* ``dynacore check [--json] [--array S] [--clock-mhz F] [--dram-tbps B] [--buffer-mb X]`` recomputes the paper's
  worked numbers from the model (Sec. 2.4's GEMV compute/weight-stream ratio, Fig. 9's pyramid packing, Fig. 11's
  saturation batches, batch-1/256 decode latencies and batch-1 speedups) and prints them next to the paper's values.
* ``dynacore sweep --model llama-3-8b --batch 1,2,4,...,256 --csv F [--png P]`` writes the Fig. 11 table
  (decode-step latency per architecture and batch size) and a plot.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

from hydra_opt.config.errors import ConfigError

__all__ = ["register", "run", "parse_batches", "check_report", "sweep_rows"]

#: The paper's Fig. 11 / Sec. 8.4 values (Llama-3-8B decode on one device).
#: The paper's decode ablation (Sec. 8.6, Fig. 14(b): Llama2-7B, Dolly, batch 1, cumulative components on a
#: 128×128 array): DQ 1.0x (no gain on the vanilla array), splittable array 39.1x, Split-K 2.20x; the FP16-weight
#: bandwidth floor would cap the splittable gain at about 31x.
PAPER_ABLATION = {"dq": 1.0, "splittable": 39.1, "split_k": 2.20, "fp16_weight_cap": 31.0}
#: Fig. 14(a), prefill at batch 1 on Dolly (17.9-token prompts): DQ 1.93x, splittable array 5.69x, pyramid 1.25x.
PAPER_ABLATION_PREFILL = {"dq": 1.93, "splittable": 5.69, "pyramid": 1.25}
PAPER_FIG11 = {
    "decode_saturation_batch": {"systolic": 128, "planaria": 32, "sara": 4, "dynacore": 1},
    "decode_latency_ms_b256": {"dynacore": 60.7, "sara": 66.5, "planaria": 75.2, "systolic": 126.9},
    "speedup_vs_systolic_b1": {"dynacore": 85.2},
}
DEFAULT_BATCHES = "1,2,4,...,256"


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``dynacore`` subcommand."""
    p = sub.add_parser("dynacore", help="DynaCore core model: worked checks and batch sweeps")
    dsub = p.add_subparsers(dest="dynacore_command", metavar="ACTION")

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--array", type=int, default=128, help="array side S of the device (S² PEs; default 128)")
        q.add_argument("--core-size", type=int, default=32, help="DynaCore core side (default 32)")
        q.add_argument("--clock-mhz", type=float, default=500.0, help="clock, MHz (default 500)")
        q.add_argument("--dram-tbps", type=float, default=4.0, help="DRAM bandwidth, TB/s (default 4)")
        q.add_argument("--buffer-mb", type=float, default=8.0, help="on-chip buffer, MB (default 8)")
        q.add_argument("--model", default="llama-3-8b", help="model name or YAML path (default llama-3-8b)")
        q.add_argument(
            "--policy",
            default="disaggregated",
            help="DynaCore precision policy: fp16, w8a8, w4a16, w4a8, disaggregated (default disaggregated)",
        )
        q.add_argument(
            "--baseline-policy",
            default="w8a8",
            help="precision policy of the fixed/Planaria/SARA/SIMD baselines (default w8a8: the paper's "
            "baselines use one precision for both phases; BitFusion is always W8A8, FIGLUT W4A16)",
        )
        q.add_argument("--context", type=int, default=0, help="prior context tokens per request (default 0)")
        q.add_argument(
            "--attention",
            action="store_true",
            help="include attention score/value GEMMs and KV streaming (default: weight GEMMs only, as Fig. 11)",
        )

    c = dsub.add_parser("check", help="recompute the paper's worked numbers from the model")
    common(c)
    c.add_argument("--json", action="store_true", help="print JSON")
    s = dsub.add_parser("sweep", help="decode latency vs batch size per architecture (Fig. 11)")
    common(s)
    s.add_argument("--batch", default=DEFAULT_BATCHES, help=f"batch sizes, e.g. {DEFAULT_BATCHES}")
    s.add_argument("--arch", default="systolic,planaria,sara,dynacore", help="architectures (comma-separated)")
    s.add_argument("--csv", required=True, help="output CSV file")
    s.add_argument("--png", default=None, help="output plot (default: the CSV path with .png)")
    return p


def parse_batches(text: str) -> list[int]:
    """``"1,2,4,...,256"`` → ``[1, 2, 4, ..., 256]`` (``...`` continues the geometric or arithmetic step)."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    out: list[int] = []
    for i, t in enumerate(items):
        if t in ("...", "…"):
            if len(out) < 2 or i + 1 >= len(items):
                raise ConfigError("needs two values before '...' and one after", key="--batch", value=text)
            a, b = out[-2], out[-1]
            try:
                end = int(items[i + 1])
            except ValueError:
                raise ConfigError("is not a list of positive integers", key="--batch", value=text) from None
            geometric = a > 0 and b % a == 0 and b // a > 1
            x = b
            while True:
                x = x * (b // a) if geometric else x + (b - a)
                if x >= end or (not geometric and b <= a):
                    break
                out.append(x)
            continue
        try:
            v = int(t)
        except ValueError:
            raise ConfigError("is not a list of positive integers", key="--batch", value=text) from None
        if v < 1:
            raise ConfigError("is not a list of positive integers", key="--batch", value=text)
        out.append(v)
    if not out:
        raise ConfigError("is empty", key="--batch", value=text)
    return sorted(set(out))


def _device(args: argparse.Namespace):
    from hydra_opt.hardware.dynacore.core import Device, is_power_of_two

    for key, v in (("--array", args.array), ("--core-size", args.core_size)):
        if not is_power_of_two(v) or v > 4096:
            raise ConfigError("is not a power of two in [1, 4096]", file="<cli>", key=key, value=v)
    for key, v in (("--clock-mhz", args.clock_mhz), ("--dram-tbps", args.dram_tbps), ("--buffer-mb", args.buffer_mb)):
        if not (math.isfinite(v) and v > 0):
            raise ConfigError("is not a positive number", file="<cli>", key=key, value=v)
    if args.context < 0:
        raise ConfigError("is not a non-negative integer", file="<cli>", key="--context", value=args.context)
    return Device(args.clock_mhz, args.buffer_mb, args.dram_tbps)


def _arch(name: str, array: int, core_size: int, device):
    """An architecture of ``array²`` PEs (DynaCore: cores of ``core_size²``)."""
    from hydra_opt.hardware.dynacore import architectures as A

    if name == "dynacore":
        s = min(core_size, array)
        return A.dynacore(s, max(1, (array // s) ** 2), device)
    if name == "planaria":
        return A.planaria(array, min(32, array), device)
    if name == "sara":
        return A.sara(array, min(4, array), device)
    if name in ("systolic", "bitfusion", "figlut"):
        return A.ARCHITECTURES[name](array, device=device)
    if name == "simd":
        return A.simd(array, array, device)
    raise ConfigError(
        f"is not an architecture; allowed: {', '.join(A.ARCHITECTURES)}", file="<cli>", key="--arch", value=name
    )


def _policy_for(arch_name: str, args: argparse.Namespace) -> str:
    # Single-datapath baselines run their own precision whatever the study's policy.
    fixed = {"bitfusion": "w8a8", "figlut": "w4a16"}
    if arch_name in fixed:
        return fixed[arch_name]
    return args.policy if arch_name == "dynacore" else args.baseline_policy


def _decode_latencies(args, names, batches, device):
    from hydra_opt.hardware.dynacore.model_cost import decode_step
    from hydra_opt.hardware.dynacore.search import ConfigTable
    from hydra_opt.workload.models import load_model

    model = load_model(args.model)
    out = {}
    for name in names:
        table = ConfigTable(_arch(name, args.array, args.core_size, device))
        out[name] = {
            b: decode_step(table, model, b, args.context, _policy_for(name, args), attention=args.attention)
            for b in batches
        }
    return out


def check_report(args: argparse.Namespace) -> dict:
    """The ``check`` numbers as a JSON-ready dict (every value computed from the model)."""
    from hydra_opt.hardware.dynacore import architectures as A
    from hydra_opt.hardware.dynacore.core import Part, gemm_dram_bytes, part_cost
    from hydra_opt.hardware.dynacore.model_cost import saturation_batch
    from hydra_opt.hardware.dynacore.packing import pyramid_shapes
    from hydra_opt.hardware.dynacore.precision import get_datapath, get_policy

    device = _device(args)
    get_policy(args.policy, key="--policy")
    get_policy(args.baseline_policy, key="--baseline-policy")
    # Sec. 2.4: batch-1 FP16 GEMV on one S×S fixed array — steady-state compute over weight streaming.
    sa = A.systolic(args.array, device)
    fp16 = get_datapath("fp16")
    n, k = 8 * args.array, 4096
    pc = part_cost(sa, Part(0, sa.modes[0].meus[0], 1), 1, n, k, 1, True, fp16)
    stream_s = gemm_dram_bytes(sa, 1, n, k, 1, True, fp16) / device.dram_bytes_per_s
    ratio = (pc.steady_compute_cycles / device.clock_hz) / stream_s
    ratio_with_fill = (pc.cycles / device.clock_hz) / stream_s

    names = list(A.FIG11_ARCHITECTURES)
    batches = parse_batches(DEFAULT_BATCHES)
    lat = _decode_latencies(args, names, batches, device)
    ms = {a: {b: c.latency_s * 1e3 for b, c in v.items()} for a, v in lat.items()}
    sat = {a: saturation_batch(ms[a]) for a in names}
    sa1, sa256 = ms["systolic"][1], ms["systolic"][256]
    return {
        "parameters": {
            "array": args.array,
            "pes": args.array**2,
            "dynacore_core_size": min(args.core_size, args.array),
            "clock_mhz": args.clock_mhz,
            "dram_tbps": args.dram_tbps,
            "buffer_mb": args.buffer_mb,
            "model": args.model,
            "policy": args.policy,
            "decode_datapath": get_policy(args.policy).decode,
            "baseline_policy": args.baseline_policy,
            "baseline_decode_datapath": get_policy(args.baseline_policy).decode,
            "context_tokens": args.context,
            "attention": bool(args.attention),
        },
        "gemv_compute_over_weight_stream": round(ratio, 6),
        "gemv_compute_over_weight_stream_with_fill": round(ratio_with_fill, 6),
        "gemv_shape": {"m": 1, "n": n, "k": k, "precision": "fp16"},
        "pyramid_packing": {
            "tokens": 11,
            "core": "4x4",
            "meus": [f"{m}x{nn}" for m, nn in pyramid_shapes(11, 4)],
        },
        "decode_saturation_batch": sat,
        "decode_latency_ms": {a: {"1": round(ms[a][1], 4), "256": round(ms[a][256], 4)} for a in names},
        "decode_latency_ms_by_batch": {a: {str(b): round(v, 4) for b, v in ms[a].items()} for a in names},
        "speedup_vs_systolic": {a: round(sa1 / ms[a][1], 3) for a in names},
        "latency_ratio_vs_systolic_b256": {a: round(ms[a][256] / sa256, 4) for a in names},
        "decode_energy_mj_b1": {a: round(lat[a][1].energy_j * 1e3, 4) for a in names},
        "ablation_decode_b1": _ablation(args, device),
        "ablation_prefill_b1": _ablation(args, device, phase="prefill"),
        "paper": {**PAPER_FIG11, "ablation_decode_b1": PAPER_ABLATION, "ablation_prefill_b1": PAPER_ABLATION_PREFILL},
    }


def _ablation(args: argparse.Namespace, device, phase: str = "decode") -> dict:
    """Sec. 8.6 ablation on the check's device at batch 1 (Llama-2-7B; Dolly's mean prompt of 18 tokens as the
    decode context or the prefill length): cumulative components, each step's speedup over the previous one.
    Decode runs W4A16 after DQ, prefill W8A8; plans are searched for latency alone (λ = 0)."""
    from hydra_opt.hardware.dynacore import architectures as A
    from hydra_opt.hardware.dynacore.model_cost import decode_step, prefill
    from hydra_opt.hardware.dynacore.search import ConfigTable
    from hydra_opt.workload.models import load_model

    model = load_model("llama-2-7b")
    s = min(args.core_size, args.array)
    c = max(1, (args.array // s) ** 2)
    q = "w4a16" if phase == "decode" else "w8a8"
    steps = [
        ("vanilla", A.systolic(args.array, device), "fp16"),
        ("dq", A.systolic(args.array, device), q),
        ("splittable", A.dynacore(s, c, device, split_k=False, pyramid=False), q),
        ("split_k", A.dynacore(s, c, device, pyramid=False), q),
        ("pyramid", A.dynacore(s, c, device), q),
    ]

    def run(arch, pol: str) -> float:
        t = ConfigTable(arch, lam=0.0)  # latency-only search: each added component can only help
        step = decode_step(t, model, 1, 18, pol) if phase == "decode" else prefill(t, model, 18, 1, pol)
        return step.latency_s * 1e3

    ms = {n: run(a, p) for n, a, p in steps}
    order = [n for n, _, _ in steps]
    out = {"model": "llama-2-7b", "phase": phase, "tokens": 18, "latency_ms": {n: round(v, 4) for n, v in ms.items()}}
    out["speedup_over_previous"] = {b: round(ms[a] / ms[b], 3) for a, b in zip(order, order[1:])}
    if phase == "decode":
        out["fp16_weight_cap"] = round(ms["dq"] / run(steps[2][1], "fp16"), 3)
    return out


def sweep_rows(args: argparse.Namespace) -> list[dict]:
    """Rows of the Fig. 11 table: one per (architecture, batch)."""
    from hydra_opt.hardware.dynacore.precision import get_policy

    device = _device(args)
    names = [a.strip() for a in args.arch.split(",") if a.strip()]
    batches = parse_batches(args.batch)
    lat = _decode_latencies(args, names, batches, device)
    rows = []
    for a in names:
        for b in batches:
            c = lat[a][b]
            rows.append(
                {
                    "architecture": a,
                    "batch": b,
                    "datapath": get_policy(_policy_for(a, args)).decode,
                    "latency_ms": round(c.latency_s * 1e3, 6),
                    "compute_ms": round(c.compute_s * 1e3, 6),
                    "dram_ms": round(c.dram_s * 1e3, 6),
                    "energy_mj": round(c.energy_j * 1e3, 6),
                    "macs": int(c.macs),
                    "bound": c.utilization_bound,
                }
            )
    return rows


def _plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for a in dict.fromkeys(r["architecture"] for r in rows):
        pts = [(r["batch"], r["latency_ms"]) for r in rows if r["architecture"] == a]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=a)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (requests)")
    ax.set_ylabel("decode step latency (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _print_check(rep: dict) -> None:
    p = rep["parameters"]
    print(
        f"device: {p['array']}x{p['array']} PEs ({p['pes']}), {p['clock_mhz']:g} MHz, {p['dram_tbps']:g} TB/s, "
        f"{p['buffer_mb']:g} MB; model {p['model']}; DynaCore policy {p['policy']} (decode {p['decode_datapath']}), "
        f"baselines {p['baseline_policy']} (decode {p['baseline_decode_datapath']})"
    )
    print(
        f"GEMV compute / weight-stream time (FP16, batch 1): {rep['gemv_compute_over_weight_stream']:g} x "
        f"(with fill/drain: {rep['gemv_compute_over_weight_stream_with_fill']:.3f} x)"
    )
    print(f"pyramid packing of M=11 on a 4x4 core: {', '.join(rep['pyramid_packing']['meus'])}")
    print(
        f"{'architecture':<12} {'sat. batch':>10} {'paper':>6} {'b=1 (ms)':>10} {'b=256 (ms)':>11} {'paper':>7} "
        f"{'speedup b=1 (x)':>16}"
    )
    for a, sat in rep["decode_saturation_batch"].items():
        print(
            f"{a:<12} {sat:>10d} {PAPER_FIG11['decode_saturation_batch'][a]:>6d} "
            f"{rep['decode_latency_ms'][a]['1']:>10.3f} {rep['decode_latency_ms'][a]['256']:>11.3f} "
            f"{PAPER_FIG11['decode_latency_ms_b256'][a]:>7.1f} {rep['speedup_vs_systolic'][a]:>16.2f}"
        )
    ab = rep["ablation_decode_b1"]
    steps = ", ".join(f"+{k} {v:g}x" for k, v in ab["speedup_over_previous"].items())
    print(
        f"decode ablation ({ab['model']}, batch 1, context {ab['tokens']}): {steps}; "
        f"FP16-weight cap {ab['fp16_weight_cap']:g}x (paper: +dq 1x, +splittable 39.1x, +split_k 2.2x, cap ~31x)"
    )
    ab = rep["ablation_prefill_b1"]
    steps = ", ".join(f"+{k} {v:g}x" for k, v in ab["speedup_over_previous"].items())
    print(
        f"prefill ablation ({ab['model']}, batch 1, {ab['tokens']}-token prompt): {steps} "
        f"(paper: +dq 1.93x, +splittable 5.69x, +pyramid 1.25x)"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``dynacore check`` or ``dynacore sweep``."""
    action = getattr(args, "dynacore_command", None)
    if action == "check":
        rep = check_report(args)
        if args.json:
            print(json.dumps(rep, indent=2))
        else:
            _print_check(rep)
        return 0
    if action == "sweep":
        rows = sweep_rows(args)
        out = Path(args.csv)
        if out.parent and not out.parent.exists():
            raise ConfigError("directory does not exist", file="<cli>", key="--csv", value=str(out))
        with out.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        png = Path(args.png) if args.png else out.with_suffix(".png")
        _plot(
            rows,
            png,
            f"{args.model} decode: DynaCore {args.policy}, baselines {args.baseline_policy}, "
            f"{args.array}x{args.array} PEs",
        )
        print(f"wrote {out} ({len(rows)} rows) and {png}")
        return 0
    raise ConfigError("is missing; use 'check' or 'sweep'", file="<cli>", key="dynacore", value=None)
