"""The ``local`` backend: episodes on the engine's event loop, environment work off it.

At most ``capacity`` episodes run at once (a semaphore; the environments' pool has the same
bound). Agents' model calls are the engine's own calls; an environment's work is what it awaits
(the terminal task's commands are child processes, its final state is parsed in a thread), so
the loop only coordinates.
"""

from __future__ import annotations

import asyncio

from combee_fast.rollouts.chat import AgentChat
from combee_fast.rollouts.episode import Episode, Runtime, failed_trajectory, run_episode
from combee_fast.rollouts.spec import RolloutSpec, build_runtime
from combee_fast.sandbox.sessions import Sandboxes
from combee_fast.schema import Trajectory


class LocalExecutor:
    """A :class:`~combee_fast.protocols.RolloutExecutor` on the caller's loop (module docstring)."""

    def __init__(self, spec: RolloutSpec, chat: AgentChat, *, task: object = None) -> None:
        self.spec = spec
        self.chat = chat
        self._task = task
        self._room = asyncio.Semaphore(spec.capacity)
        self._runtime: Runtime | None = None
        self._sandboxes: Sandboxes | None = None
        self._closed = False

    @property
    def capacity(self) -> int:
        return self.spec.capacity

    async def start(self) -> None:
        sandboxes = self._sandboxes = Sandboxes(self.spec.sandbox, step_timeout_s=self.spec.executor.step_timeout_s,
                                                uid_count=self.spec.capacity)
        facts = await self.chat.facts(probe=self.spec.probes_tools)
        self._runtime = build_runtime(self.spec, facts, sandboxes, self._task)  # type: ignore[arg-type]
        if self._runtime.pool is not None:
            await sandboxes.check()

    async def run(self, episode: Episode) -> Trajectory:
        """The episode's trajectory; after :meth:`close` (the run stopping with episodes still
        asked for), a failed one (``cancelled``) at once."""
        if self._closed:
            return failed_trajectory(episode, "cancelled", "the run stopped before the episode ran")
        if self._runtime is None:
            raise RuntimeError("LocalExecutor.run before start")
        async with self._room:
            runtime = self._runtime
            if runtime is None:
                return failed_trajectory(episode, "cancelled", "the run stopped before the episode ran")
            return await run_episode(runtime, episode, self.chat)

    async def close(self) -> None:
        self._closed = True
        self._runtime = None
        if self._sandboxes is not None:
            await self._sandboxes.close()
