"""Speed of the DynaCore configuration search and of model-level decode pricing.

Targets (issue 3): a configuration lookup for any (M, layer) ≤ 1 ms once the table is built; the model-level
decode latency of Llama-3-8B at one batch size ≤ 5 ms. Writes ``benchmarks/results/dynacore_bench.{csv,md}``.

    python benchmarks/dynacore_bench.py
"""

from __future__ import annotations

import csv
import statistics
import time
from pathlib import Path

from hydra_opt.hardware.dynacore import ConfigTable, decode_step, dynacore, search_gemm
from hydra_opt.workload.models import block_gemms, load_model

OUT = Path(__file__).parent / "results"
BATCHES = list(range(1, 257))


def _time(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    model = load_model("llama-3-8b")
    arch = dynacore()
    shapes = sorted({(g.n, g.k, g.count, g.weight) for b in model.blocks for g in block_gemms(b, [0], [1]) if g.weight})
    rows = []

    # 1. Raw search (Alg. 1, exhaustive) per (M, layer), no cache.
    t = []
    for m in (1, 7, 31, 127, 255, 256):
        for n, k, _, _ in shapes:
            t.extend(_time(lambda: search_gemm(arch, m, n, k, 1, True, "w4a16"), 3))
    rows.append(("search_gemm uncached, 32x32x16, per (M, layer)", "ms", statistics.median(t) * 1e3, max(t) * 1e3))

    # 2. Table build and lookups.
    table = ConfigTable(arch)
    t0 = time.perf_counter()
    n_entries = table.build(shapes, BATCHES, ["w4a16", "w8a8"])
    build_s = time.perf_counter() - t0
    rows.append(
        (f"table build ({n_entries} entries: {len(shapes)} layers x 256 M x 2 datapaths)", "s", build_s, build_s)
    )
    keys = [(m, n, k) for m in BATCHES for n, k, _, _ in shapes]
    t = []
    for m, n, k in keys:
        t0 = time.perf_counter()
        table.lookup(m, n, k, 1, True, "w4a16")
        t.append(time.perf_counter() - t0)
    rows.append(("configuration lookup after build, per (M, layer)", "ms", statistics.median(t) * 1e3, max(t) * 1e3))

    # 3. Model-level decode step of Llama-3-8B (32 blocks + LM head), warm table, with attention at 1024 context.
    for b in (1, 64, 256):
        decode_step(table, model, b, 1024)  # warm the attention shapes
        t = _time(lambda: decode_step(table, model, b, 1024), 20)
        rows.append(
            (f"decode_step llama-3-8b batch {b}, ctx 1024, warm table", "ms", statistics.median(t) * 1e3, max(t) * 1e3)
        )
    cold = ConfigTable(arch)
    t = _time(lambda: decode_step(cold, model, 16, 1024), 1)
    rows.append(("decode_step llama-3-8b batch 16, ctx 1024, cold table", "ms", t[0] * 1e3, t[0] * 1e3))

    OUT.mkdir(exist_ok=True)
    with (OUT / "dynacore_bench.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["measurement", "unit", "median", "max"])
        w.writerows(rows)
    lines = [
        "# DynaCore benchmark",
        "",
        "Targets: lookup ≤ 1 ms after the table is built; model-level decode of",
        "Llama-3-8B at one batch ≤ 5 ms.",
        "",
        "| measurement | unit | median | max |",
        "|---|---|---|---|",
    ]
    lines += [f"| {a} | {u} | {m:.4g} | {x:.4g} |" for a, u, m, x in rows]
    (OUT / "dynacore_bench.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
