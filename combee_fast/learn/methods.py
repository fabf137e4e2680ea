"""The learning methods, all on the same roles and engine.

- :class:`Sequential`: ACE with batch 1: every call on the critical path.
- :class:`Naive`: parallel map over a batch, one curator call over all its reflections.
- :class:`Combee`: parallel map; tags summed; augmented shuffle into sqrt(n) groups; one curator
  call per group, started as soon as its group's samples are done; reduce tree; one apply.

A step never half-applies: its tags and ops go into one :class:`Delta` applied once, and every
failed call is kept on its record. ``sim_seconds`` is the step's critical path in the endpoint's
(simulated) seconds: map finish times from the worker pool, then curation and reduction.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import msgspec

from combee_fast.engine.rng import rng_at
from combee_fast.engine.stream import IndexedStream
from combee_fast.learn.agents import Agents, Proposal
from combee_fast.learn.deltalog import LoggedDelta, logged_delta
from combee_fast.learn.merge import augmented_groups, finish_times, reduce_partitioned, reduce_tree, tag_ops
from combee_fast.learn.sample import SampleTrace, can_continue, continue_sample, reflect_only, run_sample
from combee_fast.playbook import ApplyReport, Playbook
from combee_fast.schema import Delta, Example, Op, OpKind, Reflection, Rollout

Mapper = Callable[[Any, Playbook, str, int], Awaitable[SampleTrace]]
"""``(item, playbook, playbook_text, epoch) -> trace``: the map applied to each batch item."""


class StepResult(msgspec.Struct, frozen=True):
    """What one learning step did. ``playbook`` is the snapshot after its apply(s)."""

    playbook: Playbook
    reports: tuple[ApplyReport, ...]
    traces: tuple[SampleTrace, ...]
    proposals: tuple[Proposal, ...]
    sim_seconds: float
    wall_seconds: float
    insights: tuple[str, ...]
    kept: tuple[str, ...]
    log: tuple[LoggedDelta, ...] = ()  # the applies that changed the playbook, replayable


class Method(Protocol):
    name: str

    async def step(self, items: Sequence[Any], playbook: Playbook, *, epoch: int, step: int) -> StepResult:
        """Learn from ``items`` (examples, or rollouts for reflect-only tasks) starting at ``playbook``."""
        ...

    def pending(self) -> int:
        """Chains carried into the next step; a step with no items curates them."""
        ...


class MapConfig(msgspec.Struct, frozen=True):
    """How the map runs: ACE regeneration rounds, parallel chains, per-chain timeout.

    ``sync_rounds`` (Combee only): rounds a chain runs inside its step; a chain still wrong after
    them finishes its remaining rounds in the background and is curated in the next step, so one
    unlucky sample does not hold the whole batch. ``None``: every chain finishes in its step.
    """

    max_rounds: int = 3
    concurrency: int = 256
    item_timeout_s: float | None = 3600.0
    sync_rounds: int | None = None

    @property
    def rounds_in_step(self) -> int:
        return self.max_rounds if self.sync_rounds is None else min(self.sync_rounds, self.max_rounds)


def example_mapper(agents: Agents, config: MapConfig) -> Mapper:
    async def mapper(item: Example, playbook: Playbook, text: str, epoch: int) -> SampleTrace:
        return await run_sample(agents, item, playbook, text, epoch=epoch, max_rounds=config.rounds_in_step)

    return mapper


def rollout_mapper(agents: Agents) -> Mapper:
    async def mapper(item: Rollout, playbook: Playbook, text: str, epoch: int) -> SampleTrace:
        return await reflect_only(agents, item, playbook, epoch=epoch)

    return mapper


def _kept_contents(delta: Delta, report: ApplyReport) -> tuple[str, ...]:
    return tuple(
        delta.ops[i].content for i in report.applied if delta.ops[i].kind in (OpKind.ADD, OpKind.UPDATE)
    )


async def _render(playbook: Playbook) -> str:
    """The snapshot's prompt text, rendered off the event loop (milliseconds on large playbooks)."""
    return await asyncio.to_thread(playbook.render)


async def _apply(
    playbook: Playbook, traces: Sequence[SampleTrace], ops: Sequence[Op], source: str
) -> tuple[Playbook, ApplyReport, Delta, tuple[LoggedDelta, ...]]:
    """Tags of all traces, then the curated ops, as one delta applied once, off the event loop."""
    reflections = [r for t in traces for r in t.reflections if r.error is None]
    delta = Delta(
        ops=tag_ops(traces, playbook) + tuple(ops),
        source=source,
        reflection_ids=tuple(r.id for r in reflections),
        rollout_ids=tuple(r.id for t in traces for r in t.rollouts),
    )
    new_playbook, report = await asyncio.to_thread(playbook.apply, delta)
    changed = new_playbook.version != playbook.version
    log = (logged_delta(delta, report, new_playbook.version),) if changed else ()
    return new_playbook, report, delta, log


class _Batched:
    """Shared by the batched methods: the parallel map over a frozen snapshot."""

    def __init__(self, agents: Agents, mapper: Mapper, config: MapConfig) -> None:
        self.agents = agents
        self.mapper = mapper
        self.config = config

    def pending(self) -> int:
        return 0

    def _stream(self, items: Sequence[Any], fn: Callable[[int, Any], Awaitable[SampleTrace]]) -> IndexedStream:
        """The map over ``items`` with this method's concurrency and per-chain timeout."""
        return IndexedStream(items, fn, concurrency=self.config.concurrency, item_timeout_s=self.config.item_timeout_s)

    def _map_finish_times(self, traces: Sequence[SampleTrace]) -> list[float]:
        return finish_times([t.sim_seconds for t in traces], self.config.concurrency)


class Sequential:
    """ACE: for each example, the generate/reflect loop, one curator call, one apply."""

    name = "sequential"

    def __init__(self, agents: Agents, mapper: Mapper) -> None:
        self.agents = agents
        self.mapper = mapper

    def pending(self) -> int:
        return 0

    async def step(self, items: Sequence[Any], playbook: Playbook, *, epoch: int, step: int) -> StepResult:
        started = time.perf_counter()
        reports: list[ApplyReport] = []
        log: list[LoggedDelta] = []
        traces: list[SampleTrace] = []
        proposals: list[Proposal] = []
        insights: list[str] = []
        kept: list[str] = []
        sim_seconds = 0.0
        for offset, item in enumerate(items):
            text = await _render(playbook)
            trace = await self.mapper(item, playbook, text, epoch)
            traces.append(trace)
            sim_seconds += trace.sim_seconds
            ops: tuple[Op, ...] = ()
            if (reflection := trace.final_reflection) is not None:
                insights.append(reflection.key_insight)
                proposal = await self.agents.curate(
                    [reflection], playbook, text, source="curator[0]", seed_path=(epoch, step, offset)
                )
                proposals.append(proposal)
                sim_seconds += proposal.usage.effective_latency_s
                ops = proposal.ops
            playbook, report, delta, logged = await _apply(
                playbook, [trace], ops, f"sequential[{epoch}.{step}.{offset}]"
            )
            reports.append(report)
            log.extend(logged)
            kept.extend(_kept_contents(delta, report))
        return StepResult(
            playbook, tuple(reports), tuple(traces), tuple(proposals), sim_seconds,
            time.perf_counter() - started, tuple(insights), tuple(kept), tuple(log),
        )


class Naive(_Batched):
    """Batch n, parallel map, one curator call over all n reflections: fast, overloads the curator."""

    name = "naive"

    async def step(self, items: Sequence[Any], playbook: Playbook, *, epoch: int, step: int) -> StepResult:
        started = time.perf_counter()
        text = await _render(playbook)
        async def one(_: int, item: Any) -> SampleTrace:
            return await self.mapper(item, playbook, text, epoch)

        traces = await self._stream(items, one).run()
        reflections = [r for t in traces if (r := t.final_reflection) is not None]
        sim_seconds = max(self._map_finish_times(traces), default=0.0)
        proposals: tuple[Proposal, ...] = ()
        ops: tuple[Op, ...] = ()
        if reflections:
            proposal = await self.agents.curate(
                reflections, playbook, text, source="curator[0]", seed_path=(epoch, step, 0)
            )
            proposals = (proposal,)
            ops = proposal.ops
            sim_seconds += proposal.usage.effective_latency_s
        new_playbook, report, delta, log = await _apply(playbook, traces, ops, f"naive[{epoch}.{step}]")
        return StepResult(
            new_playbook, (report,), tuple(traces), proposals, sim_seconds, time.perf_counter() - started,
            tuple(r.key_insight for r in reflections), _kept_contents(delta, report), log,
        )


class CombeeConfig(msgspec.Struct, frozen=True):
    duplicates: int = 2  # p: copies of each reflection in the augmented shuffle
    max_fan_in: int = 8  # most proposals one reducer call merges
    seed: int = 0
    max_reduce_ops: int | None = 32  # most proposed ops one reducer reads; more are split by topic
    max_group: int | None = None  # most records one curator reads (None: the paper's sqrt(n) groups)


class _Carried(msgspec.Struct, frozen=True):
    """A chain that left its step still retrying. ``offset`` is when its step's part ended,
    in simulated seconds relative to the end of that step (<= 0)."""

    partial: SampleTrace
    rest: asyncio.Task[SampleTrace]
    offset: float


class Combee(_Batched):
    """Parallel map, augmented shuffle, parallel curators, reduce tree, one apply."""

    name = "combee"

    def __init__(self, agents: Agents, mapper: Mapper, config: MapConfig, combee: CombeeConfig) -> None:
        super().__init__(agents, mapper, config)
        self.combee = combee
        self._carried: list[_Carried] = []

    def pending(self) -> int:
        return len(self._carried)

    async def step(self, items: Sequence[Any], playbook: Playbook, *, epoch: int, step: int) -> StepResult:
        started = time.perf_counter()
        text = await _render(playbook)
        carried, self._carried = self._carried, []
        n = len(items)
        groups = augmented_groups(
            n + len(carried), self.combee.duplicates, rng_at(self.combee.seed, "shuffle", epoch, step),
            max_group=self.combee.max_group,
        )
        leaving: dict[int, asyncio.Task[SampleTrace]] = {}

        async def one(index: int, item: Any) -> SampleTrace:
            trace = await self.mapper(item, playbook, text, epoch)
            if self.config.sync_rounds is not None and can_continue(trace, self.config.max_rounds):
                rest = continue_sample(self.agents, trace, playbook, text, epoch=epoch, max_rounds=self.config.max_rounds)
                leaving[index] = asyncio.create_task(asyncio.wait_for(rest, self.config.item_timeout_s))
            return trace

        stream = self._stream(items, one)

        async def record(index: int) -> Reflection | None:
            """Record ``index``'s reflection for curation: None when it leaves with its chain."""
            if index < n:
                trace = await stream.future(index)
                return None if index in leaving else trace.final_reflection
            carry = carried[index - n]
            rest = await carry.rest
            return rest.final_reflection or carry.partial.final_reflection

        async def curate_group(index: int, members: tuple[int, ...]) -> Proposal | None:
            reflections = [r for r in await asyncio.gather(*(record(i) for i in members)) if r is not None]
            if not reflections:
                return None
            return await self.agents.curate(
                reflections, playbook, text, source=f"curator[{index}]", seed_path=(epoch, step, index)
            )

        try:
            async with asyncio.TaskGroup() as group:
                curations = [group.create_task(curate_group(i, members)) for i, members in enumerate(groups)]
                traces = await stream.run()
                rests = [await carry.rest for carry in carried]
            finished = self._map_finish_times(traces) + [
                max(0.0, carry.offset + rest.sim_seconds) for carry, rest in zip(carried, rests)
            ]
            curator_calls = [(members, task.result()) for members, task in zip(groups, curations)]
            curator_done = [
                max(finished[i] for i in members) + (call.usage.effective_latency_s if call is not None else 0.0)
                for members, call in curator_calls
            ]
            proposals = [call for _, call in curator_calls if call is not None]
            proposed = [p.ops for p in proposals if p.error is None]
            if self.combee.max_reduce_ops is None:
                reduced = await reduce_tree(
                    self.agents, proposed, text, fan_in=self.combee.max_fan_in, seed_path=(epoch, step)
                )
            else:
                reduced = await reduce_partitioned(
                    self.agents, proposed, text, fan_in=self.combee.max_fan_in,
                    max_ops=self.combee.max_reduce_ops, seed_path=(epoch, step),
                )
            sim_seconds = max(curator_done + finished, default=0.0) + reduced.sim_seconds
            all_traces = [*traces, *rests]
            new_playbook, report, delta, log = await _apply(
                playbook, all_traces, reduced.ops, f"combee[{epoch}.{step}]"
            )
        except BaseException:
            for task in [*leaving.values(), *(c.rest for c in carried)]:
                task.cancel()
            raise
        self._carried = [
            _Carried(traces[i], task, finished[i] - sim_seconds) for i, task in sorted(leaving.items())
        ]
        insights = tuple(
            reflection.key_insight
            for reflection in [
                *(t.final_reflection for i, t in enumerate(traces) if i not in leaving),
                *(rest.final_reflection or c.partial.final_reflection for c, rest in zip(carried, rests)),
            ]
            if reflection is not None
        )
        return StepResult(
            new_playbook, (report,), tuple(all_traces), tuple(proposals) + reduced.calls, sim_seconds,
            time.perf_counter() - started, insights, _kept_contents(delta, report), log,
        )
