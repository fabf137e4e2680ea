"""Online learning inside an agent server: callers submit finished rollouts, the learner batches
them, runs Combee's map -> shuffle -> propose -> reduce on each batch (the ``combee`` method on
the online learner of ``config.learner``: :func:`online_learning`; ACE reflects and curates,
GEPA reflects and aggregates rewrites, TextGrad computes gradients and steps) and learns a new
version of its artifact (a :class:`~combee_fast.protocols.Releasable`), which reaches requests
through the release gate (:mod:`combee_fast.embedded.release`, policy ``config.release``: at once
by default). Reading :attr:`OnlineLearner.artifact` (the incumbent) or
:meth:`OnlineLearner.context_for` never blocks: immutable snapshots, swapped whole.

    async with OnlineLearner(session.calls, Playbook.empty()) as learner:
        context = learner.context_for(user_id)   # the version and text this request runs with
        ticket = await learner.submit(rollout, version=context.version)  # waits only for queue room
        batch = await ticket                     # optional: the AppliedBatch that took it in

Batches follow the queue: a batch takes what is waiting when the learner is free (up to its
ceiling), and waits for more only ``max_wait_s`` after its first rollout. So rollouts that
trickle in go out in small batches, and a burst fills batches up to the ceiling. The ceiling
starts at ``batch_size`` (the planned bs*) and is lowered when a batch's publish latency (from
when it could start forming to its publish) passes ``max_publish_s``, raised back step by step
when it is well under. Only the last ``keep_batches`` batches are kept in :attr:`OnlineLearner.batches`.

Each batch learns on the gate's head (:meth:`~combee_fast.embedded.release.ReleaseGate.base`); a
batch whose line a rollback abandoned while it was learning is discarded (``discarded``). Under
the ``shadow`` policy the learner also re-runs sampled tasks with the candidate's context (the
online learner's one-step attempt, :attr:`~combee_fast.protocols.OnlineLearning.attempts`,
scored by the task of ``calls``) and feeds the gate their rewards in submission order.

``calls`` are the session's role calls (``session.calls``): they must serve every role of the
online learner (:func:`online_learning` refuses, in one line, calls opened for another learner:
open the session with ``SessionConfig(learner=...)`` naming the online learner).

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

from combee_fast import tracing
from combee_fast.config import MapConfig, OnlineConfig
from combee_fast.embedded.events import BatchApplied, Events, VersionApplied
from combee_fast.embedded.intake import checked
from combee_fast.embedded.release import Context, Release, ReleaseGate, ShadowRun
from combee_fast.errors import ConfigError
from combee_fast.learners import LEARNERS
from combee_fast.methods.combee import Combee
from combee_fast.protocols.learning import OnlineLearning
from combee_fast.roles.calls import RoleCalls
from combee_fast.schema import Rollout


class AppliedBatch(msgspec.Struct, frozen=True):
    """One applied batch. ``waiting``: rollouts queued when it closed (after taking its own);
    ``arrival_per_s``: rollouts submitted per second since the previous batch closed; ``ceiling``:
    the batch-size ceiling it was formed under; ``publish_latency_s``: seconds from when it could
    start forming (its first rollout's arrival, or the learner becoming free) to its publish;
    ``discarded``: a release decision abandoned the line it learned on meanwhile, so its version
    was never published (and its number is given to the next)."""

    number: int
    rollout_ids: tuple[str, ...]
    version: int
    report: Any  # what the apply changed (ACE: an ApplyReport)
    waiting: int = 0
    arrival_per_s: float = 0.0
    ceiling: int = 0
    publish_latency_s: float = 0.0
    discarded: bool = False


def online_learning(learner: str, calls: RoleCalls) -> OnlineLearning[Any, Any, Any]:
    """The online learner of the registered learner ``learner`` on ``calls``;
    :class:`~combee_fast.errors.ConfigError` (one line) when ``learner`` is unknown or cannot
    learn online, or when ``calls`` do not serve every role it declares (calls a session opened
    for another learner)."""
    kind = LEARNERS.load(learner)  # a ConfigError naming it when no learner (built-in, plugin or path) is called so
    served = list(calls.clients)  # a RoleClients lookup of a role it lacks raises
    missing = [role.key for role in kind.roles if role.key not in served]
    if missing:
        raise ConfigError(f"online.learner {learner!r} calls roles {', '.join(missing)}, which these role calls do "
                          f"not serve (they serve {', '.join(served) or 'none'}): open the session with "
                          f"SessionConfig(learner={learner!r})")
    return kind.online_learner(calls)


class OnlineLearner:
    """Batches submitted rollouts and applies one Combee update per batch, one batch at a time."""

    def __init__(
        self,
        calls: RoleCalls,
        artifact: Any,
        config: OnlineConfig | None = None,
        *,
        on_publish: Callable[[Any, AppliedBatch], Awaitable[None]] | None = None,
        events: Events | None = None,
        on_release: Callable[[Release], None] | None = None,
    ) -> None:
        """``artifact``: the version to start from (an artifact of the online learner of
        ``config.learner``: a :class:`~combee_fast.ace.playbook.Playbook` for ACE, a
        :class:`~combee_fast.textgrad.variable.PromptVariable` for TextGrad, a
        :class:`~combee_fast.gepa.online.OnlineCandidate` for GEPA).
        ``on_publish(artifact, batch)`` is awaited after each batch with the version it learned
        (under a release policy other than ``none``, a version not yet serving), to save it,
        push it to other workers...; an exception it raises fails that batch's tickets.
        ``events``: where the learner's events go (each batch, each version, each release
        decision and status); ``on_release(release)`` is called with every new
        :class:`~combee_fast.embedded.release.Release`. :class:`~combee_fast.errors.ConfigError`
        when the learner cannot learn online on ``calls`` (:func:`online_learning`), or cannot
        score the shadow re-runs its policy needs."""
        self.config = config or OnlineConfig()
        self._on_publish = on_publish
        self._events = events
        if self.config.release.policy == "shadow" and calls.task is None:
            raise ConfigError("online.release.policy 'shadow' re-runs tasks with the candidate's context, "
                              "so the learner needs a task to score them")
        self.learning = online_learning(self.config.learner, calls)
        """The online learner: its map, proposals and apply, its one-step attempt, its codec."""
        self._gate = ReleaseGate(artifact, self.config.release, seed=self.config.seed,
                                 emit=events.emit if events is not None else None, on_release=on_release,
                                 queued=lambda: self._queue.qsize())
        self._shadows: deque[tuple[ShadowRun, asyncio.Future[Rollout]]] = deque()
        self._shadow_drain: asyncio.Task[None] | None = None
        self.batches: deque[AppliedBatch] = deque(maxlen=self.config.keep_batches)
        self.ceiling = self.config.batch_size  # lowered when publish latency passes its bound
        map_config = MapConfig(sync_rounds=None, workers=self.config.workers)  # submitted rollouts: reflected on only
        self._calls = calls
        self._method = Combee(self.learning, map_config, self.config.combee, seed=self.config.seed)
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
    def artifact(self) -> Any:
        """The version serving requests (the incumbent; the latest learned under policy ``none``)."""
        return self._gate.incumbent.artifact

    @property
    def text(self) -> str:
        """The incumbent, rendered (once per version, on this learner's loop)."""
        return self._gate.incumbent.text

    @property
    def release(self) -> Release:
        """Which versions serve requests now (incumbent, candidate and its share)."""
        return self._gate.release

    @property
    def gate(self) -> ReleaseGate:
        """The release gate (its counts: ``observed``, ``unattributed``, ``shadow_calls``...)."""
        return self._gate

    def context_for(self, key: str) -> Context:
        """The version and text the request keyed ``key`` runs with (sticky per key); never blocks."""
        return self._gate.release.context_for(key)

    async def approve(self, version: int) -> None:
        """Promote candidate ``version`` now; :class:`~combee_fast.errors.ReleaseError` if it is not the candidate."""
        self._gate.approve(version)

    async def reject(self, version: int) -> None:
        """Roll candidate ``version`` back now; :class:`~combee_fast.errors.ReleaseError` if it is not the candidate."""
        self._gate.reject(version)

    async def propose(self, artifact: Any) -> int:
        """Hand ``artifact`` (an artifact of the online learner, e.g. learned offline) to the
        release as the next version; returns its number. Learning continues on top of it."""
        return self._gate.propose(artifact)

    def usage_totals(self) -> dict[tuple[str, str, str], Any]:
        """Usage of the clients this learner calls through (the session's own)."""
        totals: dict[tuple[str, str, str], Any] = {}
        for client in self._calls.clients.distinct():
            totals.update(client.usage_totals())
        return totals

    async def start(self) -> None:
        if self._worker is None:
            self._stopping = None
            self._worker = asyncio.create_task(self._run(), name="combee-online-learner")

    async def stop(self) -> None:
        """Apply what was submitted and finish the shadow re-runs, then stop the worker (the first
        call does; the others wait for it)."""
        if self._worker is None:
            return
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop())
        await asyncio.shield(self._stopping)

    async def _stop(self) -> None:
        worker = self._worker
        assert worker is not None
        await self._queue.join()
        if self._shadow_drain is not None:
            await self._shadow_drain
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
        self._worker = None
        self._gate.emit_status()

    async def submit(self, rollout: Rollout, *, version: int | None = None) -> asyncio.Future[AppliedBatch]:
        """Queue ``rollout`` (stamped with ``version``, the context version it was produced with,
        when given) and hand its reward to the release gate; returns a future resolving to the
        batch that applied it. :class:`~combee_fast.errors.RolloutError` (nothing queued) for a
        malformed rollout."""
        if self._worker is None:
            raise RuntimeError("OnlineLearner is not started: use 'async with' or start()")
        if version is not None and isinstance(rollout, Rollout) and rollout.version != version:
            rollout = msgspec.structs.replace(rollout, version=version)
        checked(rollout)  # as stamped
        rollout = tracing.stamp(rollout)  # the host's trace, when tracing
        shadow = self._gate.observe(rollout)
        if shadow is not None:
            self._start_shadow(shadow)
        loop = asyncio.get_running_loop()
        ticket: asyncio.Future[AppliedBatch] = loop.create_future()
        await self._queue.put((rollout, ticket, loop.time()))
        self._submitted += 1
        return ticket

    def _start_shadow(self, run: ShadowRun) -> None:
        """Re-run a task with the candidate's context (the learner's one-step attempt); rewards
        reach the gate in submission order."""
        attempt = self.learning.attempts.attempt(run.example, run.text, version=run.candidate, epoch=run.epoch)
        self._shadows.append((run, asyncio.ensure_future(attempt)))
        if self._shadow_drain is None or self._shadow_drain.done():
            self._shadow_drain = asyncio.create_task(self._drain_shadows(), name="combee-online-shadow")

    async def _drain_shadows(self) -> None:
        while self._shadows:
            run, task = self._shadows[0]
            try:
                rollout: Rollout | None = await task
            except Exception:  # a bug, not a bad endpoint: a failed call is recorded on the rollout
                rollout = None
            self._shadows.popleft()
            self._gate.shadow_done(run, rollout)

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
                    await self._apply(batch, opened, arrival, closed_at)
                except Exception as exc:  # a bug, not a bad endpoint: those are recorded on the records
                    await self._take_apart(batch, exc, opened, arrival, closed_at)
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def _take_apart(self, batch: list[tuple[Rollout, asyncio.Future[AppliedBatch], float]], exc: Exception,
                          opened: float, arrival: float, closed_at: float) -> None:
        """A batch whose step raised ``exc``: each rollout run again alone; only what fails alone fails."""
        if len(batch) == 1:
            _fail(batch, exc)
            return
        for single in batch:
            try:
                await self._apply([single], opened, arrival, closed_at)
            except Exception as alone:
                _fail([single], alone)

    async def _apply(self, batch: list[tuple[Rollout, asyncio.Future[AppliedBatch], float]], opened: float,
                     arrival: float, closed_at: float) -> None:
        """One step over ``batch`` on the gate's head, handed to the gate (unless a rollback
        abandoned its line meanwhile); its tickets settled unless the step raised."""
        loop = asyncio.get_running_loop()
        number, self._steps = self._steps, self._steps + 1
        ceiling = self.ceiling
        base, lineage = self._gate.base()
        rollouts = [rollout for rollout, _, _ in batch]
        with tracing.online_step(number, rollouts, learner=self.config.learner):
            result = await self._method.step(rollouts, base, epoch=0, step=number)
        latency = loop.time() - opened
        changed = result.artifact.version != base.version
        discarded = changed and lineage != self._gate.lineage
        applied = AppliedBatch(
            number, tuple(r.id for r, _, _ in batch),
            result.artifact.version if changed else self._gate.head_version, result.reports[0],
            waiting=self._queue.qsize(), arrival_per_s=arrival, ceiling=ceiling, publish_latency_s=latency,
            discarded=discarded,
        )
        self.batches.append(applied)
        self._adapt_ceiling(latency)
        if self._events is not None:
            if changed and not discarded:
                self._events.emit(VersionApplied(applied.version, len(result.artifact), number))
            self._events.emit(BatchApplied(number, applied.version, len(batch), applied.waiting,
                                           loop.time() - closed_at, latency))
        if changed and not discarded:
            self._gate.learned(result.artifact, applied, lineage)
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
