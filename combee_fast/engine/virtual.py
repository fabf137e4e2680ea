"""Stages in simulated time: a discrete-event schedule of tasks whose durations become known only
once their real work is done.

Every stage has a FIFO queue and an in-flight limit: at most ``limit`` of its tasks hold a slot
at once *in simulated time*. A queued task starts (in simulated time) as soon as its stage has a
free slot, at the clock's current reading, and ends at its start plus its duration. Whoever owns
the tasks runs their real work (possibly earlier, possibly on other limits), then reports each
started task's duration with :meth:`StageSchedule.finish`. :meth:`StageSchedule.next_end` takes
the earliest end in simulated time (ties: the task started first), and only once every started
task's duration is known: no started task can then end before it. What happens next therefore
depends on the durations alone, never on which real work happened to finish first.

The schedule is plain data: stage queues hold the owner's keys, and nothing in it refers to
running work; :meth:`StageSchedule.state` is all of it as a typed :class:`ScheduleState` (what a
checkpoint keeps), :meth:`StageSchedule.restored` builds it back. Pure: no clock, no I/O.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping
from typing import Generic, TypeVar

import msgspec

K = TypeVar("K")


class Started(msgspec.Struct, Generic[K], frozen=True):
    """A task that took a slot of ``stage`` at simulated time ``at``; ``seq`` orders starts."""

    stage: str
    key: K
    at: float
    seq: int


class Ended(msgspec.Struct, Generic[K], frozen=True):
    """A task of ``stage`` that ended at simulated time ``at`` (started as ``seq``)."""

    stage: str
    key: K
    at: float
    seq: int


class ScheduleState(msgspec.Struct, frozen=True):
    """All of a :class:`StageSchedule` whose keys are ``int``: limits, clock, each stage's queue
    and busy slots, the ends not taken yet ``(at, seq, stage, key)``, the next ``seq``, and the
    started tasks whose duration is not known yet ``(stage, key, at, seq)`` (their owner runs
    their work again after a resume and gives the duration then; a state kept before they were
    kept has none)."""

    limits: dict[str, int]
    clock: float
    queues: dict[str, tuple[int, ...]]
    busy: dict[str, int]
    ends: tuple[tuple[float, int, str, int], ...]
    seq: int
    unfinished: tuple[tuple[str, int, float, int], ...] = ()


class StageSchedule(Generic[K]):
    """Stages with FIFO queues and in-flight limits, advanced in simulated time.

    ``limits``: each stage's in-flight limit, in the order stages get their free slots filled.
    """

    def __init__(self, limits: Mapping[str, int]) -> None:
        if any(limit < 1 for limit in limits.values()):
            raise ValueError(f"every stage needs an in-flight limit >= 1, got {dict(limits)}")
        self.limits = dict(limits)
        self.clock = 0.0
        self._queues: dict[str, deque[K]] = {stage: deque() for stage in limits}
        self._busy: dict[str, int] = dict.fromkeys(limits, 0)
        self._unfinished: dict[int, Started[K]] = {}
        self._ends: list[tuple[float, int, str, K]] = []
        self._seq = 0

    def state(self: StageSchedule[int]) -> ScheduleState:
        """The schedule as a :class:`ScheduleState`, its started tasks without a duration among it."""
        unfinished = tuple((task.stage, task.key, task.at, task.seq) for task in self._unfinished.values())
        return ScheduleState(dict(self.limits), self.clock, {stage: tuple(q) for stage, q in self._queues.items()},
                             dict(self._busy), tuple(self._ends), self._seq, unfinished)

    @classmethod
    def restored(cls, state: ScheduleState) -> StageSchedule[int]:
        """The schedule ``state`` was taken of, to go on from."""
        schedule: StageSchedule[int] = cls(state.limits)  # type: ignore[assignment]
        schedule.clock = state.clock
        schedule._queues = {stage: deque(state.queues.get(stage, ())) for stage in state.limits}
        schedule._busy = dict(state.busy)
        schedule._ends = list(state.ends)
        heapq.heapify(schedule._ends)
        schedule._seq = state.seq
        schedule._unfinished = {seq: Started(stage, key, at, seq) for stage, key, at, seq in state.unfinished}
        return schedule

    def enqueue(self, stage: str, key: K) -> None:
        """Queue ``key`` on ``stage``; it starts once a slot of the stage is free."""
        self._queues[stage].append(key)

    def start_ready(self) -> list[Started[K]]:
        """Start, at the clock, every queued task a free slot admits (stages in ``limits`` order,
        each stage's queue first in, first out); the tasks started."""
        started = []
        for stage, queue in self._queues.items():
            while queue and self._busy[stage] < self.limits[stage]:
                task = Started(stage, queue.popleft(), self.clock, self._seq)
                self._seq += 1
                self._busy[stage] += 1
                self._unfinished[task.seq] = task
                started.append(task)
        return started

    def unfinished(self) -> list[Started[K]]:
        """Started tasks whose duration is not known yet, in start order."""
        return list(self._unfinished.values())

    def finish(self, task: Started[K], duration: float) -> None:
        """``task`` takes ``duration`` simulated seconds (>= 0)."""
        if duration < 0:
            raise ValueError(f"a duration cannot be negative, got {duration}")
        del self._unfinished[task.seq]
        heapq.heappush(self._ends, (task.at + duration, task.seq, task.stage, task.key))

    def next_end(self) -> Ended[K] | None:
        """The earliest end in simulated time, its slot freed and the clock moved to it; None when
        nothing is in flight. Every started task's duration must be known first (``RuntimeError``)."""
        if self._unfinished:
            raise RuntimeError(f"{len(self._unfinished)} started task(s) have no duration yet")
        if not self._ends:
            return None
        at, seq, stage, key = heapq.heappop(self._ends)
        self.clock = max(self.clock, at)
        self._busy[stage] -= 1
        return Ended(stage, key, at, seq)

    def busy(self, stage: str) -> int:
        """Tasks of ``stage`` holding a slot."""
        return self._busy[stage]

    def queued(self, stage: str) -> int:
        """Tasks of ``stage`` waiting for a slot."""
        return len(self._queues[stage])

    @property
    def idle(self) -> bool:
        """Nothing queued, nothing in flight."""
        return not any(self._queues.values()) and not any(self._busy.values())
