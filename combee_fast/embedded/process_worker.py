"""The child side of :class:`~combee_fast.embedded.process.ProcessLearner`: ``python -m combee_fast.embedded.process_worker``.

Reads :data:`~combee_fast.embedded.process.HostMessage` frames on stdin (``Start`` first, then
``Submit`` and ``Command``... and ``Stop``), runs an :class:`~combee_fast.embedded.online.OnlineLearner`
on its own clients, and writes ``Ready``, then ``Applied``/``Settled`` per batch, ``Released`` per
release change, ``Emitted`` per event (when asked), ``Answered`` per command, and ``Finished`` on
stdout (the engine's worker pipes, :func:`~combee_fast.engine.child.parent_pipes`). Artifacts
are read and written with the online learner's codec. The task named in ``Start`` is built when
it can be; it must be when ``Start.task_required``. Submissions and commands reach the learner in
the order they were written; tickets
settled in the same loop iteration travel in one ``Settled`` frame. Each submitted rollout is
decoded apart from its frame: one that does not decode settles its own ticket with the error,
nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sys
from typing import Any

import msgspec

from combee_fast.embedded.events import EmbeddedEvent, Events
from combee_fast.embedded.online import AppliedBatch, OnlineLearner, online_learning
from combee_fast.embedded.release import Release
from combee_fast.engine.child import parent_pipes
from combee_fast.engine.loop import run
from combee_fast.errors import ConfigError
from combee_fast.protocols.tasks import Task
from combee_fast.roles.calls import RoleCalls
from combee_fast.roles.clients import open_role_clients
from combee_fast.tasks.registry import get_task
from combee_fast.schema import Rollout
from combee_fast.embedded.process import (
    Answered,
    Applied,
    Command,
    Emitted,
    Finished,
    HostMessage,
    Ready,
    Released,
    Settled,
    Start,
    Stop,
    Submit,
)
from combee_fast.engine.frames import frame, read_frame


def start_task(start: Start) -> Task | None:
    """The task ``start`` names, built; None when it names none, or names one that cannot be
    built by name and options alone while none is required (a :class:`ConfigError` when it is)."""
    if start.task is None:
        return None
    try:
        return get_task(start.task.name, **start.task.options)
    except ConfigError:
        if start.task_required:
            raise
        return None


class _Worker:
    def __init__(self, start: Start, writer: asyncio.StreamWriter) -> None:
        self.role_map = start.role_map
        self.online = start.online
        self.start = start
        self.learner: OnlineLearner | None = None
        self._writer = writer
        self._encoder = msgspec.msgpack.Encoder()
        self._settled: list[tuple[int, asyncio.Future[AppliedBatch]]] = []
        self._flush_scheduled = False

    def send(self, message: object) -> None:
        self._writer.write(frame(self._encoder.encode(message)))

    async def published(self, artifact: Any, batch: AppliedBatch) -> None:
        self.send(Applied(batch))

    def released(self, release: Release) -> None:
        learner = self.learner
        assert learner is not None
        incumbent = learner.gate.incumbent
        self.send(Released(release, learner.learning.encode_artifact(incumbent.artifact), incumbent.batch))

    def emitted(self, event: EmbeddedEvent) -> None:
        self.send(Emitted(event))

    def answer(self, learner: OnlineLearner, command: Command) -> None:
        """Run ``command`` on the gate and write its outcome."""
        try:
            argument = (learner.learning.decode_artifact(command.artifact) if command.artifact is not None
                        else command.version)
            result = getattr(learner.gate, command.name)(argument)
        except Exception as exc:
            self.send(Answered(command.seq, error_type=type(exc).__name__, error=str(exc)))
        else:
            self.send(Answered(command.seq, result=result))

    def on_settled(self, seq: int, inner: asyncio.Future[AppliedBatch]) -> None:
        self._settled.append((seq, inner))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """One ``Settled`` frame per outcome among the tickets settled this iteration."""
        self._flush_scheduled = False
        settled, self._settled = self._settled, []
        groups: dict[int, tuple[AppliedBatch | None, str | None, list[int]]] = {}
        for seq, inner in settled:
            if inner.cancelled():
                key, batch, error = -1, None, "cancelled"
            elif (exc := inner.exception()) is not None:
                key, batch, error = -2 - id(exc), None, f"{type(exc).__name__}: {exc}"
            else:
                batch, error = inner.result(), None
                key = batch.number
            groups.setdefault(key, (batch, error, []))[2].append(seq)
        for batch, error, seqs in groups.values():
            self.send(Settled(tuple(seqs), batch, error))

    async def serve(self, reader: asyncio.StreamReader) -> None:
        decoder = msgspec.msgpack.Decoder(HostMessage)
        rollouts = msgspec.msgpack.Decoder(Rollout)
        async with contextlib.AsyncExitStack() as stack:
            clients = await open_role_clients(self.role_map, stack)
            calls = RoleCalls.on(self.role_map, start_task(self.start), clients)
            events = Events(self.emitted) if self.start.events else None
            start = online_learning(self.online.learner, calls).decode_artifact(self.start.artifact)
            learner = OnlineLearner(calls, start, self.online,
                                    on_publish=self.published, events=events, on_release=self.released)
            self.learner = learner
            async with learner:
                self.send(Ready())
                while (data := await read_frame(reader)) is not None:
                    message = decoder.decode(data)
                    if isinstance(message, Submit):
                        try:
                            rollout = rollouts.decode(message.rollout)
                            inner = await learner.submit(rollout)
                        except ValueError as exc:  # msgspec's errors and RolloutError alike
                            self.send(Settled((message.seq,), error=f"{type(exc).__name__}: {exc}"))
                            continue
                        inner.add_done_callback(functools.partial(self.on_settled, message.seq))
                    elif isinstance(message, Command):
                        self.answer(learner, message)
                    elif isinstance(message, Stop):
                        break
            if self._settled:
                self.flush()
            usage = [(key, totals) for client in clients.distinct() for key, totals in client.usage_totals().items()]
            self.send(Finished(usage))
        await self._writer.drain()


async def main() -> int:
    reader, writer = await parent_pipes()
    data = await read_frame(reader)
    if data is None:
        return 1
    start = msgspec.msgpack.decode(data, type=HostMessage)
    if not isinstance(start, Start):
        print("process_worker: the first frame must be Start", file=sys.stderr)
        return 2
    await _Worker(start, writer).serve(reader)
    writer.close()
    return 0


def lower_priority(argv: list[str]) -> None:
    """Apply ``--sched-idle`` (every thread under ``SCHED_IDLE``, where the OS has it; otherwise
    ``--nice N`` applies) and ``--nice N`` (added to this thread's niceness): the host runs first."""
    if "--sched-idle" in argv and hasattr(os, "SCHED_IDLE"):
        idle = os.sched_param(0)
        for tid in os.listdir("/proc/self/task"):  # the policy is per thread; threads started later inherit it
            with contextlib.suppress(ProcessLookupError):
                os.sched_setscheduler(int(tid), os.SCHED_IDLE, idle)
        return
    if "--nice" in argv and hasattr(os, "nice"):
        os.nice(int(argv[argv.index("--nice") + 1]))


if __name__ == "__main__":
    lower_priority(sys.argv[1:])
    sys.exit(run(main()))
