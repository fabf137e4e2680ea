"""Parallel map over a frozen snapshot.

Every item of a batch runs its chain (ACE: generate, reflect, regenerate while wrong) against
the *same* artifact snapshot and its rendered text, ``workers`` chains at once;
nothing a chain does is visible to another before the step's single apply. Results are kept by
index, so a step never depends on the order in which requests complete.

Carried chains (our addition, ``MapConfig.sync_rounds``): a chain still retrying after the
step's rounds finishes in the background and its record is curated in the *next* step, so one
unlucky sample does not hold the whole batch. Whether a chain leaves depends only on its content.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import msgspec

from combee_fast.engine.stream import IndexedStream
from combee_fast.engine.timing import finish_times
from combee_fast.protocols.learning import Learner


class Carried(msgspec.Struct, frozen=True):
    """A chain that left its step still retrying. ``offset`` is when its step's part ended, in
    simulated seconds relative to the end of that step (<= 0)."""

    partial: Any
    rest: asyncio.Task[Any]
    offset: float


class SnapshotMap:
    """The map of one step: ``items`` (index ``0..n-1``) then the ``carried`` chains (index
    ``n..``), all against ``artifact`` and its ``text``.

    ``workers`` chains run at once; ``rounds`` retries happen inside the step; with ``carry`` a
    chain that can go on leaves the step (its record is None here) and goes on in the background.
    """

    def __init__(
        self,
        learner: Learner[Any, Any, Any],
        items: Sequence[Any],
        carried: Sequence[Carried],
        artifact: Any,
        text: str,
        *,
        epoch: int,
        workers: int,
        rounds: int,
        carry: bool,
        item_timeout_s: float | None,
    ) -> None:
        self.learner = learner
        self.n = len(items)
        self.carried = tuple(carried)
        self.workers = workers
        self.leaving: dict[int, asyncio.Task[Any]] = {}
        self._artifact = artifact
        self._text = text
        self._epoch = epoch
        self._rounds = rounds
        self._carry = carry
        self._item_timeout_s = item_timeout_s
        self._stream = IndexedStream(items, self._one, concurrency=workers, item_timeout_s=item_timeout_s)

    @property
    def size(self) -> int:
        """Records this step curates: its items and the chains carried into it."""
        return self.n + len(self.carried)

    async def _one(self, index: int, item: Any) -> Any:
        trace = await self.learner.run_item(item, self._artifact, self._text, epoch=self._epoch, rounds=self._rounds)
        if self._carry and (rest := self.learner.continuation(trace, self._artifact, self._text, epoch=self._epoch)):
            self.leaving[index] = asyncio.create_task(asyncio.wait_for(rest, self._item_timeout_s))
        return trace

    async def record(self, index: int) -> Any | None:
        """Record ``index`` for curation as soon as it exists: None when its chain leaves the step."""
        if index < self.n:
            trace = await self._stream.future(index)
            return None if index in self.leaving else self.learner.record(trace)
        carry = self.carried[index - self.n]
        rest = await carry.rest
        return self.learner.record(rest) or self.learner.record(carry.partial)

    async def run(self) -> tuple[list[Any], list[Any]]:
        """Run every item and wait for the carried chains: ``(traces, rests of carried chains)``."""
        traces = await self._stream.run()
        rests = [await carry.rest for carry in self.carried]
        return traces, rests

    def finish_times(self, traces: Sequence[Any], rests: Sequence[Any]) -> list[float]:
        """Critical-path finish time of every record: the worker pool's schedule for the items,
        then each carried chain's remaining time after its previous step ended."""
        return finish_times([t.sim_seconds for t in traces], self.workers) + [
            max(0.0, carry.offset + rest.sim_seconds) for carry, rest in zip(self.carried, rests)
        ]

    def leaving_chains(self, traces: Sequence[Any], finished: Sequence[float], step_seconds: float) -> list[Carried]:
        """The chains that leave this step, to be carried into the next, in index order."""
        return [Carried(traces[i], task, finished[i] - step_seconds) for i, task in sorted(self.leaving.items())]

    def insights(self, traces: Sequence[Any], rests: Sequence[Any]) -> tuple[str, ...]:
        """The lessons curated this step: items that stayed, then the carried chains."""
        records = [self.learner.record(t) for i, t in enumerate(traces) if i not in self.leaving]
        records += [self.learner.record(rest) or self.learner.record(c.partial) for c, rest in zip(self.carried, rests)]
        return tuple(self.learner.insight(record) for record in records if record is not None)

    def cancel(self) -> None:
        """Cancel every background chain (leaving and carried): the step failed."""
        for task in [*self.leaving.values(), *(c.rest for c in self.carried)]:
            task.cancel()
