"""A rollout executor backend of its own: :class:`QueueExecutor`.

Episodes wait in one bounded queue and a fixed set of worker tasks (the capacity: ``map.workers``)
take them in the order they were submitted, each running its episode to the end with combee_fast's
episode runtime (the agent, the sandboxed environments, the limits). At close it says on stderr
how many episodes its workers ran. Named ``--executor combee_notes.executor:QueueExecutor`` or,
installed, ``--executor queue``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

from combee_fast.rollouts.chat import AgentChat
from combee_fast.rollouts.episode import Episode, Runtime, run_episode
from combee_fast.rollouts.spec import RolloutSpec, build_runtime
from combee_fast.sandbox.sessions import Sandboxes
from combee_fast.schema import Trajectory

Waiting = tuple[Episode, "asyncio.Future[Trajectory]"]


class QueueExecutor:
    """A :class:`~combee_fast.protocols.RolloutExecutor`: a queue and its workers (module docstring)."""

    def __init__(self, spec: RolloutSpec, chat: AgentChat, *, task: Any = None) -> None:
        self.spec, self.chat, self._task = spec, chat, task
        self._queue: asyncio.Queue[Waiting] = asyncio.Queue(maxsize=spec.capacity)
        self._workers: list[asyncio.Task[None]] = []
        self._runtime: Runtime | None = None
        self._sandboxes: Sandboxes | None = None
        self.ran = 0

    @property
    def capacity(self) -> int:
        return self.spec.capacity

    async def start(self) -> None:
        sandboxes = self._sandboxes = Sandboxes(self.spec.sandbox, step_timeout_s=self.spec.executor.step_timeout_s,
                                                uid_count=self.spec.capacity)
        facts = await self.chat.facts(probe=self.spec.probes_tools)
        self._runtime = build_runtime(self.spec, facts, sandboxes, self._task)
        if self._runtime.pool is not None:
            await sandboxes.check()
        self._workers = [asyncio.create_task(self._work()) for _ in range(self.spec.capacity)]

    async def run(self, episode: Episode) -> Trajectory:
        if self._runtime is None:
            raise RuntimeError("QueueExecutor.run before start")
        done: asyncio.Future[Trajectory] = asyncio.get_running_loop().create_future()
        await self._queue.put((episode, done))
        return await done

    async def _work(self) -> None:
        assert self._runtime is not None
        while True:
            episode, done = await self._queue.get()
            if done.cancelled():  # its caller gave up while it waited
                continue
            try:
                trajectory = await run_episode(self._runtime, episode, self.chat)
            except Exception as exc:  # the episode's caller hears of it; the worker goes on
                if not done.done():
                    done.set_exception(exc)
                continue
            self.ran += 1
            if not done.done():
                done.set_result(trajectory)

    async def close(self) -> None:
        for worker in self._workers:
            worker.cancel()
        for worker in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        self._workers, self._runtime = [], None
        if self._sandboxes is not None:
            await self._sandboxes.close()
        print(f"queue executor: {self.ran} episodes by {self.spec.capacity} workers", file=sys.stderr)
