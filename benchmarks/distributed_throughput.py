"""Distributed-study benchmark: finished-trial throughput with 2 workers vs 1 on a CPU-bound objective, and the
storage overhead per trial on each storage.

    python benchmarks/distributed_throughput.py [--cpu-ms 250] [--trials 40] [--storages sqlite,postgresql]

* **Speed-up.** The objective is CPU-bound: every trial is promoted (pruner off) and its "simulation" spins the
  CPU for ``--cpu-ms`` ms of process time (``time.process_time``, so a busy machine stretches wall time, not the
  work). ``python -m hydra_opt.run --workers K`` runs ``--trials`` trials on PostgreSQL; throughput = finished
  trials / wall time between the first trial's start and the last trial's completion (storage timestamps, so
  process start-up is excluded; the end-to-end command time is reported too). Ideal speed-up on 2 free cores: 2x.
* **Overhead per trial.** The same study with a zero-cost objective and one worker: wall time per finished trial,
  ms (everything a trial costs besides the evaluator: sampling, the promotion pruner's reads, ~10 storage writes,
  heartbeat). The load average at the start is recorded, and the CPU time the command tree obtained (``cores
  obtained`` = CPU s / wall s): other processes on the machine inflate both numbers.

Results: ``benchmarks/results/distributed_throughput.csv`` and ``.md``.
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
URLS = {
    "postgresql": "postgresql+psycopg2://postgres@127.0.0.1:5432/test",
    "mariadb": "mysql+pymysql://root@127.0.0.1:3306/test",
    "redis": "redis://127.0.0.1:6379/15",
}


# -- the benchmark's evaluator (imported by the worker processes as distributed_throughput:make) ---------------
class CpuEvaluator:
    """Closed-form estimate; the simulation spins ``HYDRA_OPT_BENCH_CPU_MS`` ms of process CPU time."""

    def __init__(self, spec: Any = None) -> None:
        self.cpu_s = float(os.environ.get("HYDRA_OPT_BENCH_CPU_MS", "0")) / 1000.0

    def design(self, design: dict) -> dict:
        return dict(design)

    def load(self, model: str, workload: str) -> tuple[str, str]:
        return model, workload

    def feasibility(self, design: Any, model: Any) -> list[str]:
        return []

    def _metrics(self, design: dict) -> dict[str, float]:
        n = sum(design["chiplets"].values())
        b = design.get("max_batch", 8)
        return {"throughput_tok_s": 10.0 * n * b ** 0.5 + design["n_mem"], "ttft_mean_s": 1.0 / n + 0.01 * b,
                "tpot_mean_s": 0.01, "area_mm2": 100.0}

    def estimate(self, design: Any, model: Any, workload: Any) -> dict[str, float]:
        return self._metrics(design)

    def simulate(self, design: Any, model: Any, workload: Any, *, seed: int) -> Any:
        from hydra_opt.evaluate.evaluators import SimOutcome

        end = time.process_time() + self.cpu_s
        x = 0
        while time.process_time() < end:
            x += sum(i * i for i in range(2000))
        return SimOutcome(self._metrics(design))


def make(spec: Any) -> CpuEvaluator:
    return CpuEvaluator(spec)


# -- driver --------------------------------------------------------------------------------------------------
STUDY = """kind: study
name: bench
model: llama-3-8b
workload: chat
search_space:
  kind: search_space
  name: wide
  slots: 24
  chiplets: {tscs_p: {min: 1, max: 21}, tscs_d: {min: 1, max: 21}}
  memory: {count: {min: 2, max: 16}}
  d2d_bw_gbps: [256, 384, 512, 640]
  max_batch: [2, 4, 8, 16, 32]
sampler: random
pruner: none
budget: {n_trials: 10}
artifacts: false
evaluator: distributed_throughput:make
seed: 1
"""


def _url(storage: str, tmp: Path) -> str:
    if storage == "sqlite":
        return f"sqlite:///{tmp / f'{uuid.uuid4().hex[:8]}.db'}"
    if storage == "journal":
        return f"journal:///{tmp / f'{uuid.uuid4().hex[:8]}.log'}"
    return URLS[storage]


def run_once(storage: str, workers: int, trials: int, cpu_ms: float, tmp: Path) -> dict[str, Any]:
    import optuna

    from hydra_opt.dse.storages import StorageOptions, make_storage

    url = _url(storage, tmp)
    name = f"bench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    study_file = tmp / "bench.yaml"
    study_file.write_text(STUDY)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), str(HERE), os.environ.get("PYTHONPATH", "")]),
               HYDRA_OPT_BENCH_CPU_MS=str(cpu_ms))
    load1 = os.getloadavg()[0]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "hydra_opt.run", str(study_file), "--storage", url, "--study-name", name,
                          "--workers", str(workers), "--n-trials", str(trials), "--quiet"],
                         env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the launcher and its (waited-for) workers
    cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    if res.returncode != 0:
        raise SystemExit(f"run failed on {storage}: {res.stderr[-2000:]}")
    storage_obj = make_storage(url, StorageOptions(heartbeat_interval_s=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = optuna.load_study(study_name=name, storage=storage_obj)
        done = [t for t in study.get_trials(deepcopy=False) if t.state.is_finished() and t.state.name != "FAIL"]
        span = (max(t.datetime_complete for t in done) - min(t.datetime_start for t in done)).total_seconds()
        if storage not in ("sqlite", "journal"):
            optuna.delete_study(study_name=name, storage=storage_obj)
    return {"storage": storage, "workers": workers, "trials": len(done), "cpu_ms_per_trial": cpu_ms,
            "span_s": round(span, 3), "command_wall_s": round(wall, 3),
            "throughput_trials_per_s": round(len(done) / span, 3), "ms_per_trial": round(1000 * span / len(done), 1),
            "cpu_s_total": round(cpu_s, 2), "cpu_share_cores": round(cpu_s / wall, 2),
            "load_avg_1min": round(load1, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu-ms", type=float, default=250.0, help="CPU time per simulated trial, ms")
    ap.add_argument("--trials", type=int, default=40, help="trials per speed-up run")
    ap.add_argument("--overhead-trials", type=int, default=40, help="trials per overhead run")
    ap.add_argument("--storages", default="sqlite,postgresql", help="storages for the overhead runs "
                    "(sqlite, postgresql, mariadb, journal, redis)")
    ap.add_argument("--repeats", type=int, default=1, help="repeat each speed-up measurement")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="hydra_opt_bench_") as d:
        tmp = Path(d)
        for rep in range(args.repeats):
            for workers in (1, 2):
                r = run_once("postgresql", workers, args.trials, args.cpu_ms, tmp)
                r["kind"] = "speedup"
                rows.append(r)
                print(r, flush=True)
        for storage in [s for s in args.storages.split(",") if s]:
            r = run_once(storage, 1, args.overhead_trials, 0.0, tmp)
            r["kind"] = "overhead"
            rows.append(r)
            print(r, flush=True)
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "distributed_throughput.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["kind", *[k for k in rows[0] if k != "kind"]])
        w.writeheader()
        w.writerows(rows)
    sp = [r for r in rows if r["kind"] == "speedup"]
    one = [r["throughput_trials_per_s"] for r in sp if r["workers"] == 1]
    two = [r["throughput_trials_per_s"] for r in sp if r["workers"] == 2]
    lines = [
        "# Distributed studies: speed-up and storage overhead",
        "",
        f"Command: `python benchmarks/distributed_throughput.py --cpu-ms {args.cpu_ms:g} --trials {args.trials} "
        f"--overhead-trials {args.overhead_trials} --storages {args.storages} --repeats {args.repeats}`; "
        f"{os.cpu_count()} logical CPUs; measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "| kind | storage | workers | trials | CPU/trial [ms] | span [s] | command wall [s] | throughput [trials/s] "
        "| wall/trial [ms] | CPU used [s] | cores obtained | load avg (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['storage']} | {r['workers']} | {r['trials']} | {r['cpu_ms_per_trial']:g} | "
                     f"{r['span_s']} | {r['command_wall_s']} | {r['throughput_trials_per_s']} | {r['ms_per_trial']} | "
                     f"{r['cpu_s_total']} | {r['cpu_share_cores']} | {r['load_avg_1min']} |")
    if one and two:
        lines += ["", f"Speed-up 2 workers vs 1 on PostgreSQL: **{(sum(two) / len(two)) / (sum(one) / len(one)):.2f}x** "
                  "(mean throughput ratio; target >= 1.7x on 2 free cores). \"cores obtained\" = CPU seconds used by "
                  "the command and its workers / its wall time: on a machine shared with other jobs a second worker "
                  "only helps if the scheduler gives the run a second core's worth of time."]
    (RESULTS / "distributed_throughput.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
