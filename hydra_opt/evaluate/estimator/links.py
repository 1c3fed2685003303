"""Decode weight streams sharing mesh links (docs/estimator.md, "Decode pipeline of the dynamic schedulers").

A decode task streams its block's weights from the memory holding them to its chiplet along the XY route
(``hydra_opt.hardware.noi.Mesh``) and through the memory's interface port; the simulator shares every link and
port among the flows crossing it (max-min). One pass alone meets no other flow, but with every decode chiplet busy
their streams meet on the links near the memories: on Llama-3-8B with 7 decode chiplets, 10 HBMs and 256 GB/s
links, 14 one-member batches decode at 5.4 ms per block group and chiplet against 4.2 ms alone.

:func:`stream_sharing` prices that for each decode station: the time of its weight streams when every other
station is streaming too, over their time alone. A station streams one block at a time, so another station's
flow is on a given resource for the share of its streaming time spent on blocks whose route crosses it; a flow
gets the resource's capacity over one plus the other stations' expected flows there (equal sharing of the expected
load), and the slowest resource of its route sets its rate.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["stream_sharing"]


def stream_sharing(owner: Sequence[int], routes: Sequence[Sequence[int]], block_bytes: Sequence[float],
                   caps_bps: Sequence[float]) -> dict[int, float]:
    """All-busy over alone weight-streaming time per decode station (≥ 1).

    Args:
        owner: Station of each block's decode task.
        routes: Resources (link and port ids) each block's stream crosses to its station.
        block_bytes: Weight bytes each block's task streams.
        caps_bps: Capacity of each resource, bytes/s.

    Returns:
        ``{station: factor}`` for every station owning a block with bytes to stream.
    """
    alone: dict[int, list[tuple[Sequence[int], float, float]]] = {}
    for s, res, nbytes in zip(owner, routes, block_bytes):
        if nbytes > 0.0 and res:
            alone.setdefault(int(s), []).append((res, nbytes, nbytes / min(caps_bps[r] for r in res)))
    total = {s: sum(t for _, _, t in flows) for s, flows in alone.items()}  # each station's streaming time alone
    use = [0.0] * len(caps_bps)  # expected flows on each resource, every station streaming
    own: dict[int, dict[int, float]] = {}
    for s, flows in alone.items():
        mine = own[s] = {}
        for res, _, t in flows:
            for r in res:
                mine[r] = mine.get(r, 0.0) + t / total[s]
        for r, p in mine.items():
            use[r] += p
    out = {}
    for s, flows in alone.items():
        mine = own[s]
        busy = sum(nbytes / min(caps_bps[r] / (1.0 + use[r] - mine.get(r, 0.0)) for r in res)
                   for res, nbytes, _ in flows)
        out[s] = busy / total[s]
    return out
