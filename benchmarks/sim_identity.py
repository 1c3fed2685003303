"""Bit-identity check of the simulator across code versions (docs/simulator.md "Compiled hot loop").

Runs a fixed set of simulations that exercises every engine path — the 12 Fig. 10 CP/RR designs of three datasets ×
static/continuous/chunked batching × the four schedulers, lending, equal/max-min/no sharing, block fusion, time
bins, debug mode, preemption with restart, the clean preset and random designs of three models — and writes, per
run, ``SimResult.to_dict()`` without ``wall_s`` and a SHA-256 of every array of ``raw`` (floats as their bytes).

    python benchmarks/sim_identity.py --out /tmp/before.json                  # record
    python benchmarks/sim_identity.py --compare /tmp/before.json              # compare (exit 1 on a difference)
    HYDRA_OPT_PURE_PYTHON=1 python benchmarks/sim_identity.py --compare ...   # the pure-Python sources
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's hydra_opt, not an installed one
DESIGNS = ROOT / "studies/designs"


def _digest(raw) -> dict:
    out = {}
    for k, v in vars(raw).items():
        if k == "wall_s":
            continue
        if isinstance(v, tuple):
            v = [np.asarray(x) for x in v]
            out[k] = hashlib.sha256(b"".join(np.ascontiguousarray(x).tobytes() for x in v)).hexdigest()[:16]
        elif isinstance(v, np.ndarray):
            out[k] = hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()[:16]
        elif isinstance(v, float):
            out[k] = v.hex()
        else:
            out[k] = repr(v)
    return out


def cases(quick: bool):
    """``(name, simulate keywords)`` of every run."""
    from hydra_opt.evaluate import Scenario, SimOptions
    from hydra_opt.system.design import load_design

    sec = 1.5 if quick else 3.0
    paper = Scenario.paper(horizon_s=sec, n_requests=400)
    datasets = ("chat",) if quick else ("chat", "arxiv", "lw")
    for ds in datasets:
        for kind in ("mt", "bstar"):
            for pl in ("cp", "rr"):
                d0 = load_design(DESIGNS / f"fig10-nemotron-h-4b-{ds}-{kind}-{pl}.yaml")
                for bat in ("static", "continuous", "chunked"):
                    for sch in ("static", "fcfs", "worksteal", "elastic"):
                        if quick and (pl, kind) != ("cp", "mt"):
                            continue
                        d = d0.with_overrides({"batching": bat, "scheduler": sch})
                        yield (f"{ds}-{kind}-{pl}/{bat}/{sch}",
                               dict(design=d, model="nemotron-h-4b", scenario=paper,
                                    workload={"lw": "hydra-longwriter"}.get(ds, f"hydra-{ds}")))
    d = load_design(DESIGNS / "fig10-nemotron-h-4b-chat-mt-cp.yaml")
    variants = [
        ("lend", {"scheduler": "elastic"}, paper.with_(lend=True), {}),
        ("lend-cont", {"scheduler": "elastic", "batching": "continuous"}, paper.with_(lend=True), {}),
        ("equal", {"scheduler": "elastic"}, paper, {"sharing": "equal"}),
        ("maxmin", {"scheduler": "elastic", "batching": "continuous"}, paper.with_(horizon_s=1.0),
         {"sharing": "maxmin"}),
        ("none", {"batching": "continuous"}, paper, {"sharing": "none"}),
        ("fuse", {}, paper, {"fuse_blocks": True}),
        ("fuse-elastic", {"scheduler": "elastic"}, paper, {"fuse_blocks": True}),
        ("bins", {"batching": "continuous"}, paper, {"link_bins_s": 0.05}),
        ("debug", {"batching": "continuous", "scheduler": "elastic"}, paper.with_(horizon_s=1.0), {"debug": True}),
        ("preempt", {"batching": "continuous", "max_batch": 64}, paper.with_(preempt_restart=True, token_budget=512),
         {}),
        ("chunked-small", {"batching": "chunked", "scheduler": "elastic"}, paper.with_(token_budget=256), {}),
        ("clean", {"batching": "continuous", "scheduler": "worksteal"}, Scenario(horizon_s=sec, n_requests=300), {}),
        ("artifact-map", {}, paper, {"mapping": "artifact"}),
        ("no-horizon", {"scheduler": "elastic"}, Scenario(n_requests=150), {}),  # runs until the last delivery
        ("no-horizon-cont", {"batching": "continuous", "scheduler": "elastic"}, Scenario(n_requests=150), {}),
    ]
    for name, over, scn, opt in variants:
        yield name, dict(design=d.with_overrides(over), model="nemotron-h-4b", workload="hydra-chat", scenario=scn,
                         options=SimOptions(**opt))
    if quick:
        return
    sys.path.insert(0, str(ROOT / "tests"))
    from test_sim_invariants import MODELS, random_design  # the invariant tests' design generator

    from hydra_opt.system.feasibility import feasibility
    from hydra_opt.workload.models import load_model

    for i in range(12):
        rng = np.random.default_rng(2000 + i)
        model = load_model(MODELS[i % len(MODELS)])
        for _ in range(50):
            rd = random_design(rng, model)
            if feasibility(rd, model):
                break
        scn = Scenario(n_requests=60, arrival_interval_s=0.02, horizon_s=3.0, token_budget=2048)
        yield f"random-{i}", dict(design=rd, model=model, workload="chat", scenario=scn)


def run_all(quick: bool) -> dict:
    from hydra_opt.evaluate import simulate
    from hydra_opt.evaluate.simulator import compiled_modules

    out = {}
    for name, kw in cases(quick):
        r = simulate(**kw)
        d = {k: v for k, v in r.to_dict().items() if k != "wall_s"}
        out[name] = {"result": json.loads(json.dumps(d, default=str)), "raw": _digest(r.raw)}
    print(f"{len(out)} runs, compiled modules {compiled_modules()}", file=sys.stderr)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--compare")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    got = run_all(args.quick)
    if args.out:
        Path(args.out).write_text(json.dumps(got, indent=0, sort_keys=True))
    if args.compare:
        ref = json.loads(Path(args.compare).read_text())
        bad = [k for k in ref if k in got and got[k] != ref[k]]
        missing = [k for k in ref if k not in got]
        for k in bad[:20]:
            diff = {f: (ref[k][part][f], got[k][part].get(f)) for part in ("result", "raw") for f in ref[k][part]
                    if ref[k][part][f] != got[k][part].get(f)}
            print(f"DIFF {k}: {list(diff.items())[:4]}")
        print(f"{len(got)} runs compared to {len(ref)}: {len(bad)} differ, {len(missing)} missing")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
