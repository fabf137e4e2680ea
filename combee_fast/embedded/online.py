"""Online learning inside an agent server: callers submit finished rollouts, the learner batches
them, runs Combee's reflect -> shuffle -> curate -> reduce on each batch (the ``combee`` method on
the online learner of ``config.learner``, :mod:`combee_fast.learners`) and publishes a new
version. Reading :attr:`OnlineLearner.playbook` never blocks: it is a plain attribute holding an
immutable snapshot, swapped in one assignment.

    async with OnlineLearner(agents, Playbook.empty()) as learner:
        ticket = await learner.submit(rollout)   # waits only for queue room (backpressure)
        batch = await ticket                     # optional: the AppliedBatch that took it in

Batches follow the queue: a batch takes what is waiting when the learner is free (up to its
ceiling), and waits for more only ``max_wait_s`` after its first rollout. So rollouts that
trickle in go out in small batches, and a burst fills batches up to the ceiling. The ceiling
starts at ``batch_size`` (the planned bs*) and is lowered when a batch's publish latency (from
when it could start forming to its publish) passes ``max_publish_s``, raised back step by step
when it is well under. Only the last ``keep_batches`` batches are kept in :attr:`OnlineLearner.batches`.

A submitted rollout is checked first (:mod:`combee_fast.embedded.intake`): a malformed one is
refused with :class:`~combee_fast.errors.RolloutError` and never queued. A batch whose step raises
is taken apart: each of its rollouts is run again as a batch of its own, so only a rollout that
fails alone fails its ticket. ``stop`` may be called more than once, and at once from several tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from combee_fast.config import MapConfig, OnlineConfig
from combee_fast.embedded.intake import checked
from combee_fast.errors import ConfigError
from combee_fast.learners import LEARNERS
from combee_fast.methods.combee import Combee
from combee_fast.roles.agents import Agents
from combee_fast.schema import Rollout


class AppliedBatch(msgspec.Struct, frozen=True):
    """One applied batch. ``waiting``: rollouts queued when it closed (after taking its own);
    ``arrival_per_s``: rollouts submitted per second since the previous batch closed; ``ceiling``:
    the batch-size ceiling it was formed under; ``publish_latency_s``: seconds from when it could
    start forming (its first rollout's arrival, or the learner becoming free) to its publish."""

    number: int
    rollout_ids: tuple[str, ...]
    version: int
    report: Any  # what the apply changed (ACE: an ApplyReport)
    waiting: int = 0
    arrival_per_s: float = 0.0
    ceiling: int = 0
    publish_latency_s: float = 0.0


class OnlineLearner:
    """Batches submitted rollouts and applies one Combee update per batch, one batch at a time."""

    def __init__(
        self,
        agents: Agents,
        playbook: Any,
        config: OnlineConfig | None = None,
        *,
        on_publish: Callable[[Any, AppliedBatch], Awaitable[None]] | None = None,
    ) -> None:
        """``playbook``: the version to start from (an artifact of ``config.learner``).
        ``on_publish(playbook, batch)`` is awaited after each new version is published (to save
        it, push it to other workers...); an exception it raises fails that batch's tickets.
        :class:`~combee_fast.errors.ConfigError` when the learner cannot learn online."""
        self.config = config or OnlineConfig()
        self._on_publish = on_publish
        self.playbook = playbook
        self.batches: deque[AppliedBatch] = deque(maxlen=self.config.keep_batches)
        self.ceiling = self.config.batch_size  # lowered when publish latency passes its bound
        kind = LEARNERS.get(self.config.learner)
        if kind is None:
            raise ConfigError(f"online.learner: unknown learner {self.config.learner!r}; choose one of: {', '.join(LEARNERS)}")
        map_config = MapConfig(sync_rounds=None, workers=self.config.workers)  # submitted rollouts: reflected on only
        self._agents = agents
        self._method = Combee(kind.online_learner(agents), map_config, self.config.combee, seed=self.config.seed)
        self._queue: asyncio.Queue[tuple[Rollout, asyncio.Future[AppliedBatch], float]] = asyncio.Queue(
            self.config.queue_size
        )
        self._worker: asyncio.Task[None] | None = None
        self._steps = 0  # batches attempted, applied or not: each gets its own seed path
        self._submitted = 0  # rollouts submitted so far (for the arrival rate)
        self._stopping: asyncio.Future[None] | None = None  # the one stop in progress

    async def __aenter__(self) -> OnlineLearner:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def text(self) -> str:
        """The latest published version, rendered (on the host's loop: this learner is in it)."""
        return self.playbook.render()

    def usage_totals(self) -> dict[tuple[str, str, str], Any]:
        """Usage of the clients this learner calls through (the session's own)."""
        totals: dict[tuple[str, str, str], Any] = {}
        for client in self._agents.clients.distinct():
            totals.update(client.usage_totals())
        return totals

    async def start(self) -> None:
        if self._worker is None:
            self._stopping = None
            self._worker = asyncio.create_task(self._run(), name="combee-online-learner")

    async def stop(self) -> None:
        """Apply what was submitted, then stop the worker (the first call does; the others wait for it)."""
        if self._worker is None:
            return
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop())
        await asyncio.shield(self._stopping)

    async def _stop(self) -> None:
        worker = self._worker
        assert worker is not None
        await self._queue.join()
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
        self._worker = None

    async def submit(self, rollout: Rollout) -> asyncio.Future[AppliedBatch]:
        """Queue ``rollout``; returns a future resolving to the batch that applied it.
        :class:`~combee_fast.errors.RolloutError` (nothing queued) for a malformed rollout."""
        if self._worker is None:
            raise RuntimeError("OnlineLearner is not started: use 'async with' or start()")
        checked(rollout)
        loop = asyncio.get_running_loop()
        ticket: asyncio.Future[AppliedBatch] = loop.create_future()
        await self._queue.put((rollout, ticket, loop.time()))
        self._submitted += 1
        return ticket

    async def _next_batch(self) -> tuple[list[tuple[Rollout, asyncio.Future[AppliedBatch], float]], float]:
        """What waits now, up to the ceiling; more only until ``max_wait_s`` after the first.
        Also returns when the batch could start forming (the learner free, a rollout there)."""
        loop = asyncio.get_running_loop()
        free_at = loop.time()
        batch = [await self._queue.get()]
        opened = max(free_at, batch[0][2])
        while len(batch) < self.ceiling and not self._queue.empty():  # follow the queue: no wait
            batch.append(self._queue.get_nowait())
        deadline = opened + self.config.max_wait_s
        while len(batch) < self.ceiling:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(self._queue.get(), remaining))
            except TimeoutError:
                break
        return batch, opened

    def _adapt_ceiling(self, latency: float) -> None:
        """Keep publish latency under ``max_publish_s``: shrink in proportion when over it, grow
        back one notch (x2, up to ``batch_size``) when under half of it."""
        bound = self.config.max_publish_s
        if latency > bound:
            self.ceiling = max(1, min(self.ceiling - 1, math.floor(self.ceiling * bound / latency)))
        elif latency < bound / 2:
            self.ceiling = min(self.config.batch_size, self.ceiling * 2)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        closed_at, counted = loop.time(), self._submitted
        while True:
            batch, opened = await self._next_batch()
            now = loop.time()
            arrival = (self._submitted - counted) / max(now - closed_at, 1e-9)
            closed_at, counted = now, self._submitted
            try:
                try:
                    await self._apply(batch, opened, arrival)
                except Exception as exc:  # a bug, not a bad endpoint: those are recorded on the records
                    await self._take_apart(batch, exc, opened, arrival)
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def _take_apart(self, batch: list[tuple[Rollout, asyncio.Future[AppliedBatch], float]], exc: Exception,
                          opened: float, arrival: float) -> None:
        """A batch whose step raised ``exc``: each rollout run again alone; only what fails alone fails."""
        if len(batch) == 1:
            _fail(batch, exc)
            return
        for single in batch:
            try:
                await self._apply([single], opened, arrival)
            except Exception as alone:
                _fail([single], alone)

    async def _apply(self, batch: list[tuple[Rollout, asyncio.Future[AppliedBatch], float]], opened: float,
                     arrival: float) -> None:
        """One step over ``batch``, published; its tickets settled unless the step raised."""
        loop = asyncio.get_running_loop()
        number, self._steps = self._steps, self._steps + 1
        ceiling = self.ceiling
        result = await self._method.step([rollout for rollout, _, _ in batch], self.playbook, epoch=0, step=number)
        self.playbook = result.artifact
        latency = loop.time() - opened
        applied = AppliedBatch(
            number, tuple(r.id for r, _, _ in batch), result.artifact.version, result.reports[0],
            waiting=self._queue.qsize(), arrival_per_s=arrival, ceiling=ceiling, publish_latency_s=latency,
        )
        self.batches.append(applied)
        self._adapt_ceiling(latency)
        try:
            if self._on_publish is not None:
                await self._on_publish(result.artifact, applied)
        except Exception as exc:
            _fail(batch, exc)
        for _, ticket, _ in batch:
            if not ticket.done():
                ticket.set_result(applied)


def _fail(batch: list[tuple[Rollout, asyncio.Future[AppliedBatch], float]], exc: BaseException) -> None:
    for _, ticket, _ in batch:
        if not ticket.done():
            ticket.set_exception(exc)
