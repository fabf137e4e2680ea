"""The online learner in a child process: the host's process keeps none of its work, GIL or GC.

:class:`ProcessLearner` has the API of :class:`~combee_fast.embedded.threaded.ThreadedLearner`
(``start``/``stop``/``async with``, ``submit`` returning a ticket of the host's loop, ``text``,
``artifact``, ``snapshot``, ``batches``, ``usage_totals``, ``context_for``, ``release``,
``approve``/``reject``/``propose``); the child
(:mod:`combee_fast.embedded.process_worker`) runs an unchanged
:class:`~combee_fast.embedded.online.OnlineLearner`, so batches and artifacts are the same as in the
thread or on the host's loop for the same submissions. The two talk over the child's stdin and
stdout in length-prefixed msgpack frames (:data:`HostMessage`, :data:`ChildMessage`), through the
engine's child supervisor (:class:`~combee_fast.engine.child.Child`). An artifact travels as the
bytes of the online learner's codec
(:meth:`~combee_fast.protocols.OnlineLearning.encode_artifact`).

The host's loop does: encode a submitted rollout and write it (``submit``); decode one frame per
applied batch and one per release change (the gate's :class:`~combee_fast.embedded.release.Release`,
the incumbent's bytes and batch) and swap the snapshot in; settle that batch's tickets;
re-emit the child's events into ``events``. ``artifact`` decodes the bytes on the first read
of each version (``text`` and ``context_for`` never decode). Contracts:
- ``submit`` and ``stop`` run on one event loop (the host's); at most ``queue_size + batch_size``
  rollouts are unsettled, ``submit`` waits for room beyond that; ``submit`` checks the rollout on
  the host first (:mod:`~combee_fast.embedded.intake`: a malformed one is
  :class:`~combee_fast.errors.RolloutError` and is never sent), and the child decodes each
  rollout on its own, so a frame it cannot read fails that ticket alone;
- ``calls`` are the session's (``session.calls``), serving every role of the online learner of
  ``config.learner`` (checked at construction, on the host:
  :func:`~combee_fast.embedded.online.online_learning`);
- the child reaches the endpoints with its own clients built from ``calls``' role map
  (:func:`~combee_fast.roles.clients.open_role_clients`: every replica, each role's sampling,
  the form found at start-up; no replay cache; API keys come from the inherited environment);
- the child's task (what scores the online learner's one-step attempts: shadow re-runs; GEPA's
  and TextGrad's learners build their calls on one) is the one ``task`` names, else the host's
  task by name with no options; a task the child cannot build that way is left out unless the
  ``shadow`` policy needs it (an online learner that needs one then refuses to start, saying so);
- every ticket settles: if the child dies, every unsettled ticket, any ``submit`` waiting for
  room and every later one fails with :class:`LearnerProcessError` saying how it ended ("the
  learner's process exited with code ...: <its last error line>"; the child's stderr goes on to
  the host's, its last lines kept); ``stop`` may be called more than once, and at once from
  several tasks; a frame longer than :data:`~combee_fast.engine.frames.MAX_FRAME_BYTES` ends the child;
- ``approve``, ``reject`` and ``propose`` are frames written in order with the submissions;
  the gate's refusal comes back as :class:`~combee_fast.errors.ReleaseError`;
- ``on_publish`` is not offered: the child cannot await a host coroutine;
- while it runs, the young-generation GC threshold of the host's process is
  :class:`~combee_fast.config.EmbedConfig`'s ``gc_threshold0`` (restored at ``stop``); the child
  runs under ``SCHED_IDLE`` (``child_sched_idle``, Linux) or ``child_nice`` steps nicer than the
  host, so a waking host thread gets a busy core first.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import msgspec

from combee_fast import tracing
from combee_fast.config import EmbedConfig, OnlineConfig, TaskConfig
from combee_fast.embedded.events import EmbeddedEvent, Events
from combee_fast.embedded.host_settings import HostSettings
from combee_fast.embedded.intake import checked
from combee_fast.embedded.online import AppliedBatch, online_learning
from combee_fast.embedded.release import Context, Release
from combee_fast.endpoint.client import UsageTotals
from combee_fast.engine.child import Child
from combee_fast.errors import ConfigError, LearnerProcessError, ReleaseError
from combee_fast.protocols.learning import OnlineLearning, Releasable
from combee_fast.roles.calls import RoleCalls
from combee_fast.roles.clients import RoleMap
from combee_fast.schema import Rollout

WORKER = "combee_fast.embedded.process_worker"
"""The child's module (``python -m``)."""


# ----------------------------------------------------------------------------- the wire


class Start(msgspec.Struct, tag="start"):
    """First frame to the child: how to build its role calls and learner."""

    role_map: RoleMap
    online: OnlineConfig
    artifact: bytes  # the starting version, in the online learner's codec
    task: TaskConfig | None = None  # the task that scores the learner's attempts (None: none)
    task_required: bool = False  # a task that cannot be built fails the start (shadow re-runs need it)
    events: bool = False  # forward the learner's events as Emitted frames


class Submit(msgspec.Struct, tag="submit"):
    """Ticket ``seq``'s rollout, encoded on its own (the child decodes it apart from the frame)."""

    seq: int
    rollout: msgspec.Raw


class Stop(msgspec.Struct, tag="stop"):
    pass


class Command(msgspec.Struct, tag="command"):
    """A call on the child's release gate: ``approve``/``reject`` a version, ``propose`` an artifact."""

    seq: int
    name: str
    version: int | None = None
    artifact: bytes | None = None


class Ready(msgspec.Struct, tag="ready"):
    pass


class Applied(msgspec.Struct, tag="applied"):
    """One applied batch."""

    batch: AppliedBatch


class Released(msgspec.Struct, tag="released"):
    """The release changed: which versions serve, the incumbent's bytes and its batch."""

    release: Release
    artifact: bytes
    batch: AppliedBatch | None = None


class Emitted(msgspec.Struct, tag="emitted"):
    """One event of the child's learner, for the host's hub."""

    event: EmbeddedEvent


class Answered(msgspec.Struct, tag="answered"):
    """The outcome of :class:`Command` ``seq``: its result, or the error's type name and text."""

    seq: int
    result: int | None = None
    error_type: str | None = None
    error: str | None = None


class Settled(msgspec.Struct, tag="settled"):
    """Tickets ``seqs`` resolve to ``batch``, or fail with ``error`` (the exception's text)."""

    seqs: tuple[int, ...]
    batch: AppliedBatch | None = None
    error: str | None = None


class Finished(msgspec.Struct, tag="finished"):
    usage: list[tuple[tuple[str, str, str], UsageTotals]]


HostMessage = Start | Submit | Stop | Command
ChildMessage = Ready | Applied | Released | Emitted | Answered | Settled | Finished


# ----------------------------------------------------------------------------- host side


class ProcessSnapshot:
    """One published version (the incumbent) and its release: ``text`` at once, ``artifact``
    decoded (by ``learning``'s codec) on its first read."""

    __slots__ = ("text", "batch", "release", "_data", "_learning", "_artifact")

    def __init__(self, text: str, data: bytes, batch: AppliedBatch | None, release: Release,
                 learning: OnlineLearning[Any, Any, Any], artifact: Releasable | None = None) -> None:
        self.text = text
        self.batch = batch
        self.release = release
        self._data = data
        self._learning = learning
        self._artifact = artifact

    @property
    def artifact(self) -> Releasable:
        if self._artifact is None:
            self._artifact = self._learning.decode_artifact(self._data)
        return self._artifact


def _priority_args(embed: EmbedConfig) -> list[str]:
    """The worker's command-line options for the child's CPU priority."""
    args = ["--sched-idle"] if embed.child_sched_idle else []
    return args + (["--nice", str(embed.child_nice)] if embed.child_nice else [])


class ProcessLearner:
    """An :class:`OnlineLearner` in a child process; see the module doc."""

    def __init__(self, calls: RoleCalls, artifact: Releasable, config: OnlineConfig | None = None, *,
                 embed: EmbedConfig | None = None, events: Events | None = None,
                 task: TaskConfig | None = None) -> None:
        """``artifact``: the version to start from (an artifact of the online learner of
        ``config.learner``); ``task``: what the child scores attempts with (module docstring)."""
        self.config = config or OnlineConfig()
        self.embed = embed or EmbedConfig()
        self._events = events
        self._settings = HostSettings(self.embed, switch_interval=False)  # one busy thread: no GIL to share
        self._learning = online_learning(self.config.learner, calls)  # refused here, on the host; and the codec
        shadow = self.config.release.policy == "shadow"
        if task is None and calls.task is not None:
            task = TaskConfig(name=calls.task.name)
        if task is None and shadow:
            raise ConfigError("online.release.policy 'shadow' in a ProcessLearner needs task=TaskConfig(...): "
                              "the child scores its re-runs")
        self._start = Start(calls.role_map(), self.config, self._learning.encode_artifact(artifact), task,
                            task_required=shadow, events=events is not None)
        text = artifact.render()
        self._snapshot = ProcessSnapshot(text, b"", None, Release(self.config.release.policy,
                                                                  Context(artifact.version, text)),
                                         self._learning, artifact)
        self._answers: dict[int, asyncio.Future[int | None]] = {}
        self._capacity = self.config.queue_size + self.config.batch_size
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(ChildMessage)
        self._child: Child | None = None
        self._reading: asyncio.Task[None] | None = None
        self._tickets: dict[int, asyncio.Future[AppliedBatch]] = {}
        self._room_waiters: list[asyncio.Future[None]] = []
        self._seq = 0
        self._outbox: list[bytes] = []  # messages written once per loop iteration, in one call
        self._usage: dict[tuple[str, str, str], UsageTotals] = {}
        self._ended: str | None = None  # how the child ended, once it did (every later submit says it)
        self._stop_task: asyncio.Future[None] | None = None  # the one stop in progress
        self.batches: deque[AppliedBatch] = deque(maxlen=self.config.keep_batches)  # the latest, bounded

    async def __aenter__(self) -> ProcessLearner:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def snapshot(self) -> ProcessSnapshot:
        """The latest published version (one attribute load)."""
        return self._snapshot

    @property
    def text(self) -> str:
        return self._snapshot.text

    @property
    def artifact(self) -> Releasable:
        """The latest published artifact (decoded on its first read)."""
        return self._snapshot.artifact

    @property
    def release(self) -> Release:
        """Which versions serve requests (the child's latest, copied whole)."""
        return self._snapshot.release

    def context_for(self, key: str) -> Context:
        """The version and text the request keyed ``key`` runs with; answered in the host's process."""
        return self._snapshot.release.context_for(key)

    async def approve(self, version: int) -> None:
        """Promote candidate ``version`` (after the submissions made before this call)."""
        await self._command(Command(0, "approve", version=version))

    async def reject(self, version: int) -> None:
        """Roll candidate ``version`` back (after the submissions made before this call)."""
        await self._command(Command(0, "reject", version=version))

    async def propose(self, artifact: Releasable) -> int:
        """Hand ``artifact`` to the release as the next version; its number."""
        number = await self._command(Command(0, "propose", artifact=self._learning.encode_artifact(artifact)))
        assert number is not None
        return number

    async def _command(self, command: Command) -> int | None:
        self._running()
        loop = asyncio.get_running_loop()
        seq, self._seq = self._seq, self._seq + 1
        answer: asyncio.Future[int | None] = loop.create_future()
        self._answers[seq] = answer
        self._queue(self._encoder.encode(msgspec.structs.replace(command, seq=seq)))
        return await answer

    def usage_totals(self) -> dict[tuple[str, str, str], UsageTotals]:
        """The child's usage totals, as of its stop."""
        return dict(self._usage)

    async def start(self) -> None:
        """Spawn the child and wait until its learner runs (imports take a second or two)."""
        if self._child is not None:
            return
        self._ended, self._stop_task = None, None
        self._settings.apply()
        try:
            await asyncio.wait_for(self._spawn(), self.embed.start_timeout_s)
        except BaseException:
            self._settings.restore()
            raise

    async def _spawn(self) -> None:
        child = await Child.start(WORKER, *_priority_args(self.embed))
        self._child = child
        child.send(self._encoder.encode(self._start))
        try:
            first = await child.receive()
            ready = first is not None and isinstance(self._decoder.decode(first), Ready)
        except (ValueError, asyncio.IncompleteReadError):
            ready = False
        if not ready:
            child.kill()
            self._ended = f"the learner's process {await child.ended()}"
            self._child = None
            raise LearnerProcessError(f"{self._ended} before it was ready")
        self._reading = asyncio.create_task(self._read(child), name="combee-learner-process-reader")

    async def submit(self, rollout: Rollout, *, version: int | None = None) -> asyncio.Future[AppliedBatch]:
        """Queue ``rollout`` (stamped with ``version``, the context version it ran with, when
        given); returns a future resolving to the batch that applied it.
        :class:`~combee_fast.errors.RolloutError` for a malformed rollout (nothing sent);
        :class:`LearnerProcessError` once the child has ended."""
        if version is not None and rollout.version != version:
            rollout = msgspec.structs.replace(rollout, version=version)
        data = msgspec.Raw(checked(tracing.stamp(rollout)))  # the host's trace travels with it, when tracing
        child = self._running()
        loop = asyncio.get_running_loop()
        while len(self._tickets) >= self._capacity:
            waiter = loop.create_future()
            self._room_waiters.append(waiter)
            await waiter
            child = self._running()
        seq, self._seq = self._seq, self._seq + 1
        ticket: asyncio.Future[AppliedBatch] = loop.create_future()
        self._tickets[seq] = ticket
        self._queue(self._encoder.encode(Submit(seq, data)))
        if child.unsent() > 1 << 20:  # the child is behind: wait, bounded
            await child.drain()
        return ticket

    def _queue(self, message: bytes) -> None:
        """``message`` written with the others of this loop iteration (:meth:`_write_out`)."""
        if not self._outbox:
            asyncio.get_running_loop().call_soon(self._write_out)
        self._outbox.append(message)

    def _write_out(self) -> None:
        """Write the frames queued since the last call in one go (one system call, not one each)."""
        messages, self._outbox = self._outbox, []
        if self._child is not None:
            self._child.send(*messages)

    def _running(self) -> Child:
        """The child, while it runs; else why not (:class:`LearnerProcessError` once it ended)."""
        if self._ended is not None:
            raise LearnerProcessError(f"{self._ended}; start a new ProcessLearner")
        child = self._child
        if child is None or self._reading is None:
            raise RuntimeError("ProcessLearner is not started: use 'async with' or start()")
        return child

    async def stop(self) -> None:
        """Apply what was submitted, then let the child exit. The first call stops; calls
        meanwhile wait for it; later ones return at once."""
        child = self._child
        if child is None:
            return
        if self._stop_task is None:
            self._stop_task = asyncio.ensure_future(self._stop(child))
        await asyncio.shield(self._stop_task)

    async def _stop(self, child: Child) -> None:
        try:
            self._write_out()
            child.send(self._encoder.encode(Stop()))
            child.close_input()
            if self._reading is not None:
                await self._reading
            await child.ended()
        finally:
            self._child = self._ended = None  # stopped: a later submit is told to start it
            self._settings.restore()

    async def _read(self, child: Child) -> None:
        broken = ""
        try:
            while (data := await child.receive()) is not None:
                message = self._decoder.decode(data)
                if isinstance(message, Applied):
                    self.batches.append(message.batch)
                elif isinstance(message, Released):
                    self._snapshot = ProcessSnapshot(message.release.incumbent.text, message.artifact, message.batch,
                                                     message.release, self._learning)
                elif isinstance(message, Emitted):
                    if self._events is not None:
                        self._events.emit(message.event)
                elif isinstance(message, Answered):
                    self._answer(message)
                elif isinstance(message, Settled):
                    self._settle(message)
                elif isinstance(message, Finished):
                    self._usage = dict(message.usage)
        except (ValueError, asyncio.IncompleteReadError) as exc:  # msgspec's errors are ValueErrors
            broken = f" (its output was not the learner's protocol: {' '.join(str(exc).split())[:200]})"
            child.kill()
        finally:
            self._ended = f"the learner's process {await child.ended()}"
            if self._tickets or self._answers or broken:
                self._fail_all(LearnerProcessError(f"{self._ended}{broken}, with tickets unsettled"))
            self._wake_submitters()

    def _settle(self, message: Settled) -> None:
        for seq in message.seqs:
            ticket = self._tickets.pop(seq, None)
            if ticket is None or ticket.done():
                continue
            if message.batch is not None:
                ticket.set_result(message.batch)
            else:
                ticket.set_exception(LearnerProcessError(message.error or "the batch failed"))
        self._wake_submitters()

    def _answer(self, message: Answered) -> None:
        answer = self._answers.pop(message.seq, None)
        if answer is None or answer.done():
            return
        if message.error is None:
            answer.set_result(message.result)
        elif message.error_type == ReleaseError.__name__:
            answer.set_exception(ReleaseError(message.error))
        else:
            answer.set_exception(LearnerProcessError(f"{message.error_type}: {message.error}"))

    def _fail_all(self, exc: Exception) -> None:
        futures: list[asyncio.Future[Any]] = [*self._tickets.values(), *self._answers.values()]
        self._tickets, self._answers = {}, {}
        for future in futures:
            if not future.done():
                future.set_exception(exc)
        self._wake_submitters()

    def _wake_submitters(self) -> None:
        waiters, self._room_waiters = self._room_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
