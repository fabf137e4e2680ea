"""The online learner in a child process: the host's process keeps none of its work, GIL or GC.

:class:`ProcessLearner` has the API of :class:`~combee_fast.embedded.threaded.ThreadedLearner`
(``start``/``stop``/``async with``, ``submit`` returning a ticket of the host's loop, ``text``,
``playbook``, ``snapshot``, ``batches``, ``usage_totals``, ``context_for``, ``release``,
``approve``/``reject``/``propose``); the child
(:mod:`combee_fast.embedded.process_worker`) runs an unchanged
:class:`~combee_fast.embedded.online.OnlineLearner`, so batches and playbooks are the same as in the
thread or on the host's loop for the same submissions. The two talk over the child's stdin and
stdout in length-prefixed msgpack frames (:data:`HostMessage`, :data:`ChildMessage`).

The host's loop does: encode a submitted rollout and write it (``submit``); decode one frame per
applied batch and one per release change (the gate's :class:`~combee_fast.embedded.release.Release`,
the incumbent's file bytes and batch) and swap the snapshot in; settle that batch's tickets;
re-emit the child's events into ``events``. ``playbook`` decodes the file bytes on the first read
of each version (``text`` and ``context_for`` never decode). Contracts:
- ``submit`` and ``stop`` run on one event loop (the host's); at most ``queue_size + batch_size``
  rollouts are unsettled, ``submit`` waits for room beyond that; ``submit`` checks the rollout on
  the host first (:mod:`~combee_fast.embedded.intake`: a malformed one is
  :class:`~combee_fast.errors.RolloutError` and is never sent), and the child decodes each
  rollout on its own, so a frame it cannot read fails that ticket alone;
- the child reaches the endpoints with its own clients built from ``calls``' role map
  (:func:`~combee_fast.roles.clients.open_role_clients`: every replica, each role's sampling,
  the form found at start-up; no replay cache; API keys come from the inherited environment);
  reflection, curation and reduction never score, so the child has no task;
- every ticket settles: if the child dies, every unsettled ticket, any ``submit`` waiting for
  room and every later one fails with :class:`LearnerProcessError` saying how it ended ("the
  learner's process exited with code ...: <its last error line>"; the child's stderr goes on to
  the host's, its last lines kept); ``stop`` may be called more than once, and at once from
  several tasks; a frame longer than :data:`~combee_fast.engine.frames.MAX_FRAME_BYTES` ends the child;
- ``approve``, ``reject`` and ``propose`` are frames written in order with the submissions;
  the gate's refusal comes back as :class:`~combee_fast.errors.ReleaseError`;
- under the ``shadow`` policy the child scores its re-runs with the task ``task`` names
  (default: the host's task by name, with no options);
- ``on_publish`` is not offered: the child cannot await a host coroutine;
- while it runs, the young-generation GC threshold of the host's process is
  :class:`~combee_fast.config.EmbedConfig`'s ``gc_threshold0`` (restored at ``stop``); the child
  runs under ``SCHED_IDLE`` (``child_sched_idle``, Linux) or ``child_nice`` steps nicer than the
  host, so a waking host thread gets a busy core first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
import sys

import msgspec

from combee_fast.config import EmbedConfig, OnlineConfig, TaskConfig
from combee_fast.embedded.host_settings import HostSettings
from combee_fast.embedded.intake import checked
from combee_fast.embedded.online import AppliedBatch
from combee_fast.embedded.release import Context, Release
from combee_fast.endpoint.client import UsageTotals
from combee_fast.engine.frames import frame, read_frame
from combee_fast.errors import ConfigError, LearnerProcessError, ReleaseError
from combee_fast.playbook import Playbook
from combee_fast.roles.calls import RoleCalls
from combee_fast.roles.clients import RoleMap
from combee_fast.run.events import Event, Events
from combee_fast.schema import Rollout

_STDERR_KEPT = 4096  # last characters of the child's stderr kept to say why it ended


# ----------------------------------------------------------------------------- the wire


class Start(msgspec.Struct, tag="start"):
    """First frame to the child: how to build its role calls and learner."""

    role_map: RoleMap
    online: OnlineConfig
    playbook: bytes
    task: TaskConfig | None = None  # the task that scores shadow re-runs (None: none needed)
    events: bool = False  # forward the learner's events as Emitted frames


class Submit(msgspec.Struct, tag="submit"):
    """Ticket ``seq``'s rollout, encoded on its own (the child decodes it apart from the frame)."""

    seq: int
    rollout: msgspec.Raw


class Stop(msgspec.Struct, tag="stop"):
    pass


class Command(msgspec.Struct, tag="command"):
    """A call on the child's release gate: ``approve``/``reject`` a version, ``propose`` a playbook."""

    seq: int
    name: str
    version: int | None = None
    playbook: bytes | None = None


class Ready(msgspec.Struct, tag="ready"):
    pass


class Applied(msgspec.Struct, tag="applied"):
    """One applied batch."""

    batch: AppliedBatch


class Released(msgspec.Struct, tag="released"):
    """The release changed: which versions serve, the incumbent's file bytes and its batch."""

    release: Release
    playbook: bytes
    batch: AppliedBatch | None = None


class Emitted(msgspec.Struct, tag="emitted"):
    """One event of the child's learner, for the host's hub."""

    event: Event


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
    """One published version (the incumbent) and its release: ``text`` at once, ``playbook``
    decoded on its first read."""

    __slots__ = ("text", "batch", "release", "_data", "_playbook")

    def __init__(self, text: str, data: bytes, batch: AppliedBatch | None, release: Release,
                 playbook: Playbook | None = None) -> None:
        self.text = text
        self.batch = batch
        self.release = release
        self._data = data
        self._playbook = playbook

    @property
    def playbook(self) -> Playbook:
        if self._playbook is None:
            self._playbook = Playbook.from_bytes(self._data)
        return self._playbook


def _priority_args(embed: EmbedConfig) -> list[str]:
    """The worker's command-line options for the child's CPU priority."""
    args = ["--sched-idle"] if embed.child_sched_idle else []
    return args + (["--nice", str(embed.child_nice)] if embed.child_nice else [])


class ProcessLearner:
    """An :class:`OnlineLearner` in a child process; see the module doc."""

    def __init__(self, calls: RoleCalls, playbook: Playbook, config: OnlineConfig | None = None, *,
                 embed: EmbedConfig | None = None, events: Events | None = None,
                 task: TaskConfig | None = None) -> None:
        self.config = config or OnlineConfig()
        self.embed = embed or EmbedConfig()
        self._events = events
        self._settings = HostSettings(self.embed, switch_interval=False)  # one busy thread: no GIL to share
        if task is None and self.config.release.policy == "shadow":
            if calls.task is None:
                raise ConfigError("online.release.policy 'shadow' in a ProcessLearner needs task=TaskConfig(...): "
                                  "the child scores its re-runs")
            task = TaskConfig(name=calls.task.name)
        self._start = Start(calls.role_map(), self.config, playbook.to_bytes(),
                            task if self.config.release.policy == "shadow" else None, events is not None)
        text = playbook.render()
        self._snapshot = ProcessSnapshot(text, b"", None, Release(self.config.release.policy,
                                                                  Context(playbook.version, text)), playbook)
        self._answers: dict[int, asyncio.Future[int | None]] = {}
        self._capacity = self.config.queue_size + self.config.batch_size
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(ChildMessage)  # type: ignore[arg-type]
        self._process: asyncio.subprocess.Process | None = None
        self._reading: asyncio.Task[None] | None = None
        self._tickets: dict[int, asyncio.Future[AppliedBatch]] = {}
        self._room_waiters: list[asyncio.Future[None]] = []
        self._seq = 0
        self._outbox: list[bytes] = []  # frames written once per loop iteration, in one call
        self._usage: dict[tuple[str, str, str], UsageTotals] = {}
        self._ended: str | None = None  # how the child ended, once it did (every later submit says it)
        self._stderr = ""  # the end of its stderr
        self._relaying: asyncio.Task[None] | None = None
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
    def playbook(self) -> Playbook:
        return self._snapshot.playbook

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

    async def propose(self, playbook: Playbook) -> int:
        """Hand ``playbook`` to the release as the next version; its number."""
        number = await self._command(Command(0, "propose", playbook=playbook.to_bytes()))
        assert number is not None
        return number

    async def _command(self, command: Command) -> int | None:
        self._running()
        loop = asyncio.get_running_loop()
        seq, self._seq = self._seq, self._seq + 1
        answer: asyncio.Future[int | None] = loop.create_future()
        self._answers[seq] = answer
        if not self._outbox:
            loop.call_soon(self._write_out)
        self._outbox.append(frame(self._encoder.encode(msgspec.structs.replace(command, seq=seq))))
        return await answer

    def usage_totals(self) -> dict[tuple[str, str, str], UsageTotals]:
        """The child's usage totals, as of its stop."""
        return dict(self._usage)

    async def start(self) -> None:
        """Spawn the child and wait until its learner runs (imports take a second or two)."""
        if self._process is not None:
            return
        self._ended, self._stop_task = None, None
        self._settings.apply()
        try:
            await asyncio.wait_for(self._spawn(), self.embed.start_timeout_s)
        except BaseException:
            self._settings.restore()
            raise

    async def _spawn(self) -> None:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "combee_fast.embedded.process_worker", *_priority_args(self.embed),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        self._process = process
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        self._relaying = asyncio.create_task(self._relay(process.stderr), name="combee-learner-process-stderr")
        process.stdin.write(frame(self._encoder.encode(self._start)))
        try:
            first = await read_frame(process.stdout)
            ready = first is not None and isinstance(self._decoder.decode(first), Ready)
        except (ValueError, asyncio.IncompleteReadError):
            ready = False
        if not ready:
            process.kill()
            await self._ending(process)
            self._process = None
            raise LearnerProcessError(f"{self._ended} before it was ready")
        self._reading = asyncio.create_task(self._read(process), name="combee-learner-process-reader")

    async def submit(self, rollout: Rollout, *, version: int | None = None) -> asyncio.Future[AppliedBatch]:
        """Queue ``rollout`` (stamped with ``version``, the context version it ran with, when
        given); returns a future resolving to the batch that applied it.
        :class:`~combee_fast.errors.RolloutError` for a malformed rollout (nothing sent);
        :class:`LearnerProcessError` once the child has ended."""
        if version is not None and rollout.version != version:
            rollout = msgspec.structs.replace(rollout, version=version)
        data = msgspec.Raw(checked(rollout))
        process = self._running()
        loop = asyncio.get_running_loop()
        while len(self._tickets) >= self._capacity:
            waiter = loop.create_future()
            self._room_waiters.append(waiter)
            await waiter
            process = self._running()
        seq, self._seq = self._seq, self._seq + 1
        ticket: asyncio.Future[AppliedBatch] = loop.create_future()
        self._tickets[seq] = ticket
        if not self._outbox:
            loop.call_soon(self._write_out)
        self._outbox.append(frame(self._encoder.encode(Submit(seq, data))))
        stdin = process.stdin
        assert stdin is not None
        if stdin.transport.get_write_buffer_size() > 1 << 20:  # the child is behind: wait, bounded
            await stdin.drain()
        return ticket

    def _write_out(self) -> None:
        """Write the frames queued since the last call in one go (one system call, not one each)."""
        frames, self._outbox = self._outbox, []
        process = self._process
        if frames and process is not None and process.stdin is not None and not process.stdin.is_closing():
            process.stdin.write(b"".join(frames))

    def _running(self) -> asyncio.subprocess.Process:
        """The child, while it runs; else why not (:class:`LearnerProcessError` once it ended)."""
        if self._ended is not None:
            raise LearnerProcessError(f"{self._ended}; start a new ProcessLearner")
        process = self._process
        if process is None or self._reading is None:
            raise RuntimeError("ProcessLearner is not started: use 'async with' or start()")
        return process

    async def stop(self) -> None:
        """Apply what was submitted, then let the child exit. The first call stops; calls
        meanwhile wait for it; later ones return at once."""
        process = self._process
        if process is None:
            return
        if self._stop_task is None:
            self._stop_task = asyncio.ensure_future(self._stop(process))
        await asyncio.shield(self._stop_task)

    async def _stop(self, process: asyncio.subprocess.Process) -> None:
        try:
            self._write_out()
            if process.stdin is not None and not process.stdin.is_closing():
                with contextlib.suppress(OSError):  # the child is gone: nothing to tell it
                    process.stdin.write(frame(self._encoder.encode(Stop())))
                    process.stdin.close()
            if self._reading is not None:
                await self._reading
            await process.wait()
        finally:
            self._process = self._ended = None  # stopped: a later submit is told to start it
            self._settings.restore()

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        broken = ""
        try:
            while (data := await read_frame(process.stdout)) is not None:
                message = self._decoder.decode(data)
                if isinstance(message, Applied):
                    self.batches.append(message.batch)
                elif isinstance(message, Released):
                    self._snapshot = ProcessSnapshot(message.release.incumbent.text, message.playbook, message.batch,
                                                     message.release)
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
            process.kill()
        finally:
            await self._ending(process)
            if self._tickets or self._answers or broken:
                self._fail_all(LearnerProcessError(f"{self._ended}{broken}, with tickets unsettled"))
            self._wake_submitters()

    async def _ending(self, process: asyncio.subprocess.Process) -> None:
        """Wait for the child's end and its last stderr lines; say how it ended (:attr:`_ended`)."""
        code = await process.wait()
        if self._relaying is not None:
            await self._relaying
        last = next((line for line in reversed(self._stderr.splitlines()) if line.strip()), "")
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        self._ended = f"the learner's process {how}" + (f": {last.strip()[:300]}" if last else "")

    async def _relay(self, stderr: asyncio.StreamReader) -> None:
        """The child's stderr, passed on to the host's, its end kept."""
        while chunk := await stderr.read(_STDERR_KEPT):
            text = chunk.decode(errors="replace")
            self._stderr = (self._stderr + text)[-_STDERR_KEPT:]
            with contextlib.suppress(OSError, ValueError):  # the host closed its stderr
                sys.stderr.write(text)

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
        tickets, self._tickets = self._tickets, {}
        answers, self._answers = self._answers, {}
        for future in [*tickets.values(), *answers.values()]:
            if not future.done():
                future.set_exception(exc)
        self._wake_submitters()

    def _wake_submitters(self) -> None:
        waiters, self._room_waiters = self._room_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

