"""Speed of the NoI flow model (hydra_opt.hardware.noi.FlowNetwork) under a simulator-like load.

A 6×4 mesh (the HYDRA package), 384 GB/s links, ring HBMs with 600 GB/s ports; ``--concurrency`` compute nodes
each run a closed loop "short compute gap, then one HBM→node flow of 0.1–4 MB" (what the simulator does per
task). Reports CPU time per flow (one add + one drain, each followed by a rate recomputation) per sharing mode.

Run: ``python benchmarks/bench_noi.py [--flows 50000]``; writes ``benchmarks/results/noi_speed.md``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from hydra_opt.hardware.noi import SHARING_MODES, FlowNetwork, Mesh


def run(mode: str, n_flows: int, concurrency: int, seed: int = 0, bin_s: float | None = 0.01) -> dict:
    """Closed loop: ``concurrency`` compute nodes each alternate a short compute gap and one HBM→node flow."""
    mesh = Mesh(6, 4, 384.0, 1e-8)
    ring = [n for n in range(mesh.n_nodes) if mesh.is_ring(n)]
    hbm = ring[: 24 - concurrency] if concurrency < 24 else ring[:1]
    compute = [n for n in range(mesh.n_nodes) if n not in hbm][:concurrency]
    net = FlowNetwork(mesh, port_gbps={h: 600.0 for h in hbm}, sharing=mode, bin_s=bin_s)
    rng = np.random.default_rng(seed)
    nbytes = rng.uniform(1e5, 4e6, n_flows)
    gaps = rng.exponential(5e-6, n_flows)
    srcs = rng.choice(hbm, n_flows)
    # Event heap of (time, kind, node): kind 0 = node ready to start its next flow.
    import heapq

    heap = [(float(gaps[i]), i) for i in range(len(compute))]
    heapq.heapify(heap)
    nxt_flow = 0
    owner: dict[int, int] = {}
    started = done = 0
    active_sum = 0
    t0 = time.process_time()
    while done < n_flows:
        nc = net.next_completion()
        if heap and (nc is None or heap[0][0] < nc[0]):
            t, node_i = heapq.heappop(heap)
            if started < n_flows:
                net.advance(t)
                active_sum += net.n_active
                net.add_flow(started, int(srcs[started]), compute[node_i], float(nbytes[started]), t)
                owner[started] = node_i
                started += 1
            continue
        assert nc is not None
        for d in net.advance(nc[0]):
            done += 1
            node_i = owner.pop(d.flow_id)
            heapq.heappush(heap, (d.delivered_s + float(gaps[d.flow_id]), node_i))
    del nxt_flow
    wall = time.process_time() - t0  # CPU time: robust to other jobs on a shared machine
    return {
        "mode": mode,
        "flows": n_flows,
        "mean_active": active_sum / max(started, 1),
        "wall_s": wall,
        "us_per_flow": 1e6 * wall / n_flows,
        "recomputes": net.n_recomputes,
        "rerated_per_recompute": net.n_rerated / max(net.n_recomputes, 1),
        "sim_s": net.now_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flows", type=int, default=50_000)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    import os

    load0 = os.getloadavg()[0]
    rows = [run(m, args.flows, args.concurrency, bin_s=b) for m in SHARING_MODES for b in (None, 0.01)]
    load1 = os.getloadavg()[0]
    lines = [
        f"# NoI FlowNetwork speed ({args.flows} flows, target concurrency {args.concurrency})",
        "",
        f"Command: `python benchmarks/bench_noi.py --flows {args.flows} --concurrency {args.concurrency}`",
        "",
        f"Machine: {os.cpu_count()} CPUs, 1-min load average {load0:.1f} before / {load1:.1f} after (shared machine;",
        "times are the process's CPU time, which other jobs inflate less than wall time). The harness itself",
        "(arrivals, heap) is included: compare rows, the `none` rows are close to the fixed overhead.",
        "",
        (
            "| sharing | time bins | flows | mean active flows | CPU (s) | µs CPU per flow (add+drain) |"
            " rate recomputations | flows re-rated per recomputation |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r, b in zip(rows, [b for _ in SHARING_MODES for b in (None, 0.01)]):
        lines.append(
            f"| {r['mode']} | {'10 ms' if b else 'off'} | {r['flows']} | {r['mean_active']:.1f} | {r['wall_s']:.2f} |"
            f" {r['us_per_flow']:.1f} | {r['recomputes']} | {r['rerated_per_recompute']:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "noi_speed.md").write_text(text)


if __name__ == "__main__":
    main()
