"""Online learning inside an agent server: callers submit finished rollouts, the learner batches
them, runs Combee's reflect -> shuffle -> curate -> reduce on each batch and publishes a new playbook
version. Reading :attr:`OnlineLearner.playbook` never blocks: it is a plain attribute holding an
immutable snapshot, swapped in one assignment.

    async with OnlineLearner(agents, Playbook.empty()) as learner:
        ticket = await learner.submit(rollout)   # waits only for queue room (backpressure)
        batch = await ticket                     # optional: the AppliedBatch that took it in
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Awaitable, Callable

import msgspec

from combee_fast.ace.learner import AceLearner
from combee_fast.config import HISTORY_KEPT, MapConfig, OnlineConfig
from combee_fast.methods.combee import Combee
from combee_fast.playbook import ApplyReport, Playbook
from combee_fast.roles.agents import Agents
from combee_fast.schema import Rollout


class AppliedBatch(msgspec.Struct, frozen=True):
    number: int
    rollout_ids: tuple[str, ...]
    version: int
    report: ApplyReport


class OnlineLearner:
    """Batches submitted rollouts and applies one Combee update per batch, one batch at a time."""

    def __init__(
        self,
        agents: Agents,
        playbook: Playbook,
        config: OnlineConfig | None = None,
        *,
        on_publish: Callable[[Playbook, AppliedBatch], Awaitable[None]] | None = None,
    ) -> None:
        """``on_publish(playbook, batch)`` is awaited after each new version is published (to
        save it, push it to other workers...); an exception it raises fails that batch's tickets."""
        self.config = config or OnlineConfig()
        self._on_publish = on_publish
        self.playbook = playbook
        self.batches: collections.deque[AppliedBatch] = collections.deque(maxlen=HISTORY_KEPT)  # the latest
        map_config = MapConfig(sync_rounds=None)  # submitted rollouts are reflected on, never regenerated
        self._method = Combee(
            AceLearner(agents, max_rounds=map_config.max_rounds, from_rollouts=True), map_config,
            self.config.combee, workers=self.config.workers, seed=self.config.seed,
        )
        self._queue: asyncio.Queue[tuple[Rollout, asyncio.Future[AppliedBatch]]] = asyncio.Queue(
            self.config.queue_size
        )
        self._worker: asyncio.Task[None] | None = None
        self._steps = 0  # batches attempted, applied or not: each gets its own seed path

    async def __aenter__(self) -> OnlineLearner:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.create_task(self._run(), name="combee-online-learner")

    async def stop(self) -> None:
        """Apply what was submitted, then stop the worker."""
        if self._worker is None:
            return
        await self._queue.join()
        self._worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._worker
        self._worker = None

    async def submit(self, rollout: Rollout) -> asyncio.Future[AppliedBatch]:
        """Queue ``rollout``; returns a future resolving to the batch that applied it."""
        if self._worker is None:
            raise RuntimeError("OnlineLearner is not started: use 'async with' or start()")
        ticket: asyncio.Future[AppliedBatch] = asyncio.get_running_loop().create_future()
        await self._queue.put((rollout, ticket))
        return ticket

    async def _next_batch(self) -> list[tuple[Rollout, asyncio.Future[AppliedBatch]]]:
        batch = [await self._queue.get()]
        deadline = asyncio.get_running_loop().time() + self.config.max_wait_s
        while len(batch) < self.config.batch_size:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(self._queue.get(), remaining))
            except TimeoutError:
                break
        return batch

    async def _run(self) -> None:
        while True:
            batch = await self._next_batch()
            number, self._steps = self._steps, self._steps + 1
            try:
                result = await self._method.step(
                    [rollout for rollout, _ in batch], self.playbook, epoch=0, step=number
                )
            except Exception as exc:  # a bug, not a bad endpoint: those are recorded on the records
                for _, ticket in batch:
                    if not ticket.done():
                        ticket.set_exception(exc)
            else:
                self.playbook = result.playbook
                applied = AppliedBatch(
                    number, tuple(r.id for r, _ in batch), result.playbook.version, result.reports[0]
                )
                self.batches.append(applied)
                try:
                    if self._on_publish is not None:
                        await self._on_publish(result.playbook, applied)
                except Exception as exc:
                    for _, ticket in batch:
                        if not ticket.done():
                            ticket.set_exception(exc)
                for _, ticket in batch:
                    if not ticket.done():
                        ticket.set_result(applied)
            finally:
                for _ in batch:
                    self._queue.task_done()
