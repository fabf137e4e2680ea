"""The ``process`` backend: episodes in a pool of worker processes.

``executor.processes`` workers (``python -m combee_fast.rollouts.process_worker``) each build the
runtime of the spec themselves (the agent, imported there; the environments, whose commands run
in the worker's sandboxes; the task) and run up to their share of the capacity at once, on their
own interpreter, GIL and garbage. A worker has no endpoint of its own: its agents' model calls
come back to this process as frames and go through the session's generator client
(:class:`~combee_fast.rollouts.chat.AgentChat`), so usage, caps, retries, the replay cache
and the accounting are the engine's. Its environment holds no API key
(:func:`~combee_fast.engine.child_variables.child_variables`).

The wire: length-prefixed msgpack frames on the worker's stdin and stdout (:data:`ToWorker`,
:data:`FromWorker`), through the engine's child supervisor (:class:`~combee_fast.engine.child.Child`:
the worker's stderr goes on to ours, and how it ended, exit code or signal and last error line,
is what its failed episodes say). Each worker's sandboxes run as their own uids under root (a
range of its own). A worker that dies fails the episodes it was running (``worker_died``) and is
started again for the next ones, at most :data:`MAX_RESTARTS` times in a run; an episode a live
worker does not return within its time limit and :data:`RETURN_GRACE_S` is failed (``worker_lost``).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import msgspec

from combee_fast.endpoint.calls import ChatRequest, ChatResult
from combee_fast.engine.child import Child
from combee_fast.engine.child_variables import child_variables
from combee_fast.errors import ConfigError
from combee_fast.protocols.rollouts import EnvironmentTask
from combee_fast.rollouts.chat import AgentChat
from combee_fast.rollouts.episode import ChatFacts, Episode, failed_trajectory
from combee_fast.rollouts.spec import RolloutSpec
from combee_fast.sandbox.sessions import Sandboxes, uid_span
from combee_fast.schema import Trajectory

MAX_RESTARTS = 8
"""Worker restarts allowed in one run (a worker that keeps dying is a broken set-up)."""

START_TIMEOUT_S = 120.0
"""Seconds a worker may take to import and build its runtime."""

RETURN_GRACE_S = 30.0
"""Seconds past an episode's time limit its worker may take to return it before it is given up
on as lost (``worker_lost``; the worker keeps its own limits: this bounds one that does not)."""

STOP_TIMEOUT_S = 10.0
"""Seconds a worker may take to exit after ``Stop`` before it is killed."""

WORKER = "combee_fast.rollouts.process_worker"
"""The workers' module (``python -m``)."""


class Start(msgspec.Struct, tag="start"):
    """First frame to a worker: the spec, the endpoint's facts, its index, capacity and uids."""

    spec: RolloutSpec
    facts: ChatFacts
    index: int
    capacity: int
    uid_first: int


class RunEpisode(msgspec.Struct, tag="run"):
    id: int
    episode: Episode


class ChatReply(msgspec.Struct, tag="reply"):
    id: int
    result: ChatResult


class Stop(msgspec.Struct, tag="stop"):
    pass


class Ready(msgspec.Struct, tag="ready"):
    pass


class Refused(msgspec.Struct, tag="refused"):
    """The worker could not build its runtime (a bad ``--agent`` or ``--env``...): why."""

    message: str


class ChatCall(msgspec.Struct, tag="chat"):
    id: int
    request: ChatRequest


class EpisodeDone(msgspec.Struct, tag="done"):
    id: int
    trajectory: Trajectory


ToWorker = Start | RunEpisode | ChatReply | Stop
FromWorker = Ready | Refused | ChatCall | EpisodeDone


class _Worker:
    """One worker process and the episodes it runs."""

    def __init__(self, index: int, capacity: int) -> None:
        self.index = index
        self.capacity = capacity
        self.child: Child | None = None
        self.running: dict[int, tuple[Episode, asyncio.Future[Trajectory]]] = {}
        self.reader: asyncio.Task[None] | None = None

    @property
    def load(self) -> int:
        return len(self.running)


class ProcessExecutor:
    """A :class:`~combee_fast.protocols.RolloutExecutor` over worker processes (module docstring)."""

    def __init__(self, spec: RolloutSpec, chat: AgentChat, *, task: Any = None) -> None:
        self.spec = spec
        self.chat = chat
        self._task = task
        self._room = asyncio.Semaphore(spec.capacity)
        share = -(-spec.capacity // spec.executor.processes)
        self._workers = [_Worker(index, share) for index in range(spec.executor.processes)]
        self._facts: ChatFacts | None = None
        self._ids = itertools.count()
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(FromWorker)
        self._restarts = 0
        self._calls: set[asyncio.Task[None]] = set()
        self._closing = False

    @property
    def capacity(self) -> int:
        return self.spec.capacity

    async def start(self) -> None:
        self._facts = await self.chat.facts(probe=self.spec.probes_tools)
        if self.spec.agent.env is not None or isinstance(self._task, EnvironmentTask):
            await Sandboxes(self.spec.sandbox, step_timeout_s=self.spec.executor.step_timeout_s, uid_count=1).check()
        try:
            for worker in self._workers:
                await self._spawn(worker)
        except BaseException:
            await self.close()
            raise

    async def _spawn(self, worker: _Worker) -> None:
        assert self._facts is not None
        child = await Child.start(WORKER, env=child_variables())
        worker.child = child
        uid_first = self.spec.sandbox.uid_base + worker.index * uid_span(worker.capacity, self.spec.sandbox)
        self._send(worker, Start(self.spec, self._facts, worker.index, worker.capacity, uid_first))
        try:
            first = await asyncio.wait_for(child.receive(), START_TIMEOUT_S)
        except (TimeoutError, ValueError, asyncio.IncompleteReadError):
            first = None
        message = self._decoder.decode(first) if first else None
        if not isinstance(message, Ready):
            child.kill()
            ended = await child.ended()
            why = message.message if isinstance(message, Refused) else f"it {ended} before it was ready"
            raise ConfigError(f"executor process: worker {worker.index} did not start: {why}")
        worker.reader = asyncio.create_task(self._read(worker, child))

    def _send(self, worker: _Worker, message: object) -> None:
        if worker.child is not None:
            worker.child.send(self._encoder.encode(message))

    async def _read(self, worker: _Worker, child: Child) -> None:
        try:
            while (data := await child.receive()) is not None:
                message = self._decoder.decode(data)
                if isinstance(message, ChatCall):
                    call = asyncio.create_task(self._answer(worker, message))
                    self._calls.add(call)
                    call.add_done_callback(self._calls.discard)
                elif isinstance(message, EpisodeDone):
                    entry = worker.running.pop(message.id, None)
                    if entry is not None and not entry[1].done():
                        entry[1].set_result(message.trajectory)
        except (asyncio.IncompleteReadError, ValueError, ConnectionError):  # msgspec's errors are ValueErrors
            child.kill()
        self._lost(worker, f"worker {worker.index} {await child.ended()}")

    def _lost(self, worker: _Worker, why: str) -> None:
        """Fail what ``worker`` was running; it is started again for the next episode."""
        worker.child = None
        running, worker.running = worker.running, {}
        for episode, future in running.values():
            if not future.done():
                future.set_result(failed_trajectory(episode, "worker_died", why))

    async def _answer(self, worker: _Worker, call: ChatCall) -> None:
        result = await self.chat(call.request)
        self._send(worker, ChatReply(call.id, result))

    async def run(self, episode: Episode) -> Trajectory:
        async with self._room:
            worker = min(self._workers, key=lambda w: (w.child is None, w.load))
            if worker.child is None:
                if self._closing or self._restarts >= MAX_RESTARTS:
                    return failed_trajectory(episode, "worker_died", "no worker process is left to run it")
                self._restarts += 1
                await self._spawn(worker)
            future: asyncio.Future[Trajectory] = asyncio.get_running_loop().create_future()
            key = next(self._ids)
            worker.running[key] = (episode, future)
            self._send(worker, RunEpisode(key, episode))
            limit = self.spec.executor.episode_timeout_s + RETURN_GRACE_S
            try:
                return await asyncio.wait_for(asyncio.shield(future), limit)
            except TimeoutError:
                worker.running.pop(key, None)
                return failed_trajectory(episode, "worker_lost",
                                         f"worker {worker.index} did not return it within {limit:g} s")

    async def close(self) -> None:
        self._closing = True
        for worker in self._workers:
            self._send(worker, Stop())
        for worker in self._workers:
            if worker.child is not None:
                await worker.child.stop(STOP_TIMEOUT_S)
            if worker.reader is not None:
                await worker.reader
        for call in list(self._calls):
            call.cancel()
