"""Estimator vs simulator on continuous / chunked batching + elastic scheduling: the stream model's quick check.

Per workload: ``--designs`` designs sampled from a search space (``random.Random(1)``), each with the policy set to
``--batching`` and ``elastic``, simulated on the workload's first ``--requests`` requests replayed at
``--loads`` × a per-design reference rate (frozen in the cache on the first run: the estimator's capacity
``mu_max_req_s`` at the commit that made the cache — the summed-cycle estimator before issue 15's two-stream
model). Simulations are cached in ``benchmarks/results/stream_model_check/cache_<tag>.json`` (one file per
workload and policy), so a new estimator is re-scored against the same runs in seconds::

    python benchmarks/stream_model_check.py                # re-score every cached workload (no simulation)
    python benchmarks/stream_model_check.py --simulate llchat   # fill a cache (minutes per design)

Prints Spearman ρ and the median estimate/simulation ratio of throughput, TTFT mean and p90, TPOT and goodput
(SLO TTFT ≤ 5 s, TPOT ≤ 50 ms) per load, and writes them to ``benchmarks/results/stream_model_check.md``. The
issue's full benchmark (loads relative to the *simulated* capacity, six workloads, capacity itself) is
``benchmarks/estimator_ranking_dynamic.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, not an installed one
RESULTS = ROOT / "benchmarks" / "results"
CACHE = RESULTS / "stream_model_check"
SPACES = {"llama": "search_spaces/quickstart.yaml", "mamba": "benchmarks/results/dse_space_mamba2-quick.yaml",
          "nemotron": "benchmarks/results/dse_space_nemotron-h-quick.yaml"}
CHAT, ARXIV = "studies/workloads/quickstart-chat.yaml", "benchmarks/results/dse_workload_quickstart-arxiv.yaml"
#: tag: (space, model, workload, batching, designs, requests)
CASES = {
    "llchat": ("llama", "llama-3-8b", CHAT, "continuous", 30, 300),
    "llchatck": ("llama", "llama-3-8b", CHAT, "chunked", 30, 300),
    "llarx": ("llama", "llama-3-8b", ARXIV, "continuous", 25, 120),
    "mamchat": ("mamba", "mamba2-2.7b", CHAT, "continuous", 25, 300),
    "nemchat": ("nemotron", "nemotron-h-4b", CHAT, "continuous", 25, 300),
}
LOADS = (0.5, 0.9, 1.2)
METRICS = ("thr", "ttft", "p90", "tpot", "gp")


def _design_key(d) -> str:
    return json.dumps(d.to_dict(), sort_keys=True, default=str)


def rows_for(tag: str, simulate: bool) -> list[dict]:
    """Estimates against the cached simulations (simulating missing runs when ``simulate``)."""
    from hydra_opt.dse.search_space import load_search_space
    from hydra_opt.evaluate import estimate
    from hydra_opt.evaluate import simulate as run_sim
    from hydra_opt.evaluate.estimator.goodput import estimated_slo
    from hydra_opt.evaluate.simulator.goodput import slo_metrics
    from hydra_opt.evaluate.slo import Slo, scaled_requests
    from hydra_opt.system.design import DesignPoint
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import load_workload

    space, model_name, wl_path, batching, n, nreq = CASES[tag]
    path = CACHE / f"cache_{tag}.json"
    cache = json.loads(path.read_text()) if path.exists() else {}
    model = load_model(model_name)
    base = dataclasses.replace(load_workload(ROOT / wl_path), n_requests=nreq, horizon_s=None).requests(0)
    designs = random.Random(1).sample(list(load_search_space(str(ROOT / SPACES[space])).enumerate()), n)
    slo = Slo(ttft_s=5.0, tpot_s=0.05, attainment=0.9)
    rows = []
    for i, raw in enumerate(designs):
        d = DesignPoint.from_dict({**raw, "batching": batching, "scheduler": "elastic"})
        ent = cache.get(_design_key(d))
        if ent is None:
            if not simulate:
                continue
            mu = estimate(d, model, base).diagnostics.get("mu_max_req_s", 0.0)
            if not (mu and np.isfinite(mu)):
                continue
            ent = cache[_design_key(d)] = {"mu0": mu, "runs": {}}
        for f in LOADS:
            req = scaled_requests(base, round(f * ent["mu0"], 6), name="check")
            if str(f) not in ent["runs"]:
                if not simulate:
                    continue
                s = run_sim(d, model, req)
                sm = slo_metrics(s, slo)
                ent["runs"][str(f)] = dict(rate=round(f * ent["mu0"], 6), thr=s.throughput_tok_s, ttft=s.ttft_mean_s,
                                           p90=s.ttft_p90_s, tpot=s.tpot_mean_s, att=sm["slo_attainment"],
                                           goodput=sm["goodput_tok_s"])
                path.write_text(json.dumps(cache))
            sv = ent["runs"][str(f)]
            e = estimate(d, model, req)
            em = estimated_slo(e, slo)
            rows.append(dict(i=i, f=f, s_thr=sv["thr"], e_thr=e.throughput_tok_s, s_ttft=sv["ttft"],
                             e_ttft=e.ttft_mean_s, s_p90=sv["p90"], e_p90=em["ttft_p90_s"], s_tpot=sv["tpot"],
                             e_tpot=e.tpot_mean_s, s_gp=sv["goodput"], e_gp=em["goodput_tok_s"]))
    return rows


def summary(tag: str, rows: list[dict]) -> list[str]:
    """One markdown row per load: ρ (median est/sim) of each metric."""
    from scipy.stats import spearmanr

    out = []
    for f in LOADS:
        sub = [r for r in rows if r["f"] == f]
        cells = []
        for m in METRICS:
            s = np.array([r["s_" + m] for r in sub], float)
            e = np.array([r["e_" + m] for r in sub], float)
            ok = np.isfinite(s) & np.isfinite(e)
            pos = ok & (s > 0) & (e > 0)
            if ok.sum() < 3 or np.ptp(s[ok]) == 0 or np.ptp(e[ok]) == 0:
                cells.append("–")
                continue
            ratio = float(np.median(e[pos] / s[pos])) if pos.any() else float("nan")
            cells.append(f"{spearmanr(s[ok], e[ok]).statistic:.2f} ({ratio:.2f})")
        out.append(f"| {tag} | {CASES[tag][3]} | {len({r['i'] for r in sub})} | {f} | " + " | ".join(cells) + " |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulate", nargs="*", default=[], metavar="TAG", help="fill these caches (simulates)")
    args = ap.parse_args()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines = [f"# Stream-model check (`benchmarks/stream_model_check.py`)\n",
             f"Commit {commit}; load average {os.getloadavg()[0]:.1f}. Spearman ρ (median estimate/simulation) per "
             "load (× the reference rate frozen in the cache: the pre-issue-15 estimator's capacity).\n",
             "| case | batching | designs | load | throughput | TTFT mean | TTFT p90 | TPOT | goodput |",
             "|---|---|---|---|---|---|---|---|---|"]
    for tag in CASES:
        lines += summary(tag, rows_for(tag, tag in args.simulate))
    text = "\n".join(lines) + "\n"
    (RESULTS / "stream_model_check.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
