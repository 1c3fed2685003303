"""Estimator ranking in the dynamic regime (issue 15 item 4): continuous/chunked batching + elastic scheduling
(``--policies continuous-static,chunked-static``: static scheduling), Poisson arrivals at ≈ 50 %, 90 % and 120 % of each design's *simulated* SLO capacity, plus the capacity itself.

Per workload (model × dataset) and policy, ``--n-designs`` designs (default 100) are drawn from a quickstart-sized
space with a fixed seed (a seeded permutation of the space's enumeration, so any prefix is a uniform sample).
Per design:

1. the simulated ``capacity_req_s`` (docs/metrics.md "SLO, goodput and capacity"): the bracketing search of
   ``hydra_opt.evaluate.slo.capacity_search`` with the SLO of ``objectives/capacity_slo.yaml`` (TTFT ≤ 5 s,
   TPOT ≤ 50 ms for 90 %) and cheaper capacity settings (``WINDOW_S`` = 15 s fixed arrival window, 5 % tolerance;
   the objective's are 30 s and 2 %), started at the workload's own rate (not at the estimate, so the cached
   simulations do not depend on the estimator version), at most ``MAX_RUNS`` runs, only descending from a miss;
2. three simulated runs at 0.5, 0.9 and 1.2 × that capacity: the same base stream with its inter-arrival times
   scaled (common random numbers), the requests arriving within the window, served to completion;
3. the estimator on the same three streams and its own capacity search (recomputed on every scoring: cheap).

Every simulation result is appended to an on-disk cache (``benchmarks/results/estimator_ranking_dynamic_sims.jsonl``,
one JSON object per line keyed by design + workload + policy + settings + rate), so the run can be split
(``--shard i/k``), limited (``--limit`` designs per workload × policy, ``--budget-s`` wall seconds) and resumed.
``--estimate-only`` re-scores the current estimator against the cache without simulating.

The keys carry the simulator's revision, not the capacity search's: a cached simulated capacity was searched by
the ``capacity_search`` of its day (geometric midpoints until de69439, lattice midpoints until c903e57, the
coarse grid since), while the estimator's capacity is always searched anew. Where attainment falls with the rate
the three agree within the 5 % tolerance; near a noisy threshold they can differ by more
(``benchmarks/results/capacity_start_invariance*.md``).

Usage::

    nice -n 5 python benchmarks/estimator_ranking_dynamic.py --limit 15 --budget-s 4200   # simulate + score
    python benchmarks/estimator_ranking_dynamic.py --estimate-only                         # re-score the cache

Outputs ``benchmarks/results/estimator_ranking_dynamic_loads.{md,csv}`` (summary) and ``..._designs.csv`` (per
design, estimate and simulation side by side).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]  # this checkout
from estimator_ranking import _spearman_inf, design_key  # noqa: E402  (the static benchmark's helpers)
from report_out import report_name  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CACHE = RESULTS / "estimator_ranking_dynamic_sims.jsonl"
OUT = RESULTS / "estimator_ranking_dynamic_loads"

#: Quickstart-sized spaces (24 slots, 450 designs each), every design feasible for its model.
SPACES = {
    "llama-3-8b": "search_spaces/quickstart.yaml",
    "mamba2-2.7b": "benchmarks/results/dse_space_mamba2-quick.yaml",
    "nemotron-h-4b": "benchmarks/results/dse_space_nemotron-h-quick.yaml",
}
#: Length profiles chat / arXiv (the workloads' own rates, 8 and 1 req/s, are only the search's start).
DATASETS = {"chat": "studies/workloads/quickstart-chat.yaml",
            "arxiv": "benchmarks/results/dse_workload_quickstart-arxiv.yaml"}
POLICIES = {"continuous": {"batching": "continuous", "scheduler": "elastic"},
            "chunked": {"batching": "chunked", "scheduler": "elastic"},
            # The same designs under static task scheduling (Ω only): the scheduler the estimator must separate.
            "continuous-static": {"batching": "continuous", "scheduler": "static"},
            "chunked-static": {"batching": "chunked", "scheduler": "static"}}
LOADS = (0.5, 0.9, 1.2)
#: Simulator revisions that changed cached results, per task scheduler (part of every cache key, so a row is
#: never scored against another simulator): ``|steal2`` — the elastic steal compares the task's finish on the
#: thief with its wait on the victim (stop 29); rows without it ran the queue-length steal.
SIM_REVISION = {"elastic": "|steal2"}
#: What each load run records and the report compares.
LOAD_METRICS = ("throughput_tok_s", "ttft_p90_s", "tpot_mean_s")
#: objectives/capacity_slo.yaml's SLO (read from it); its capacity settings made cheaper (measured: a 30 s window
#: and 2 % tolerance cost a median ~100 CPU s per Mamba-2 chat design, too slow for 12 workloads x policies here):
#: a 15 s window (an overload of up to ttft_s/(0.91 window) = 37 % can pass, against 18 %) and 5 % tolerance.
OBJECTIVE = "objectives/capacity_slo.yaml"
WINDOW_S = 15.0
TOLERANCE = 0.05
#: Base stream: this many requests drawn from the workload's generator (seed 0) — the window is filled at every
#: rate up to ~260 req/s without extending it (``CapacityStream`` extends it beyond; ``window_filled`` records it).
BASE_REQUESTS = 4000
MAX_RUNS = 10
#: Fewest requests in a run's window for its attainment to count (below: capacity 0, "under the floor"); the
#: search only descends from a miss (``band=False``: under continuous/chunked batching attainment falls with rate).
MIN_REQUESTS = 5
#: ``CapacitySettings.min_requests`` of the runs (None: the 15 s window alone, as every cached simulation so far;
#: ``--run-min-requests N`` stretches low-rate windows to N requests, under its own cache keys).
RUN_MIN_REQUESTS = None


def settings() -> dict:
    """The run's settings (part of every cache key: changing one re-simulates, never mixes)."""
    from hydra_opt.evaluate.objectives import load_objectives

    obj = load_objectives(str(ROOT / OBJECTIVE))
    return {"slo": obj.slo.to_dict(), "window_s": WINDOW_S, "tolerance": TOLERANCE,
            "max_runs": MAX_RUNS, "base_requests": BASE_REQUESTS, "seed": 0, "min_requests": MIN_REQUESTS,
            "run_min_requests": RUN_MIN_REQUESTS}


def _tag(s: dict) -> str:
    slo = s["slo"]
    return (f"slo{slo['ttft_s']:g}/{slo['tpot_s']:g}/{slo['attainment']:g}|w{s['window_s']:g}|tol{s['tolerance']:g}"
            f"|r{s['max_runs']}|n{s['base_requests']}|min{s['min_requests']}|seed{s['seed']}"
            + (f"|run{s['run_min_requests']}" if s.get("run_min_requests") else ""))


def sample_designs(model: str, n: int, seed: int = 0) -> list[dict]:
    """``n`` designs of the model's space in a seeded random order (policy fields set later)."""
    from hydra_opt.dse.search_space import load_search_space

    designs = list(load_search_space(str(ROOT / SPACES[model])).enumerate())
    order = np.random.default_rng(seed).permutation(len(designs))
    return [designs[i] for i in order[:n]]


class Cache:
    """Append-only JSON-lines cache of simulation results, keyed by ``key``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[str, dict] = {}
        self.reload()

    def reload(self) -> None:
        """Read what other shards appended since (each line is one complete ``write``)."""
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                if line.strip() and line.endswith("}"):
                    row = json.loads(line)
                    self.rows[row["key"]] = row

    def get(self, key: str) -> dict | None:
        return self.rows.get(key)

    def put(self, row: dict) -> None:
        self.rows[row["key"]] = row
        with self.path.open("a") as fh:
            fh.write(json.dumps(row, sort_keys=True) + "\n")


@dataclasses.dataclass
class Job:
    """One (model, dataset, policy, design) of the benchmark with its loaded inputs."""

    model_name: str
    dataset: str
    policy: str
    index: int
    design: object
    model: object
    workload: object  # the Workload
    stream: object  # its CapacityStream (BASE_REQUESTS requests, seed 0, the window of the settings)
    load_stream: object = None  # the load runs' stream when ``--load-min-requests`` stretches them (else ``stream``)

    def loads(self) -> object:
        """The stream the load runs (and the estimator beside them) replay."""
        return self.stream if self.load_stream is None else self.load_stream

    def key(self, s: dict, what: str) -> str:
        rev = SIM_REVISION.get(self.design.scheduler, "")
        return f"{self.model_name}|{self.dataset}|{self.policy}|{design_key(self.design)}|{_tag(s)}{rev}|{what}"


def _capacity(s: dict, load: bool = False):
    """The capacity settings of the runs (``load``: of the load runs, at least ``load_min_requests`` requests)."""
    from hydra_opt.evaluate.slo import CapacitySettings

    n = s.get("run_min_requests")
    if load and s.get("load_min_requests"):
        n = max(n or 0, s["load_min_requests"])
    return CapacitySettings(tolerance=s["tolerance"], max_runs=s["max_runs"], requests=s["base_requests"],
                            window_s=s["window_s"], min_requests=n)


def _load_stream(wl, seed: int, s: dict):
    """A separate stream for the load runs when they are stretched (None: they replay the capacity's stream)."""
    from hydra_opt.evaluate.slo import CapacityStream

    return CapacityStream(wl, seed, _capacity(s, load=True)) if s.get("load_min_requests") else None


def _stream(job: Job, rate: float, window_s: float):
    assert window_s == job.stream.window_s
    return job.stream.at(rate)


def _window_filled(stream, window_s: float) -> bool:
    a = stream.arrival_s
    return bool(a.size and a[-1] - a[0] >= 0.9 * window_s)


def _sim_run(job: Job, rate: float, s: dict, stream=None) -> dict:
    from hydra_opt.evaluate import Scenario
    from hydra_opt.evaluate.simulator.driver import simulate_design
    from hydra_opt.evaluate.simulator.goodput import slo_metrics
    from hydra_opt.evaluate.slo import Slo

    st = (job.stream if stream is None else stream).at(rate)
    t = time.perf_counter()
    r = simulate_design(job.design, job.model, st, scenario=Scenario())
    g = slo_metrics(r, Slo(**s["slo"]))
    return {"rate_req_s": rate, "n_requests": int(st.arrival_s.size), "window_filled": _window_filled(st, s["window_s"]),
            "throughput_tok_s": r.throughput_tok_s, "ttft_p90_s": _num(r.ttft_p90_s), "tpot_mean_s": _num(r.tpot_mean_s),
            "slo_attainment": _num(g["slo_attainment"]), "wall_s": round(time.perf_counter() - t, 3)}


def _num(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def simulate_job(job: Job, s: dict, cache: Cache) -> float:
    """Simulate what the cache lacks for ``job``; returns the wall seconds spent."""
    t0 = time.perf_counter()
    cap = _capacity_row(job, s, cache, "capacity")
    _load_runs(job, job, s, s, cap["capacity_req_s"], cache, kind="load")
    return time.perf_counter() - t0


def _load_key(job: Job, s: dict, f: float, c: float, suffix: str = "") -> str:
    """Cache key of ``job``'s run at ``f`` × the capacity ``c`` under the settings ``s`` (``suffix``: a variant;
    stretched load runs carry ``|loadN``, the capacity's key never does)."""
    n = s.get("load_min_requests")
    return job.key(s, f"load{f:g}@{c:.6g}{suffix}" + (f"|load{n}" if n else ""))


def _load_runs(job: Job, run: Job, s_key: dict, s: dict, c: float, cache: Cache, scale: float = 1.0,
               suffix: str = "", **tags) -> None:
    """Simulate what the cache lacks of ``run`` (``job`` or a replica of it) at each load × ``c`` (× ``scale``),
    cached under ``s_key``'s keys with ``tags``."""
    for f in LOADS if c > 0 else ():
        lk = _load_key(job, s_key, f, c, suffix)
        if cache.get(lk) is None:
            cache.put({"key": lk, "load": f, **tags, **_ids(job), **_sim_run(run, f * c * scale, s, run.loads())})


def _capacity_row(job: Job, s: dict, cache: Cache, kind: str) -> dict:
    """The simulated capacity search of ``job`` on its stream (cached under ``s``'s key)."""
    from hydra_opt.evaluate.slo import capacity_search

    t0 = time.perf_counter()
    ck = job.key(s, "capacity")
    cap = cache.get(ck)
    if cap is None:
        runs = []

        def attainment(rate: float) -> float:
            if _stream(job, rate, s["window_s"]).arrival_s.size < MIN_REQUESTS:
                return 0.0  # below the measurable floor: not simulated, counts as not attained
            r = _sim_run(job, rate, s)
            runs.append(r)
            return r["slo_attainment"] or 0.0

        res = capacity_search(attainment, job.stream.rate0_req_s, s["slo"]["attainment"],
                              tolerance=s["tolerance"], max_runs=s["max_runs"], band=False,
                              max_rate_req_s=job.stream.max_rate_req_s)
        cap = {"key": ck, "kind": kind, **_ids(job), "capacity_req_s": res.capacity_req_s,
               "bracket_req_s": [res.bracket_req_s[0], res.bracket_req_s[1] if math.isfinite(res.bracket_req_s[1])
                                 else None], "converged": res.converged, "runs": runs,
               "wall_s": round(time.perf_counter() - t0, 2)}
        cache.put(cap)
    return cap


def simulate_replica(job: Job, s: dict, seed: int, cache: Cache, capacity: bool = False) -> float:
    """The three load runs again on an independent base stream (``seed``) at the same rates (fractions of the
    seed-0 capacity): the simulation's own sampling noise, the ceiling any estimator's ranking meets. With
    ``capacity``, the capacity search on that stream too."""
    from hydra_opt.evaluate.slo import CapacityStream

    t0 = time.perf_counter()
    cap = cache.get(job.key(s, "capacity"))
    c = cap["capacity_req_s"] if cap else 0.0
    sr = {**s, "seed": seed}
    rep = dataclasses.replace(job, stream=CapacityStream(job.workload, seed, _capacity(s)),
                              load_stream=_load_stream(job.workload, seed, s))
    if capacity:
        _capacity_row(rep, sr, cache, "replica_capacity")
    _load_runs(job, rep, sr, s, c, cache, kind="replica", seed=seed)
    return time.perf_counter() - t0


def simulate_jitter(job: Job, s: dict, jitter: float, cache: Cache) -> float:
    """The three load runs again on the same stream at rates ``1 + jitter`` times as high (every inter-arrival
    time shrunk by that factor): how far the simulation's ranking moves for a change no design should feel."""
    t0 = time.perf_counter()
    cap = cache.get(job.key(s, "capacity"))
    c = cap["capacity_req_s"] if cap else 0.0
    _load_runs(job, job, s, s, c, cache, 1.0 + jitter, f"|jitter{jitter:g}", kind="jitter", jitter=jitter)
    return time.perf_counter() - t0


def _ids(job: Job) -> dict:
    return {"model": job.model_name, "dataset": job.dataset, "policy": job.policy, "design": design_key(job.design),
            "index": job.index}


def jobs(models: list[str], datasets: list[str], policies: list[str], limit: int, n_designs: int, seed: int,
         s: dict) -> list:
    """Every job, design index first, so a time-limited prefix covers every workload × policy evenly."""
    from hydra_opt.evaluate.slo import CapacityStream
    from hydra_opt.system.design import DesignPoint
    from hydra_opt.workload.models import load_model
    from hydra_opt.workload.workload import load_workload

    per = {}
    for m in models:
        model, designs = load_model(m), sample_designs(m, n_designs, seed)
        for ds in datasets:
            wl = load_workload(str(ROOT / DATASETS[ds]))
            for p in policies:
                # One stream per job: a stream grows in place when a rate needs more requests.
                per[(m, ds, p)] = [Job(m, ds, p, i, DesignPoint.from_dict({**d, **POLICIES[p]}), model, wl,
                                       CapacityStream(wl, s["seed"], _capacity(s)),
                                       _load_stream(wl, s["seed"], s))
                                   for i, d in enumerate(designs[:limit])]
    return [j for i in range(limit) for k in per if i < len(per[k]) for j in (per[k][i],)]


# -- scoring ---------------------------------------------------------------------------------------------------------
def estimate_job(job: Job, s: dict, cache: Cache, replica: int | None = None,
                 jitter: float | None = None) -> dict | None:
    """The estimator's values next to the cached simulation (None when the design is not simulated yet)."""
    from hydra_opt.evaluate import Scenario
    from hydra_opt.evaluate.estimator import estimate
    from hydra_opt.evaluate.estimator.goodput import estimated_capacity, estimated_slo
    from hydra_opt.evaluate.slo import Slo

    cap = cache.get(job.key(s, "capacity"))
    if cap is None:
        return None
    slo = Slo(**s["slo"])
    ec = estimated_capacity(job.design, job.model, job.workload, slo=slo, capacity=_capacity(s))
    row = {**_ids(job), "sim_capacity_req_s": cap["capacity_req_s"], "sim_capacity_converged": cap["converged"],
           "est_capacity_req_s": ec.capacity_req_s}
    rc = cache.get(job.key({**s, "seed": replica}, "capacity")) if replica is not None else None
    if rc is not None:
        row["rep_capacity_req_s"] = rc["capacity_req_s"]
    c = cap["capacity_req_s"]
    for f in LOADS:
        ld = cache.get(_load_key(job, s, f, c)) if c > 0 else None
        if ld is None:
            continue
        st = job.loads().at(f * c)
        e = estimate(job.design, job.model, st, scenario=Scenario())
        es = estimated_slo(e, slo)
        for name, sim_v, est_v in (("throughput_tok_s", ld["throughput_tok_s"], e.throughput_tok_s),
                                   ("ttft_p90_s", ld["ttft_p90_s"], es["ttft_p90_s"]),
                                   ("tpot_mean_s", ld["tpot_mean_s"], e.tpot_mean_s)):
            row[f"sim_{name}@{f:g}"] = sim_v
            row[f"est_{name}@{f:g}"] = _num(est_v)
        rp = cache.get(_load_key(job, {**s, "seed": replica}, f, c)) if replica is not None else None
        jt = cache.get(_load_key(job, s, f, c, f"|jitter{jitter:g}")) if jitter is not None else None
        for w, other in (("rep", rp), ("jit", jt)):
            for name in LOAD_METRICS if other else ():
                row[f"{w}_{name}@{f:g}"] = other[name]
    return row


def _arr(rows: list[dict], key: str, worst: float) -> np.ndarray:
    """Column as floats; a missing value (no first token, no TPOT) is the worst value (ranked last)."""
    return np.array([worst if r.get(key) is None else float(r[key]) for r in rows], dtype=np.float64)


def summarise(rows: list[dict]) -> list[dict]:
    """Spearman ρ, top-1 % recovery and median est/sim ratio per workload × policy × load (and capacity)."""
    out = []
    for k in sorted({(r["model"], r["dataset"], r["policy"]) for r in rows}):
        sub = [r for r in rows if (r["model"], r["dataset"], r["policy"]) == k]
        metrics = [("capacity_req_s", "capacity", True)]
        metrics += [(f"{m}@{f:g}", f"{f:g}", m == "throughput_tok_s") for f in LOADS
                    for m in LOAD_METRICS]
        for col, load, higher in metrics:
            have = [r for r in sub if f"sim_{col}" in r]
            if not have:
                continue
            worst = -math.inf if higher else math.inf
            s, e = _arr(have, f"sim_{col}", worst), _arr(have, f"est_{col}", worst)
            both = np.isfinite(s) & np.isfinite(e) & (s > 0) & (e > 0)
            out.append({"model": k[0], "dataset": k[1], "policy": k[2], "load": load, "metric": col.split("@")[0],
                        "n": len(have), "spearman": _rho(e, s), "top1_recovered": _top1(e, s, higher),
                        "median_est_over_sim": float(np.median(e[both] / s[both])) if both.any() else math.nan,
                        "n_ratio": int(both.sum()), "sim_spread_p90_p10": _spread(s), **_replica(have, col, worst)})
    return out


def _replica(have: list[dict], col: str, worst: float) -> dict:
    """Against an independent replica of the simulation (``--replica-seed``), on the designs that have one:
    ρ(simulation, replica) — the simulation's own rank noise — and the estimator's ρ against each of the two."""
    out = {}
    for w, name in (("rep", "replica"), ("jit", "jitter")):
        rep = [r for r in have if f"{w}_{col}" in r]
        s, p, e = (_arr(rep, f"{x}_{col}", worst) for x in ("sim", w, "est"))
        out.update({f"n_{name}": len(rep), f"spearman_sim_{name}": _rho(p, s),
                    f"spearman_est_sim_{name}_designs": _rho(e, s), f"spearman_est_{name}": _rho(e, p)})
    return out


def _rho(e: np.ndarray, s: np.ndarray) -> float:
    """Spearman ρ (±inf allowed: ranked first/last); NaN for < 3 designs or a constant column."""
    if e.size < 3 or len(set(e.tolist())) < 2 or len(set(s.tolist())) < 2:
        return math.nan
    return _spearman_inf(e, s)


def _top1(e: np.ndarray, s: np.ndarray, higher: bool) -> bool | None:
    """Whether the estimator's top 1 % (at least one design) contains a design with the simulator's best value
    (None: the estimator ties at the cut, so its top 1 % is not defined)."""
    sign = 1.0 if higher else -1.0
    k = max(1, math.ceil(0.01 * e.size))
    order = np.argsort(-sign * e, kind="stable")
    if e.size > k and e[order[k - 1]] == e[order[k]]:
        return None
    return bool(np.any(sign * s[order[:k]] >= np.max(sign * s)))


def _yn(v: bool | None) -> str:
    return "tie" if v is None else ("yes" if v else "no")


def _spread(s: np.ndarray) -> float:
    f = s[np.isfinite(s) & (s > 0)]
    return float(np.percentile(f, 90) / np.percentile(f, 10)) if f.size > 2 else math.nan


def write(rows: list[dict], summary: list[dict], s: dict, command: str, note: str, out: Path = OUT) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    with (out.parent / f"{out.name}_designs.csv").open("w", newline="") as fh:
        keys = sorted({k for r in rows for k in r}, key=lambda k: (k not in ("model", "dataset", "policy", "index",
                                                                               "design"), k))
        w = csv.DictWriter(fh, keys)
        w.writeheader()
        w.writerows(rows)
    fields = ["model", "dataset", "policy", "load", "metric", "n", "spearman", "top1_recovered",
              "median_est_over_sim", "n_ratio", "sim_spread_p90_p10"] + [
              f"{a}{w}{b}" for w in ("replica", "jitter") for a, b in (("n_", ""), ("spearman_sim_", ""),
                                                                      ("spearman_est_sim_", "_designs"),
                                                                      ("spearman_est_", ""))]
    with out.with_suffix(".csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fields)
        w.writeheader()
        w.writerows(summary)
    lines = [
        "# Estimator ranking in the dynamic regime (continuous / chunked batching; policies `-static`: static task scheduling, else elastic; loads around capacity)", "",
        f"Generated by `{command}` at commit {commit}; {note}", "",
        f"Settings: SLO TTFT ≤ {s['slo']['ttft_s']:g} s, TPOT ≤ {s['slo']['tpot_s']:g} s for "
        f"{s['slo']['attainment']:.0%} (objectives/capacity_slo.yaml); {s['window_s']:g} s fixed arrival window per run"
        + (f", stretched to at least {s['run_min_requests']} requests" if s.get("run_min_requests") else "")
        + (f" (the load runs to at least {s['load_min_requests']})" if s.get("load_min_requests") else "") + "; "
        f"capacity search tolerance {s['tolerance']:.0%}, ≤ {s['max_runs']} runs, started at the workload's own rate; "
        f"base stream {s['base_requests']} requests (seed {s['seed']}); loads {', '.join(f'{f:g}' for f in LOADS)} × "
        "the simulated capacity. Spaces: " + ", ".join(f"{m} `{p}`" for m, p in SPACES.items()) + "; workloads: "
        + ", ".join(f"{d} `{p}`" for d, p in DATASETS.items()) + ".", "",
        "`n` = designs with a simulation; `ρ` = Spearman (missing TTFT/TPOT = worst; nan: fewer than 3 designs or a "
        "constant column, e.g. every estimated capacity 0); `top-1 %` = the estimator's top 1 % (≥ 1 design) contains "
        "the simulator's best (`tie`: the estimator ties at the cut); `est/sim` = median ratio over designs where both are "
        "> 0 (`n>0`); `spread` = simulated p90/p10.", "",
        *_pivot(summary), "", *_replica_table(summary),
        "All figures:", "",
        "| model | dataset | policy | load | metric | n | ρ | top-1 % | est/sim | n>0 | spread |",
        "|---|---|---|---|---|---:|---:|---|---:|---:|---:|",
    ]
    for r in summary:
        lines.append(f"| {r['model']} | {r['dataset']} | {r['policy']} | {r['load']} | {r['metric']} | {r['n']} | "
                     f"{r['spearman']:.3f} | {_yn(r['top1_recovered'])} | "
                     f"{r['median_est_over_sim']:.3g} | {r['n_ratio']} | {r['sim_spread_p90_p10']:.3g} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


def _replica_table(summary: list[dict]) -> list[str]:
    """Per load cell with replicas: how far the simulation ranks itself, and the estimator on the same designs."""
    have = [r for r in summary if r["n_replica"] or r["n_jitter"]]
    if not have:
        return []
    out = ["How far the simulation ranks itself. *Seed*: the load runs again on the base stream of another seed "
           "(`--replica-seed`: other prompts, outputs and arrival gaps, the same rates) — how much of a cell's ranking "
           "belongs to the designs rather than to the 15 s sample. *Jitter*: the same stream at rates 1 + j as high "
           "(`--replica-jitter`) — how far the simulator's own event order moves the ranking for a change no design "
           "should feel. `ρ sim/x` = Spearman of the simulation and its replica, `ρ est/sim` = the estimator's on "
           "the same designs (`n`):", "",
           "| model | dataset | policy | load | metric | n seed | ρ sim/seed | ρ est/sim | ρ est/seed | n jitter | "
           "ρ sim/jitter | ρ est/sim |",
           "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in have:
        out.append(f"| {r['model']} | {r['dataset']} | {r['policy']} | {r['load']} | {r['metric']} | "
                   f"{r['n_replica']} | {r['spearman_sim_replica']:.3f} | {r['spearman_est_sim_replica_designs']:.3f} | "
                   f"{r['spearman_est_replica']:.3f} | {r['n_jitter']} | {r['spearman_sim_jitter']:.3f} | "
                   f"{r['spearman_est_sim_jitter_designs']:.3f} |")
    return out + [""]


def _pivot(summary: list[dict]) -> list[str]:
    """Spearman ρ per workload × policy: capacity, then throughput / TTFT p90 / TPOT at each load."""
    cols = [("capacity_req_s", "capacity")] + [(m, f"{f:g}") for m in LOAD_METRICS
                                                for f in LOADS]
    head = ["model", "dataset", "policy", "n", "ρ capacity", *(f"ρ {m.split('_')[0]} @{f}" for m, f in cols[1:]),
            "top-1 % (capacity / TP @0.9)"]
    out = ["Spearman ρ (n = designs; loads as a fraction of the simulated capacity):", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * 3 + "---:|" * (len(head) - 4) + "---|"]
    for k in sorted({(r["model"], r["dataset"], r["policy"]) for r in summary}):
        by = {(r["metric"], r["load"]): r for r in summary if (r["model"], r["dataset"], r["policy"]) == k}
        cells = [f"{by[c]['spearman']:.2f}" if c in by else "–" for c in cols]
        rec = [_yn(by[c]["top1_recovered"]) if c in by else "–"
               for c in (("capacity_req_s", "capacity"), ("throughput_tok_s", "0.9"))]
        n = by.get(("capacity_req_s", "capacity"), {}).get("n", 0)
        out.append(f"| {' | '.join(k)} | {n} | {' | '.join(cells)} | {' / '.join(rec)} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(SPACES))
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--policies", default="continuous,chunked", help="of: " + ", ".join(POLICIES))
    ap.add_argument("--out", default=OUT.name, type=report_name,
                    help=f"report name under {RESULTS.relative_to(ROOT)} (default %(default)s)")
    ap.add_argument("--n-designs", type=int, default=100, help="designs per workload × policy (default 100)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N designs of each sample")
    ap.add_argument("--shard", default="0/1", help="i/k: simulate every k-th job starting at i")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="start no new design after this many CPU seconds of this process")
    ap.add_argument("--budget-wall-s", type=float, default=None, help="... or after this many wall seconds")
    ap.add_argument("--seed", type=int, default=0, help="design-sample seed")
    ap.add_argument("--estimate-only", action="store_true", help="do not simulate: re-score against the cache")
    ap.add_argument("--note", default="", help="text for the report (e.g. the machine load)")
    ap.add_argument("--replica-seed", type=int, default=None,
                    help="simulate (and score) the load runs again on the base stream of this seed, at the same "
                         "rates: the simulation's own rank noise")
    ap.add_argument("--replica-capacity", action="store_true",
                    help="with --replica-seed: also search the capacity on that seed's stream")
    ap.add_argument("--replica-jitter", type=float, default=None,
                    help="simulate (and score) the load runs again on the same stream at rates 1 + J as high")
    ap.add_argument("--run-min-requests", type=int, default=None, metavar="N",
                    help="every run replays at least N requests (low rates stretch the 15 s window; "
                         "CapacitySettings.min_requests); its own cache keys")
    ap.add_argument("--load-min-requests", type=int, default=None, metavar="N",
                    help="the load runs replay at least N requests (the capacity search keeps its runs; "
                         "their own cache keys |loadN): less sampling noise in the load cells")
    args = ap.parse_args(argv)
    for name, given, known in (("--models", args.models, SPACES), ("--datasets", args.datasets, DATASETS),
                               ("--policies", args.policies, POLICIES)):
        bad = [x for x in given.split(",") if x not in known]
        if bad:
            ap.error(f"{name}: unknown {', '.join(bad)} (allowed: {', '.join(known)})")
    if args.n_designs < 1 or (args.limit is not None and args.limit < 1):
        ap.error("--n-designs and --limit: at least 1")
    shard = args.shard.split("/")
    if len(shard) != 2 or not all(x.isdigit() for x in shard) or not int(shard[0]) < int(shard[1]):
        ap.error(f"--shard: i/k with 0 <= i < k, got {args.shard!r}")
    if args.replica_jitter is not None and not (math.isfinite(args.replica_jitter) and args.replica_jitter > -1.0):
        ap.error(f"--replica-jitter: a finite number > -1, got {args.replica_jitter!r}")
    if args.replica_capacity and args.replica_seed is None:
        ap.error("--replica-capacity: needs --replica-seed")
    if args.run_min_requests is not None and not 2 <= args.run_min_requests <= 100_000:
        ap.error(f"--run-min-requests: an integer in [2, 100000], got {args.run_min_requests}")
    if args.load_min_requests is not None and not 2 <= args.load_min_requests <= 100_000:
        ap.error(f"--load-min-requests: an integer in [2, 100000], got {args.load_min_requests}")
    s = {**settings(), "run_min_requests": args.run_min_requests, "load_min_requests": args.load_min_requests}
    limit = min(args.limit or args.n_designs, args.n_designs)
    todo = jobs(args.models.split(","), args.datasets.split(","), args.policies.split(","), limit, args.n_designs,
                args.seed, s)
    cache = Cache(CACHE)
    if not args.estimate_only:
        i, k = (int(x) for x in args.shard.split("/"))
        t0, c0 = time.perf_counter(), time.process_time()
        for n, job in enumerate(todo):
            if n % k != i:
                continue
            if (args.budget_s is not None and time.process_time() - c0 > args.budget_s) or \
                    (args.budget_wall_s is not None and time.perf_counter() - t0 > args.budget_wall_s):
                print(f"budget reached: {time.process_time() - c0:.0f} CPU s, {time.perf_counter() - t0:.0f} wall s",
                      flush=True)
                break
            c1 = time.process_time()
            cache.reload()  # another shard may have simulated it meanwhile
            wall = simulate_job(job, s, cache)
            if args.replica_seed is not None:
                wall += simulate_replica(job, s, args.replica_seed, cache, args.replica_capacity)
            if args.replica_jitter is not None:
                wall += simulate_jitter(job, s, args.replica_jitter, cache)
            cap = cache.get(job.key(s, "capacity"))
            print(f"{job.model_name}:{job.dataset}:{job.policy} #{job.index} {design_key(job.design)} "
                  f"cap {cap['capacity_req_s']:.4g} req/s conv {cap['converged']} runs {len(cap['runs'])} "
                  f"{wall:.1f} s wall {time.process_time() - c1:.1f} s CPU", flush=True)
    rows = [r for r in (estimate_job(j, s, cache, args.replica_seed, args.replica_jitter) for j in todo) if r is not None]
    summary = summarise(rows)
    given = list(argv if argv is not None else sys.argv[1:])
    if "--note" in given:  # the note is printed after the command, not inside it
        del given[given.index("--note"):given.index("--note") + 2]
    cmd = "python benchmarks/estimator_ranking_dynamic.py " + " ".join(given)
    out = RESULTS / args.out
    write(rows, summary, s, cmd.strip(), args.note, out)
    print(out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
