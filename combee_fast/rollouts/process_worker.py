"""A worker of the ``process`` backend: ``python -m combee_fast.rollouts.process_worker``.

Reads :data:`~combee_fast.rollouts.process.ToWorker` frames on stdin (``Start`` first), builds
its runtime (:func:`~combee_fast.rollouts.spec.build_runtime`: agent, environments, sandboxes),
answers ``Ready`` (or ``Refused`` with why), then runs every ``RunEpisode`` as it comes, sending
each model call to the parent (``ChatCall``, answered by ``ChatReply``) and each trajectory back
(``EpisodeDone``): every episode is answered, one that ended in an exception or whose trajectory
cannot be encoded as a failed trajectory (``worker_error``). ``Stop`` (or the end of stdin) cancels what still runs and exits. The frames
use the process's original stdin and stdout (:func:`~combee_fast.engine.child.parent_pipes`);
what the agent prints goes to stderr.
"""

from __future__ import annotations

import asyncio
import itertools
import sys

import msgspec

from combee_fast.endpoint.calls import ChatRequest, ChatResult
from combee_fast.engine.child import parent_pipes
from combee_fast.engine.frames import frame, read_frame
from combee_fast.engine.loop import run
from combee_fast.errors import CombeeError
from combee_fast.rollouts.contained import described
from combee_fast.rollouts.episode import run_episode
from combee_fast.rollouts.process import (ChatCall, ChatReply, EpisodeDone, Ready, Refused, RunEpisode, Start, Stop,
                                         ToWorker, failed_trajectory)
from combee_fast.rollouts.spec import build_runtime
from combee_fast.sandbox.sessions import Sandboxes


class _Worker:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._encoder = msgspec.msgpack.Encoder()
        self._calls: dict[int, asyncio.Future[ChatResult]] = {}
        self._ids = itertools.count()
        self.episodes: set[asyncio.Task[None]] = set()

    def send(self, message: object) -> None:
        self._writer.write(frame(self._encoder.encode(message)))

    async def chat(self, request: ChatRequest) -> ChatResult:
        key = next(self._ids)
        future: asyncio.Future[ChatResult] = asyncio.get_running_loop().create_future()
        self._calls[key] = future
        self.send(ChatCall(key, request))
        try:
            return await future
        finally:
            self._calls.pop(key, None)

    def answered(self, reply: ChatReply) -> None:
        future = self._calls.get(reply.id)
        if future is not None and not future.done():
            future.set_result(reply.result)


async def _serve() -> None:
    reader, writer = await parent_pipes()
    decoder = msgspec.msgpack.Decoder(ToWorker)
    worker = _Worker(writer)
    first = await read_frame(reader)
    if first is None:
        return
    start = decoder.decode(first)
    assert isinstance(start, Start)
    spec = start.spec
    sandboxes = Sandboxes(spec.sandbox, step_timeout_s=spec.executor.step_timeout_s, uid_first=start.uid_first,
                          uid_count=start.capacity)
    try:
        runtime = build_runtime(spec, start.facts, sandboxes)
    except (CombeeError, Exception) as exc:  # the user's agent or environment failed to build: said once
        worker.send(Refused(f"{type(exc).__name__}: {exc}"))
        await writer.drain()
        return
    worker.send(Ready())

    async def one(key: int, message: RunEpisode) -> None:
        try:
            trajectory = await run_episode(runtime, message.episode, worker.chat)
        except asyncio.CancelledError:
            raise  # Stop: the parent fails what is still running
        except BaseException as exc:  # whatever ends an episode here, the parent hears of it
            trajectory = failed_trajectory(message.episode, "worker_error", described(exc))
        try:
            worker.send(EpisodeDone(key, trajectory))
        except Exception as exc:  # a trajectory that cannot be encoded
            failed = failed_trajectory(message.episode, "worker_error", f"its trajectory cannot be sent: {exc}")
            worker.send(EpisodeDone(key, failed))

    while (data := await read_frame(reader)) is not None:
        message = decoder.decode(data)
        if isinstance(message, RunEpisode):
            task = asyncio.create_task(one(message.id, message))
            worker.episodes.add(task)
            task.add_done_callback(worker.episodes.discard)
        elif isinstance(message, ChatReply):
            worker.answered(message)
        elif isinstance(message, Stop):
            break
    for task in list(worker.episodes):
        task.cancel()
    await asyncio.gather(*worker.episodes, return_exceptions=True)
    await sandboxes.close()
    await writer.drain()


if __name__ == "__main__":
    run(_serve())
    sys.exit(0)
