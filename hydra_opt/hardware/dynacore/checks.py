"""The DynaCore paper's worked numbers and the Fig. 11 batch sweep, recomputed from the core model.

What ``python -m hydra_opt dynacore check`` / ``sweep`` print (the CLI only parses and prints): Sec. 2.4's GEMV
compute/weight-stream ratio, Fig. 9's pyramid packing, Fig. 11's saturation batches, batch-1/256 decode latencies
and batch-1 speedups, the Sec. 8.6 ablations (:func:`check_report`), and per-(architecture, batch) decode steps
(:func:`sweep_rows`). Every value is computed from the model on the device of a :class:`CheckSetup`; the paper's
values sit beside them under ``paper`` (docs/dynacore.md §3 explains where they differ and why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from hydra_opt.config.errors import ConfigError
from hydra_opt.hardware.dynacore import architectures as A
from hydra_opt.hardware.dynacore.core import Architecture, Device, Part, gemm_dram_bytes, part_cost
from hydra_opt.hardware.dynacore.model_cost import StepCost, decode_step, prefill, saturation_batch
from hydra_opt.hardware.dynacore.packing import pyramid_shapes
from hydra_opt.hardware.dynacore.precision import get_datapath, get_policy
from hydra_opt.hardware.dynacore.search import ConfigTable

__all__ = [
    "FIG11_BATCHES",
    "PAPER_ABLATION",
    "PAPER_ABLATION_PREFILL",
    "PAPER_FIG11",
    "SWEEP_ARCHITECTURES",
    "CheckSetup",
    "ablation",
    "check_report",
    "decode_latencies",
    "sweep_rows",
]

#: The paper's Fig. 11 / Sec. 8.4 values (Llama-3-8B decode on one device).
PAPER_FIG11 = {
    "decode_saturation_batch": {"systolic": 128, "planaria": 32, "sara": 4, "dynacore": 1},
    "decode_latency_ms_b256": {"dynacore": 60.7, "sara": 66.5, "planaria": 75.2, "systolic": 126.9},
    "speedup_vs_systolic_b1": {"dynacore": 85.2},
}
#: The paper's decode ablation (Sec. 8.6, Fig. 14(b): Llama2-7B, Dolly, batch 1, cumulative components on a
#: 128×128 array): DQ 1.0x (no gain on the vanilla array), splittable array 39.1x, Split-K 2.20x; the FP16-weight
#: bandwidth floor would cap the splittable gain at about 31x.
PAPER_ABLATION = {"dq": 1.0, "splittable": 39.1, "split_k": 2.20, "fp16_weight_cap": 31.0}
#: Fig. 14(a), prefill at batch 1 on Dolly (17.9-token prompts): DQ 1.93x, splittable array 5.69x, pyramid 1.25x.
PAPER_ABLATION_PREFILL = {"dq": 1.93, "splittable": 5.69, "pyramid": 1.25}
#: Batch sizes of Fig. 11 (and of ``check``).
FIG11_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: Architectures a sweep may name (DynaCore and its baselines).
SWEEP_ARCHITECTURES: tuple[str, ...] = tuple(A.ARCHITECTURES)
#: Single-datapath baselines run their own precision whatever the policy asked for.
_FIXED_POLICY = {"bitfusion": "w8a8", "figlut": "w4a16"}


@dataclass(frozen=True)
class CheckSetup:
    """The device and run of a check or sweep.

    Attributes:
        array: Array side S of the device (S² PEs); DynaCore gets (S/core_size)² cores.
        core_size: DynaCore core side.
        clock_mhz: Clock, MHz.
        dram_tbps: DRAM bandwidth, TB/s.
        buffer_mb: On-chip buffer, MB.
        model: Model name or YAML path.
        policy: DynaCore precision policy.
        baseline_policy: Precision policy of the fixed/Planaria/SARA/SIMD baselines.
        context_tokens: Prior context tokens per request.
        attention: Include attention score/value GEMMs and KV streaming (Fig. 11: weight GEMMs only).
    """

    array: int = 128
    core_size: int = 32
    clock_mhz: float = 500.0
    dram_tbps: float = 4.0
    buffer_mb: float = 8.0
    model: str = "llama-3-8b"
    policy: str = "disaggregated"
    baseline_policy: str = "w8a8"
    context_tokens: int = 0
    attention: bool = False

    @property
    def device(self) -> Device:
        """The device around the PE array."""
        return Device(self.clock_mhz, self.buffer_mb, self.dram_tbps)

    @property
    def dynacore_core_size(self) -> int:
        """DynaCore core side on this array (at most the array side)."""
        return min(self.core_size, self.array)

    def policy_for(self, arch_name: str) -> str:
        """The precision policy ``arch_name`` runs."""
        if arch_name in _FIXED_POLICY:
            return _FIXED_POLICY[arch_name]
        return self.policy if arch_name == "dynacore" else self.baseline_policy

    def architecture(self, name: str) -> Architecture:
        """Architecture ``name`` with ``array²`` PEs on this device (DynaCore: cores of ``core_size²``)."""
        device, array = self.device, self.array
        if name == "dynacore":
            s = self.dynacore_core_size
            return A.dynacore(s, max(1, (array // s) ** 2), device)
        if name == "planaria":
            return A.planaria(array, min(32, array), device)
        if name == "sara":
            return A.sara(array, min(4, array), device)
        if name in ("systolic", "bitfusion", "figlut"):
            return A.ARCHITECTURES[name](array, device=device)
        if name == "simd":
            return A.simd(array, array, device)
        raise ConfigError(f"is not an architecture; allowed: {', '.join(SWEEP_ARCHITECTURES)}", key="arch",
                          value=name)


def decode_latencies(setup: CheckSetup, names: Sequence[str],
                     batches: Sequence[int]) -> dict[str, dict[int, StepCost]]:
    """Decode step of every architecture in ``names`` at every batch size."""
    from hydra_opt.workload.models import load_model

    model = load_model(setup.model)
    out: dict[str, dict[int, StepCost]] = {}
    for name in names:
        table = ConfigTable(setup.architecture(name))
        pol = setup.policy_for(name)
        out[name] = {b: decode_step(table, model, b, setup.context_tokens, pol, attention=setup.attention)
                     for b in batches}
    return out


def _gemv_ratios(setup: CheckSetup) -> tuple[float, float, int, int]:
    """Sec. 2.4: batch-1 FP16 GEMV on one S×S fixed array — steady-state compute over weight streaming (without
    and with fill/drain), and the GEMV's (n, k)."""
    device = setup.device
    sa = A.systolic(setup.array, device)
    fp16 = get_datapath("fp16")
    n, k = 8 * setup.array, 4096
    pc = part_cost(sa, Part(0, sa.modes[0].meus[0], 1), 1, n, k, 1, True, fp16)
    stream_s = gemm_dram_bytes(sa, 1, n, k, 1, True, fp16) / device.dram_bytes_per_s
    return (pc.steady_compute_cycles / device.clock_hz) / stream_s, (pc.cycles / device.clock_hz) / stream_s, n, k


def _parameters(setup: CheckSetup) -> dict[str, Any]:
    p = asdict(setup)
    p.pop("core_size")
    p["pes"] = setup.array**2
    p["dynacore_core_size"] = setup.dynacore_core_size
    p["decode_datapath"] = get_policy(setup.policy).decode
    p["baseline_decode_datapath"] = get_policy(setup.baseline_policy).decode
    p["attention"] = bool(setup.attention)
    order = ("array", "pes", "dynacore_core_size", "clock_mhz", "dram_tbps", "buffer_mb", "model", "policy",
             "decode_datapath", "baseline_policy", "baseline_decode_datapath", "context_tokens", "attention")
    return {key: p[key] for key in order}


def check_report(setup: CheckSetup) -> dict[str, Any]:
    """The ``check`` numbers as a JSON-ready dict (every value computed from the model; the paper's under ``paper``).

    Raises:
        ConfigError: On an unknown policy (key ``policy`` / ``baseline_policy``).
    """
    from hydra_opt.hardware.dynacore.architectures import FIG11_ARCHITECTURES

    get_policy(setup.policy, key="policy")
    get_policy(setup.baseline_policy, key="baseline_policy")
    ratio, ratio_with_fill, n, k = _gemv_ratios(setup)
    names = list(FIG11_ARCHITECTURES)
    lat = decode_latencies(setup, names, FIG11_BATCHES)
    ms = {a: {b: c.latency_s * 1e3 for b, c in v.items()} for a, v in lat.items()}
    sa1, sa256 = ms["systolic"][1], ms["systolic"][256]
    return {
        "parameters": _parameters(setup),
        "gemv_compute_over_weight_stream": round(ratio, 6),
        "gemv_compute_over_weight_stream_with_fill": round(ratio_with_fill, 6),
        "gemv_shape": {"m": 1, "n": n, "k": k, "precision": "fp16"},
        "pyramid_packing": {"tokens": 11, "core": "4x4", "meus": [f"{m}x{nn}" for m, nn in pyramid_shapes(11, 4)]},
        "decode_saturation_batch": {a: saturation_batch(ms[a]) for a in names},
        "decode_latency_ms": {a: {"1": round(ms[a][1], 4), "256": round(ms[a][256], 4)} for a in names},
        "decode_latency_ms_by_batch": {a: {str(b): round(v, 4) for b, v in ms[a].items()} for a in names},
        "speedup_vs_systolic": {a: round(sa1 / ms[a][1], 3) for a in names},
        "latency_ratio_vs_systolic_b256": {a: round(ms[a][256] / sa256, 4) for a in names},
        "decode_energy_mj_b1": {a: round(lat[a][1].energy_j * 1e3, 4) for a in names},
        "ablation_decode_b1": ablation(setup),
        "ablation_prefill_b1": ablation(setup, phase="prefill"),
        "paper": {**PAPER_FIG11, "ablation_decode_b1": PAPER_ABLATION, "ablation_prefill_b1": PAPER_ABLATION_PREFILL},
    }


def ablation(setup: CheckSetup, phase: str = "decode") -> dict[str, Any]:
    """Sec. 8.6 ablation on the setup's device at batch 1 (Llama-2-7B; Dolly's mean prompt of 18 tokens as the
    decode context or the prefill length): cumulative components, each step's speedup over the previous one.
    Decode runs W4A16 after DQ, prefill W8A8; plans are searched for latency alone (λ = 0)."""
    from hydra_opt.workload.models import load_model

    model = load_model("llama-2-7b")
    device, array = setup.device, setup.array
    s = setup.dynacore_core_size
    c = max(1, (array // s) ** 2)
    q = "w4a16" if phase == "decode" else "w8a8"
    steps = [
        ("vanilla", A.systolic(array, device), "fp16"),
        ("dq", A.systolic(array, device), q),
        ("splittable", A.dynacore(s, c, device, split_k=False, pyramid=False), q),
        ("split_k", A.dynacore(s, c, device, pyramid=False), q),
        ("pyramid", A.dynacore(s, c, device), q),
    ]

    def run(arch: Architecture, pol: str) -> float:
        t = ConfigTable(arch, lam=0.0)  # latency-only search: each added component can only help
        step = decode_step(t, model, 1, 18, pol) if phase == "decode" else prefill(t, model, 18, 1, pol)
        return step.latency_s * 1e3

    ms = {n: run(a, p) for n, a, p in steps}
    order = [n for n, _, _ in steps]
    out: dict[str, Any] = {"model": "llama-2-7b", "phase": phase, "tokens": 18,
                           "latency_ms": {n: round(v, 4) for n, v in ms.items()}}
    out["speedup_over_previous"] = {b: round(ms[a] / ms[b], 3) for a, b in zip(order, order[1:])}
    if phase == "decode":
        out["fp16_weight_cap"] = round(ms["dq"] / run(steps[2][1], "fp16"), 3)
    return out


def sweep_rows(setup: CheckSetup, names: Sequence[str], batches: Sequence[int]) -> list[dict[str, Any]]:
    """Rows of the Fig. 11 table: one per (architecture, batch), latencies in ms, energy in mJ."""
    lat = decode_latencies(setup, names, batches)
    rows = []
    for a in names:
        for b in batches:
            c = lat[a][b]
            rows.append({
                "architecture": a,
                "batch": b,
                "datapath": get_policy(setup.policy_for(a)).decode,
                "latency_ms": round(c.latency_s * 1e3, 6),
                "compute_ms": round(c.compute_s * 1e3, 6),
                "dram_ms": round(c.dram_s * 1e3, 6),
                "energy_mj": round(c.energy_j * 1e3, 6),
                "macs": int(c.macs),
                "bound": c.utilization_bound,
            })
    return rows
