"""Runtime task schedulers (HYDRA §IV-C): which compute chiplet runs a ready (batch, block, phase) task.

Schedulers are small strategy objects over plain state (:class:`ChipletView`): chiplet positions, their current
load (queued tasks + 1 if busy, kept up to date by the simulator) and which chiplets can run which (family, phase).
Two hooks:

* :meth:`TaskScheduler.choose` — called when a task becomes ready; returns the chiplet whose FIFO it joins.
* :meth:`TaskScheduler.steal` — called when a chiplet goes idle with an empty queue; may return a queued task of
  another chiplet to move to it (work-stealing, elastic).

Tasks are opaque to the schedulers except for three attributes: ``family``, ``phase`` and ``mem_xy`` (the grid
position of the memory holding the block's weights/KV).

Policies:

* ``static`` — always the initial spatial-pipeline mapping Ω (Eqs. 4–5).
* ``fcfs`` — first come first served over compatible chiplets in round-robin order.
* ``worksteal`` — round-robin dispatch; an idle chiplet steals the newest queued task of the most loaded
  compatible chiplet (distance ignored).
* ``elastic`` — keep Ω while the load spread among compatible chiplets is mild; otherwise send the task to the
  compatible chiplet minimising ``load + distance_weight · hops`` to the task's memory (queue length traded
  against distance); idle chiplets pull waiting work from overloaded ones, nearest memory first, when the task
  would finish sooner on the thief than where it waits (its data's route and sharing priced). ``lend=True`` adds cross-phase lending: a chiplet of the same family built for the
  other phase may take the task when it is clearly less loaded than every native one (its own speed for that
  phase is priced by the cost model).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hydra_opt.system.policies import SCHEDULERS

__all__ = [
    "ChipletView",
    "TaskScheduler",
    "StaticScheduler",
    "FcfsScheduler",
    "WorkStealingScheduler",
    "ElasticScheduler",
    "SCHEDULERS",
    "make_scheduler",
    "manhattan",
]


def manhattan(a: tuple[int, int], b: tuple[int, int]) -> int:
    """Grid distance (hops on an XY mesh) between two ``(x, y)`` positions."""
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


@dataclass
class ChipletView:
    """Plain runtime state the schedulers read.

    Attributes:
        xy: Grid position of every compute chiplet.
        native: ``(family, phase) -> chiplets built for it`` (falls back to the family's chiplets of any phase,
            then to all chiplets, when none is built for it).
        family_any: ``family -> chiplets that can run the family in some phase`` (lending candidates).
        load: Per chiplet: queued tasks + 1 if busy (maintained by the simulator).
        queues: Per chiplet: FIFO of waiting tasks (maintained by the simulator).
        task_s: ``(task, chiplet, extra_flows) -> expected seconds`` of a task on a chiplet, its data sharing its
            route with the flows there now plus ``extra_flows`` (set by the simulator; None: stealing ignores
            what a move costs).
        rest_s: ``chiplet -> expected seconds`` left of the task it runs (0 when idle; set with ``task_s``).
    """

    xy: list[tuple[int, int]]
    native: dict[tuple[str, str], list[int]]
    family_any: dict[str, list[int]]
    load: list[int] = field(default_factory=list)
    queues: list[deque] = field(default_factory=list)
    task_s: Callable[[Any, int, int], float] | None = None
    rest_s: Callable[[int], float] | None = None

    def __post_init__(self) -> None:
        n = len(self.xy)
        if not self.load:
            self.load = [0] * n
        if not self.queues:
            self.queues = [deque() for _ in range(n)]
        # What each chiplet may run natively (for stealing): set of (family, phase).
        self.serves: list[set[tuple[str, str]]] = [set() for _ in range(n)]
        for key, chips in self.native.items():
            for c in chips:
                self.serves[c].add(key)

    def candidates(self, family: str, phase: str) -> list[int]:
        """Chiplets that may run a (family, phase) task natively."""
        return self.native[(family, phase)]


class TaskScheduler:
    """Base class: subclasses implement :meth:`choose`; :meth:`steal` defaults to never stealing."""

    name = "base"

    def choose(self, task: Any, block: int, view: ChipletView) -> int:  # pragma: no cover - interface
        """The chiplet whose queue ``task`` (of model block ``block``) joins."""
        raise NotImplementedError

    def steal(self, idle: int, view: ChipletView) -> tuple[int, Any] | None:
        """A ``(victim chiplet, task)`` to move to the idle chiplet ``idle``, or None."""
        return None


class StaticScheduler(TaskScheduler):
    """Always the initial mapping Ω.

    Args:
        omega: ``(phase, block) -> chiplet``.
    """

    name = "static"

    def __init__(self, omega: Mapping[tuple[str, int], int]) -> None:
        self.omega = dict(omega)

    def choose(self, task: Any, block: int, view: ChipletView) -> int:
        return self.omega[(task.phase, block)]


class FcfsScheduler(TaskScheduler):
    """First come first served: compatible chiplets in round-robin order (one cursor per (family, phase))."""

    name = "fcfs"

    def __init__(self) -> None:
        self._cursor: dict[tuple[str, str], int] = {}

    def choose(self, task: Any, block: int, view: ChipletView) -> int:
        key = (task.family, task.phase)
        cands = view.native[key]
        i = self._cursor.get(key, 0)
        self._cursor[key] = (i + 1) % len(cands)
        return cands[i % len(cands)]


class WorkStealingScheduler(FcfsScheduler):
    """Round-robin dispatch; idle chiplets steal the newest waiting task of the most loaded compatible chiplet."""

    name = "worksteal"

    def steal(self, idle: int, view: ChipletView) -> tuple[int, Any] | None:
        best: tuple[int, int] | None = None
        for victim, q in enumerate(view.queues):
            if victim == idle or not q:
                continue
            task = q[-1]
            if (task.family, task.phase) not in view.serves[idle]:
                continue
            if best is None or view.load[victim] > best[0]:
                best = (view.load[victim], victim)
        if best is None:
            return None
        return best[1], view.queues[best[1]][-1]


class ElasticScheduler(TaskScheduler):
    """HYDRA's elastic scheduler: Ω while balanced, least-loaded nearby chiplet under imbalance (§IV-C).

    Args:
        omega: ``(phase, block) -> chiplet`` preferred assignment.
        spread: Imbalance threshold: Ω is kept while ``load[Ω] − min(load) < spread`` over the candidates.
        lend: Cross-phase lending (decode chiplets may run prefill tasks of their family and vice versa).
        lend_margin: A borrowed chiplet is used only if its load is at least this much below every native one.
        distance_weight: Under imbalance the task goes to the candidate minimising
            ``load + distance_weight · hops`` to the task's memory (queue length traded against distance: by
            default 4 hops weigh as much as one queued task); ties by load, then index.
        cost_aware: An idle chiplet steals a task only if it would finish there sooner (its time with its data
            sharing the thief's route, ``ChipletView.task_s``) than where it waits (the victim's running task's
            rest, the tasks queued before it and its own time there): compute-bound prefill moves, a
            bandwidth-bound decode whose weights stream no faster to the thief stays. False: queue length alone.
    """

    name = "elastic"

    def __init__(
        self,
        omega: Mapping[tuple[str, int], int],
        *,
        spread: int = 2,
        lend: bool = False,
        lend_margin: int = 2,
        distance_weight: float = 0.25,
        cost_aware: bool = True,
    ) -> None:
        self.omega = dict(omega)
        self.spread = int(spread)
        self.lend = bool(lend)
        self.lend_margin = int(lend_margin)
        self.distance_weight = float(distance_weight)
        self.cost_aware = bool(cost_aware)

    def _pool(self, family: str, phase: str, view: ChipletView) -> tuple[list[int], list[int]]:
        native = view.native[(family, phase)]
        if not self.lend:
            return native, []
        nat = set(native)
        return native, [c for c in view.family_any.get(family, ()) if c not in nat]

    def choose(self, task: Any, block: int, view: ChipletView) -> int:
        pref = self.omega[(task.phase, block)]
        native, lent = self._pool(task.family, task.phase, view)
        load = view.load
        lmin = min(load[c] for c in native)
        if load[pref] - lmin < self.spread and not (lent and self._lend_ok(lent, lmin, view)):
            return pref
        mxy = task.mem_xy
        w = self.distance_weight

        def score(c: int) -> tuple[float, int, int]:
            return (load[c] + w * manhattan(view.xy[c], mxy), load[c], c)

        best = min(native, key=score)
        if lent and self._lend_ok(lent, lmin, view):
            alt = min(lent, key=score)
            if load[alt] + self.lend_margin <= load[best]:
                return alt
        return best

    def _lend_ok(self, lent: Sequence[int], native_min: int, view: ChipletView) -> bool:
        return min(view.load[c] for c in lent) + self.lend_margin <= native_min

    def steal(self, idle: int, view: ChipletView) -> tuple[int, Any] | None:
        serves = view.serves[idle]
        xy = view.xy[idle]
        best: tuple[tuple[int, int, int], int, Any] | None = None
        for victim, q in enumerate(view.queues):
            if victim == idle or len(q) < self.spread - 1 or view.load[victim] < self.spread:
                continue
            for pos in range(len(q) - 1, -1, -1):  # newest first: it would wait longest where it is
                task = q[pos]
                key = (task.family, task.phase)
                native = key in serves
                if not native and not (self.lend and task.family in {f for f, _ in serves}):
                    continue
                if not native and view.load[victim] < self.spread + self.lend_margin:
                    continue
                if not self._gains(task, pos, idle, victim, view):
                    break
                score = (-view.load[victim], manhattan(xy, task.mem_xy), victim)
                if best is None or score < best[0]:
                    best = (score, victim, task)
                break
        if best is None:
            return None
        return best[1], best[2]

    def _gains(self, task: Any, pos: int, idle: int, victim: int, view: ChipletView) -> bool:
        """Whether ``task``, at place ``pos`` of ``victim``'s queue, finishes sooner on ``idle`` than where it is.

        Measured (docs/simulator.md *Task schedulers*): stealing by queue length alone moved bandwidth-bound decode
        tasks onto chiplets whose weights stream over longer, shared routes (TPOT up to 2.7x static).
        """
        if not self.cost_aware or view.task_s is None or view.rest_s is None:
            return True
        q = view.queues[victim]
        wait = view.rest_s(victim)
        for i in range(pos):
            wait += view.task_s(q[i], victim, 0)
        return view.task_s(task, idle, 1) < wait + view.task_s(task, victim, 0)


#: Scheduler names accepted by :func:`make_scheduler`.


def make_scheduler(
    name: str, omega: Mapping[tuple[str, int], int], *, lend: bool = False, spread: int = 2
) -> TaskScheduler:
    """Build a scheduler by name (``static``, ``fcfs``, ``worksteal``, ``elastic``)."""
    if name == "static":
        return StaticScheduler(omega)
    if name == "fcfs":
        return FcfsScheduler()
    if name == "worksteal":
        return WorkStealingScheduler()
    if name == "elastic":
        return ElasticScheduler(omega, lend=lend, spread=spread)
    raise ValueError(f"unknown scheduler {name!r}; allowed: {', '.join(SCHEDULERS)}")
