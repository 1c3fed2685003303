"""``python -m hydra_opt list models|workloads|profiles|chiplets|memories`` — what ships with hydra_opt."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from hydra_opt.config import ConfigError

__all__ = ["register", "run"]

WHAT = ("models", "workloads", "profiles", "chiplets", "memories")


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``list`` subcommand."""
    p = sub.add_parser("list", help="list the shipped models, workloads, chiplets and memories")
    p.add_argument("what", choices=WHAT, nargs="?", default="models", help="what to list (default: models)")
    p.add_argument("--sources", action="store_true", help="print every source line, not just the first")
    return p


def _short(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _models(all_sources: bool) -> None:
    from hydra_opt.workload.models import list_models, load_model

    print(
        f"{'name':<15} {'params':>11} {'blocks':>7} {'attn':>5} {'mamba':>6} {'KV/token bf16':>14} "
        f"{'state/seq bf16':>15}  family      source"
    )
    for name in list_models():
        m = load_model(name)
        n_att = m.families.count("attention")
        print(
            f"{name:<15} {m.param_count / 1e9:>9.3f} B {m.n_blocks:>7} {n_att:>5} {m.n_blocks - n_att:>6} "
            f"{m.kv_bytes_per_token('bf16') / 1024:>11.1f} KiB {m.state_bytes_per_seq('bf16') / 2**20:>11.2f} MiB"
            f"  {m.family:<11} {m.source[0] if all_sources else _short(m.source[0])}"
        )
        if all_sources:
            for s in m.source[1:]:
                print(f"{'':<98}{s}")
    print(
        "variants: llama-3-8b@hydra, mamba2-2.7b@hydra, nemotron-h-4b@hydra (HYDRA artifact shapes; docs/workload.md)"
    )
    from hydra_opt.workload.models import ALIASES

    print("aliases:  " + ", ".join(f"{a} = {n}" for a, n in sorted(ALIASES.items())) + " (accepted as model names)")


def _workloads(all_sources: bool) -> None:
    from hydra_opt.workload.profiles import LengthProfile
    from hydra_opt.workload.workload import list_workloads, load_workload

    for name in list_workloads():
        w = load_workload(name)
        print(w.describe())
        if isinstance(w.lengths, LengthProfile):
            print(f"    source: {w.lengths.source if all_sources else _short(w.lengths.source, 110)}")


def _profiles(all_sources: bool) -> None:
    from hydra_opt.workload.profiles import list_profiles, load_profile

    print(
        f"{'name':<14} {'rows':>6} {'prompt median':>14} {'prompt max':>11} {'output median':>14} "
        f"{'output max':>11} {'rate':>10}  source"
    )
    for name in list_profiles():
        p = load_profile(name)
        mid = len(p.prompt_quantiles) // 2
        rate = f"{p.mean_rate_per_s:.2f} req/s" if p.mean_rate_per_s else "-"
        print(
            f"{name:<14} {p.rows:>6} {p.prompt_quantiles[mid]:>8.0f} tok {p.prompt_quantiles[-1]:>7.0f} tok "
            f"{p.output_quantiles[mid]:>8.0f} tok {p.output_quantiles[-1]:>7.0f} tok {rate:>10}  "
            f"{p.source if all_sources else _short(p.source, 70)}"
        )


#: The composition ``list chiplets`` shows (a chiplet is composed for a D2D link bandwidth and a slot area).
LIST_D2D_GBPS = 256.0


def _chiplets(mod: Any) -> None:
    """One row per chiplet (sorted by name) with units, composed at :data:`LIST_D2D_GBPS` and the default slot."""
    lib = mod.ChipletLibrary.default()
    slot = mod.DEFAULT_SLOT_AREA_MM2
    print(f"composed for {LIST_D2D_GBPS:g} GB/s D2D links in a {slot:g} mm2 slot (designs choose both; "
          "docs/hardware.md)")
    print(f"{'name':<11} {'blocks':<15} {'phases':<15} {'cores':>5} {'clock':>8} {'peak MAC/s':>12} "
          f"{'SRAM':>7} {'area':>10}  description")
    for name in sorted(lib.names()):
        try:
            c = lib.get(name, LIST_D2D_GBPS, slot)
        except ConfigError as exc:
            print(f"{name:<11} (not composable here: {exc.problem})")
            continue
        try:
            desc = lib.spec(name).description
        except ConfigError:
            desc = f"hook {mod.HOOKS.get(name, 'provider')} (its settings come from the design)"
        print(f"{name:<11} {'+'.join(sorted(c.families)):<15} {'+'.join(sorted(c.phases)):<15} {c.cores:>5} "
              f"{c.clock_ghz:>4.2f} GHz {c.macs_per_cycle * c.clock_ghz * 1e9 / 1e12:>6.1f} TMAC/s "
              f"{c.sram_bytes / 2**20:>4.0f} MiB {c.area_mm2:>6.1f} mm2  {_short(desc, 70)}")


def _hardware(kind: str) -> None:
    """Chiplets/memories belong to the hardware layer; listed when that layer is present in this build."""
    try:
        if kind == "chiplets":
            _chiplets(importlib.import_module("hydra_opt.hardware.chiplets"))
        else:
            mem = importlib.import_module("hydra_opt.hardware.memory")
            names = getattr(mem, "MEMORY_NAMES", ("hbm3", "hbm3e", "gddr7"))
            print(f"{'name':<6} {'capacity':>9} {'bandwidth':>12} {'latency':>8} {'area':>10}")
            for name in sorted(names):
                m = mem.get_memory(name)
                cap_gib = getattr(m, "capacity_bytes", 0) / 2**30
                print(
                    f"{name:<6} {cap_gib:>5.0f} GiB {getattr(m, 'bw_gbps', 0):>7.0f} GB/s "
                    f"{getattr(m, 'latency_ns', 0):>5.0f} ns {getattr(m, 'area_mm2', 0):>6.1f} mm2"
                )
    except (ImportError, AttributeError) as exc:
        print(f"{kind}: not available in this build ({exc})")


def run(args: argparse.Namespace) -> int:
    """Print the requested table."""
    if args.what == "models":
        _models(args.sources)
    elif args.what == "workloads":
        _workloads(args.sources)
    elif args.what == "profiles":
        _profiles(args.sources)
    else:
        _hardware(args.what)
    return 0
