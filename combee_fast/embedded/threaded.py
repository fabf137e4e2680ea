"""The online learner on its own event loop in its own thread, so its work never runs on the host's.

:class:`ThreadedLearner` wraps :class:`~combee_fast.embedded.online.OnlineLearner` unchanged (same
batches, same artifact for the same submissions); only where it runs differs. The host's loop
does three cheap things: ``submit`` appends to an inbox and, at most once per learner wake-up,
calls ``call_soon_threadsafe``; reading the artifact is one attribute load of an immutable
:class:`Snapshot` that the learner thread swaps in, whole, after each batch; tickets are settled
in one host callback per applied batch. Everything else (prompt building, HTTP, decoding,
parsing, shuffle, reduce, apply, rendering, the release gate) runs on the learner's loop; the
host keeps a copy of the gate's :class:`~combee_fast.embedded.release.Release` (swapped whole
with the snapshot), so ``context_for`` is answered on the host's thread.

    async with ThreadedLearner(session.calls, Playbook.empty(), OnlineConfig(batch_size=32)) as learner:
        context = learner.context_for(user_id)   # version and text for this request; never blocks
        ticket = await learner.submit(rollout, version=context.version)  # waits only for room
        batch = await ticket                     # optional: the AppliedBatch that took it in

Contracts:
- ``start`` imports Numba and compiles (or loads from its cache) the reduce's kernels in the
  learner thread before it returns: that holds the GIL, so it belongs at start-up.
- ``submit`` and ``stop`` are called from one event loop (the host's); tickets are futures of
  that loop. At most ``queue_size + batch_size`` submitted rollouts are unsettled; ``submit``
  waits for room beyond that. ``submit`` checks the rollout on the host first
  (:mod:`~combee_fast.embedded.intake`: a malformed one is :class:`~combee_fast.errors.RolloutError`).
- Every ticket settles: if the learner's thread ends early (an error in it), every unsettled
  ticket, and any ``submit`` waiting for room or called later, fails with
  :class:`~combee_fast.errors.LearnerProcessError` saying why. ``stop`` may be called more than
  once, and at once from several tasks.
- ``calls`` are the session's (``session.calls``), serving every role of the online learner of
  ``config.learner`` (checked at construction: :func:`~combee_fast.embedded.online.online_learning`).
- The learner reaches the endpoints through clients rebuilt on its own loop from ``calls``'
  role map (:func:`~combee_fast.roles.clients.open_role_clients`: every replica, the sampling of
  each role, the form found at start-up, the same replay cache; its own connections,
  concurrency cap and usage totals: :meth:`usage_totals`).
- ``on_publish`` is awaited on the learner's loop, in the learner thread; so are the
  ``events`` consumers called (keep them thread-safe).
- ``approve``, ``reject`` and ``propose`` travel through the inbox with the submissions, so the
  gate sees them in the order the host called them.
- While it runs, the learner sets the process's GIL switch interval and young-generation GC
  threshold (:class:`~combee_fast.config.EmbedConfig`) and restores both at ``stop``; the
  host needs no ``gc.freeze()``.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

import msgspec

from combee_fast import tracing
from combee_fast.config import EmbedConfig, OnlineConfig
from combee_fast.embedded.host_settings import HostSettings
from combee_fast.embedded.online import AppliedBatch, OnlineLearner, online_learning
from combee_fast.embedded.release import Context, Release
from combee_fast.embedded.intake import checked
from combee_fast.endpoint.client import UsageTotals
from combee_fast.engine.loop import new_event_loop
from combee_fast.errors import LearnerProcessError
from combee_fast.protocols.learning import Releasable
from combee_fast.roles.calls import RoleCalls
from combee_fast.roles.clients import open_role_clients
from combee_fast.embedded.events import Events
from combee_fast.schema import Rollout

_Ticket = asyncio.Future  # a future of the host's loop, resolving to an AppliedBatch


class Snapshot(NamedTuple):
    """One published version: the incumbent artifact, its rendered text, the batch that made it
    (``None`` for the starting artifact), and the release it serves in."""

    artifact: Releasable
    text: str
    batch: AppliedBatch | None
    release: Release


class _Command(NamedTuple):
    """A call on the learner (``approve``, ``reject`` or ``propose``) queued with the submissions."""

    name: str
    argument: Any


def _settle_answer(answer: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if answer.done():
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(result)


class ThreadedLearner:
    """An :class:`OnlineLearner` running on its own loop in a daemon thread; see the module doc."""

    def __init__(
        self,
        calls: RoleCalls,
        artifact: Releasable,
        config: OnlineConfig | None = None,
        *,
        embed: EmbedConfig | None = None,
        on_publish: Callable[[Any, AppliedBatch], Awaitable[None]] | None = None,
        events: Events | None = None,
    ) -> None:
        """``artifact``: the version to start from (an artifact of the online learner of
        ``config.learner``); the other arguments as :class:`OnlineLearner`'s."""
        self.config = config or OnlineConfig()
        online_learning(self.config.learner, calls)  # refused here, on the host, not in the thread
        self._events = events
        self.embed = embed or EmbedConfig()
        self._settings = HostSettings(self.embed, switch_interval=True)
        self._role_map = calls.role_map()
        self._task = calls.task
        self._cache = calls.clients.cache
        self._calls: RoleCalls | None = None  # the learner's own, built on its loop
        self._start_artifact = artifact
        self._on_publish = on_publish
        text = artifact.render()
        self._snapshot = Snapshot(artifact, text, None, Release(self.config.release.policy, Context(artifact.version, text)))
        self._capacity = self.config.queue_size + self.config.batch_size
        # host side (touched only on the host's loop)
        self._host_loop: asyncio.AbstractEventLoop | None = None
        self._unsettled = 0
        self._open: set[_Ticket] = set()  # tickets not settled yet (failed together if the thread dies)
        self._ended: BaseException | None = None  # why the learner's thread ended early
        self._stop_task: asyncio.Future[None] | None = None  # the one stop in progress
        self._room_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        # shared: a deque is safe to append on one thread and pop on another
        self._inbox: collections.deque[tuple[Rollout | _Command, asyncio.Future[Any]]] = collections.deque()
        self._wakeup_scheduled = False
        # learner side (touched only in the learner thread)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._learner: OnlineLearner | None = None
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._settled: list[tuple[_Ticket, asyncio.Future[AppliedBatch]]] = []
        self._flush_scheduled = False
        self._thread: threading.Thread | None = None
        self._finished: concurrent.futures.Future[None] | None = None

    async def __aenter__(self) -> ThreadedLearner:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ----------------------------------------------------------------- host side

    @property
    def snapshot(self) -> Snapshot:
        """The latest published version (the starting artifact until the first batch); one
        attribute load, never blocks."""
        return self._snapshot

    @property
    def artifact(self) -> Releasable:
        """The latest published artifact (an immutable snapshot)."""
        return self._snapshot.artifact

    @property
    def text(self) -> str:
        """The latest published artifact, rendered (by the learner thread)."""
        return self._snapshot.text

    @property
    def release(self) -> Release:
        """Which versions serve requests (the learner thread's latest, copied whole)."""
        return self._snapshot.release

    def context_for(self, key: str) -> Context:
        """The version and text the request keyed ``key`` runs with; answered on the host's thread."""
        return self._snapshot.release.context_for(key)

    async def approve(self, version: int) -> None:
        """Promote candidate ``version`` (after the submissions made before this call)."""
        await self._command("approve", version)

    async def reject(self, version: int) -> None:
        """Roll candidate ``version`` back (after the submissions made before this call)."""
        await self._command("reject", version)

    async def propose(self, artifact: Releasable) -> int:
        """Hand ``artifact`` to the release as the next version; its number."""
        return int(await self._command("propose", artifact))

    @property
    def batches(self) -> Sequence[AppliedBatch]:
        """The latest ``keep_batches`` applied batches, in order (appended by the learner thread; read only)."""
        return self._learner.batches if self._learner is not None else ()

    def usage_totals(self) -> dict[tuple[str, str, str], UsageTotals]:
        """Usage of the learner's own clients, keyed by (role, model, endpoint)."""
        totals: dict[tuple[str, str, str], UsageTotals] = {}
        for client in self._calls.clients.distinct() if self._calls is not None else ():
            totals.update(client.usage_totals())
        return totals

    async def start(self) -> None:
        """Start the thread and wait until its loop is ready."""
        if self._thread is not None:
            return
        self._ended, self._stop_task = None, None
        self._settings.apply()
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        finished: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._finished = finished
        self._thread = threading.Thread(target=self._main, args=(ready, finished), name="combee-learner", daemon=True)
        self._thread.start()
        try:
            await asyncio.wait_for(asyncio.wrap_future(ready), self.embed.start_timeout_s)
        except BaseException:
            self._settings.restore()
            raise

    async def submit(self, rollout: Rollout, *, version: int | None = None) -> asyncio.Future[AppliedBatch]:
        """Queue ``rollout`` (stamped with ``version``, the context version it ran with, when
        given); returns a future (of the caller's loop) resolving to the batch that applied it,
        or to the exception that failed that batch. :class:`~combee_fast.errors.RolloutError`
        (nothing queued) for a malformed rollout."""
        if version is not None and isinstance(rollout, Rollout) and rollout.version != version:
            rollout = msgspec.structs.replace(rollout, version=version)
        checked(rollout)  # as stamped: a version that cannot travel is refused here, not in the learner's thread
        rollout = tracing.stamp(rollout)  # the host's trace (this thread's), when tracing
        loop = self._host()
        while self._unsettled >= self._capacity:
            waiter = loop.create_future()
            self._room_waiters.append(waiter)
            await waiter
            self._check_running()
        self._unsettled += 1
        ticket: asyncio.Future[AppliedBatch] = loop.create_future()
        self._open.add(ticket)
        self._post(rollout, ticket)
        return ticket

    def _host(self) -> asyncio.AbstractEventLoop:
        self._check_running()
        loop = self._host_loop
        if loop is None:
            loop = self._host_loop = asyncio.get_running_loop()
        return loop

    def _post(self, item: Rollout | _Command, future: asyncio.Future[Any]) -> None:
        self._inbox.append((item, future))
        if not self._wakeup_scheduled and (loop := self._loop) is not None:
            self._wakeup_scheduled = True
            loop.call_soon_threadsafe(self._wakeup)

    async def _command(self, name: str, argument: Any) -> Any:
        answer: asyncio.Future[Any] = self._host().create_future()
        self._post(_Command(name, argument), answer)
        return await answer

    def _check_running(self) -> None:
        if self._ended is not None:
            raise LearnerProcessError(f"the learner's thread ended: {_cause(self._ended)}")
        if self._thread is None or self._loop is None:
            raise RuntimeError("ThreadedLearner is not started: use 'async with' or start()")

    async def stop(self) -> None:
        """Apply what was submitted, then stop the thread (and restore the process settings).
        The first call stops; calls meanwhile wait for it; later ones return at once."""
        if self._thread is None or self._finished is None:
            return
        if self._stop_task is None:
            self._stop_task = asyncio.ensure_future(self._stop(self._thread, self._finished))
        await asyncio.shield(self._stop_task)

    async def _stop(self, thread: threading.Thread, finished: concurrent.futures.Future[None]) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._begin_stop)
        try:
            await asyncio.wrap_future(finished)
        except Exception as exc:
            raise LearnerProcessError(f"the learner's thread ended: {_cause(exc)}") from exc
        finally:
            await asyncio.to_thread(thread.join)
            self._thread = None
            self._settings.restore()

    def _end(self, exc: BaseException) -> None:
        """On the host's loop: the learner's thread ended early; every unsettled ticket and every
        command not yet answered fails."""
        self._ended = exc
        failure = LearnerProcessError(f"the learner's thread ended with tickets unsettled: {_cause(exc)}")
        open_tickets, self._open = self._open, set()
        commands = [answer for item, answer in self._inbox if isinstance(item, _Command)]
        for future in (*open_tickets, *commands):
            if not future.done():
                future.set_exception(failure)
        self._inbox.clear()
        self._unsettled = 0
        waiters, self._room_waiters = self._room_waiters, collections.deque()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _settle(self, settled: list[tuple[_Ticket, asyncio.Future[AppliedBatch]]]) -> None:
        """On the host's loop: resolve tickets from their learner-side futures, free room."""
        for ticket, inner in settled:
            self._open.discard(ticket)
            if ticket.done():
                continue
            if inner.cancelled():
                ticket.cancel()
            elif (exc := inner.exception()) is not None:
                ticket.set_exception(exc)
            else:
                ticket.set_result(inner.result())
        self._unsettled -= len(settled)
        while self._room_waiters and self._unsettled < self._capacity:
            waiter = self._room_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    # -------------------------------------------------------------- learner side

    def _main(self, ready: concurrent.futures.Future[None], finished: concurrent.futures.Future[None]) -> None:
        loop = new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve(ready))
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            finished.set_exception(exc)
            host = self._host_loop
            if host is not None and not host.is_closed():
                with contextlib.suppress(RuntimeError):  # the host's loop closed meanwhile
                    host.call_soon_threadsafe(self._end, exc)
        else:
            finished.set_result(None)
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            self._loop = None
            loop.close()

    async def _serve(self, ready: concurrent.futures.Future[None]) -> None:
        self._wake = asyncio.Event()
        artifact = self._start_artifact
        # Import Numba and compile (or load) the reduce's similarity kernels now: done mid-traffic,
        # that holds the GIL for up to a second, stalling the host; at start only ``start`` waits.
        from combee_fast.native import sequential, similarity

        similarity.warmup()
        sequential.warmup()
        async with contextlib.AsyncExitStack() as stack:
            clients = await open_role_clients(self._role_map, stack, cache=self._cache)
            self._calls = RoleCalls.on(self._role_map, self._task, clients)
            learner = OnlineLearner(self._calls, artifact, self.config, on_publish=self._published,
                                    events=self._events, on_release=self._released)
            self._learner = learner
            async with learner:
                intake = asyncio.create_task(self._intake(learner), name="combee-learner-intake")
                self._loop = asyncio.get_running_loop()
                ready.set_result(None)
                await intake
            if self._settled:  # tickets of the last batch, settled while stopping
                self._flush()

    def _wakeup(self) -> None:
        self._wakeup_scheduled = False
        if self._wake is not None:
            self._wake.set()

    def _begin_stop(self) -> None:
        self._stopping = True
        if self._wake is not None:
            self._wake.set()

    async def _intake(self, learner: OnlineLearner) -> None:
        """Move the inbox into the learner, in submission order, until stopped and drained."""
        wake = self._wake
        assert wake is not None
        while True:
            while self._inbox:
                item, ticket = self._inbox.popleft()
                if isinstance(item, _Command):
                    self._answer(learner, item, ticket)
                    continue
                inner = await learner.submit(item)
                inner.add_done_callback(functools.partial(self._on_settled, ticket))
            wake.clear()
            if self._inbox:
                continue
            if self._stopping:
                return
            await wake.wait()

    def _answer(self, learner: OnlineLearner, command: _Command, answer: asyncio.Future[Any]) -> None:
        """Run ``command`` on the gate now and settle the host's ``answer`` with what it gave."""
        result, error = None, None
        try:
            result = getattr(learner.gate, command.name)(command.argument)
        except Exception as exc:
            error = exc
        host = self._host_loop
        if host is not None and not host.is_closed():
            with contextlib.suppress(RuntimeError):
                host.call_soon_threadsafe(_settle_answer, answer, result, error)

    def _on_settled(self, ticket: _Ticket, inner: asyncio.Future[AppliedBatch]) -> None:
        self._settled.append((ticket, inner))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """One host callback per group of tickets settled in the same learner-loop iteration."""
        self._flush_scheduled = False
        settled, self._settled = self._settled, []
        host = self._host_loop
        if host is not None and not host.is_closed():
            with contextlib.suppress(RuntimeError):  # the host's loop closed meanwhile
                host.call_soon_threadsafe(self._settle, settled)

    def _released(self, release: Release) -> None:
        """On the learner's loop: the incumbent and the release, swapped in for the host whole."""
        learner = self._learner
        assert learner is not None
        gate = learner.gate
        self._snapshot = Snapshot(gate.incumbent.artifact, gate.incumbent.text, gate.incumbent.batch, release)

    async def _published(self, artifact: Any, batch: AppliedBatch) -> None:
        if self._on_publish is not None:
            await self._on_publish(artifact, batch)


def _cause(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split()) or 'no message'}"
