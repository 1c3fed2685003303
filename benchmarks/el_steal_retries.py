"""How much of the elastic steal's work a memo of refused steals could skip (issue 18 item 1; docs/simulator.md
"Compiled hot loop").

Runs the speed benchmark's simulation (``sim_policy_speed``: Fig. 10 CHAT M_T CP design, Nemotron-H-4B,
``hydra-chat``, paper preset) with the pure-Python engine and wraps ``Engine._el_steal``/``_el_gain`` to count, per
cost-aware steal (one with a chiplet holding ``spread`` tasks):

* the outcome: a task stolen, nothing eligible (no cost check), or every eligible victim refused by the check;
* **whole-steal memo**: calls whose thief's previous steal found nothing and the state it read — every queue (by
  task identity), load, running task and per-resource flow count — is unchanged since (only the clock moved; the
  refusal is monotone in it: the victim's remaining time only shrinks). The most any stamp-based memo of "this
  idle chiplet found nothing" can skip;
* **pair memo**: refused cost checks whose (thief, victim) pair was refused last time with the victim's queue,
  load and running task, the task, its place and the flow counts on every route to the victim or the thief
  unchanged: the most a per-(thief, victim) memo of refusals can skip (the scan still runs);
* **victim side**: cost checks whose victim-side terms (the task's time on the victim, the wait there) an earlier
  check computed at the same instant and state (another thief tried the same task).

``violations`` counts calls a memo would have skipped but whose fresh answer differed (must be 0: the memo is
safe). Tasks are kept alive so identities are not reused;
a task is named by its identity, blocks, previous chiplet and start (a record moves on from block to block).

    python benchmarks/el_steal_retries.py [--seconds 30] [--batching static continuous chunked]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from pathlib import Path

os.environ["HYDRA_OPT_PURE_PYTHON"] = "1"  # the wrapped methods must be the Python ones
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import sim_policy_speed as sps  # noqa: E402


def measure(seconds: float, batching: str) -> dict:
    from hydra_opt.evaluate import simulate
    from hydra_opt.evaluate.simulator import engine as E

    c = collections.Counter()
    alive = {}
    last_none = {}  # thief -> state at its last steal that found nothing
    last_ref = {}  # (thief, victim) -> victim-side state at its last refusal
    seen = {}  # (victim, task, j) -> full state of the last check of it
    routes = {}
    cur = {}
    steal0, gain0 = E.Engine._el_steal, E.Engine._el_gain

    def ids(xs):  # a task record moves on to its next block (and start): identity alone does not name it
        for t in xs:
            if t is not None:
                alive[id(t)] = t
        return tuple(None if t is None else (id(t), id(t.vals), t.block, t.end, t.prev_chip, t.start) for t in xs)

    def state(eng):
        return (tuple(ids(q) for q in eng.queues), tuple(eng.load), ids(eng.run_task), tuple(eng.flows.rcnt))

    def route(eng, ch):
        if ch not in routes:
            routes[ch] = sorted({r for b in range(eng.nb) for r in eng.bc_path[b][ch][0]})
        return routes[ch]

    def steal(eng, idle):
        if eng.el_over == 0 or not eng.el_cost:
            return steal0(eng, idle)
        c["steals"] += 1
        s = state(eng)
        skip = last_none.get(idle) == s
        cur["gains"] = 0
        task = steal0(eng, idle)
        c["stolen" if task is not None else ("refused" if cur["gains"] else "nothing eligible")] += 1
        c["whole-steal memo"] += skip
        c["violations"] += skip and task is not None
        last_none[idle] = s if task is None else None
        return task

    def gain(eng, task, idle, victim, j):
        cur["gains"] += 1
        c["cost checks"] += 1
        rc = eng.flows.rcnt
        vs = (ids(eng.queues[victim]), eng.load[victim], ids([eng.run_task[victim], task]), j,
              tuple(rc[r] for r in route(eng, victim)), tuple(rc[r] for r in route(eng, idle)))
        full = (eng.now, state(eng))
        key = (victim, ids([task]), j)
        c["victim side"] += seen.get(key) == full
        seen[key] = full
        ok = gain0(eng, task, idle, victim, j)
        skip = last_ref.get((idle, victim)) == vs
        c["pair memo"] += skip
        c["violations"] += skip and ok
        c["cost checks refused"] += not ok
        last_ref[(idle, victim)] = None if ok else vs
        return ok

    E.Engine._el_steal, E.Engine._el_gain = steal, gain
    try:
        r = simulate(model="nemotron-h-4b", workload="hydra-chat", **sps._run(seconds, batching, "elastic"))
    finally:
        E.Engine._el_steal, E.Engine._el_gain = steal0, gain0
    c["events"] = r.events
    return dict(c)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--batching", nargs="+", default=["static", "continuous", "chunked"])
    args = ap.parse_args(argv)
    cols = ("events", "steals", "stolen", "nothing eligible", "refused", "whole-steal memo", "cost checks",
            "cost checks refused", "pair memo", "victim side", "violations")
    print("| batching+elastic | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for bat in args.batching:
        got = measure(args.seconds, bat)
        print(f"| {bat} | " + " | ".join(f"{got.get(k, 0):,}" for k in cols) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
