"""Combee: the paper's step as named stages over the mechanisms in :mod:`combee_fast.combee`.

    shuffle   records of this batch (and of chains carried in) -> augmented groups
    map       every item's chain against one frozen snapshot, in parallel
    curate    one proposer call per group, each as soon as its group's records exist
    reduce    reducer tree over the proposals (split by topic past ``max_reduce_ops``)
    apply     everything the traces say and the merged edits, as one change applied once
    carry     chains still retrying leave for the next step
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

import msgspec

from combee_fast.combee.map import Carried, SnapshotMap
from combee_fast.combee.reduce import ReduceOutcome, curate_group, group_finish_times, reduce_proposals
from combee_fast.combee.shuffle import augmented_groups
from combee_fast.config import CombeeConfig, MapConfig
from combee_fast.engine.rng import rng_at
from combee_fast.errors import CheckpointError
from combee_fast.methods.base import StepResult, StepShape, proposed_texts, rewards_of
from combee_fast.protocols.learning import Learner
from combee_fast.schema import Proposal

A = TypeVar("A")


class CarriedChains(msgspec.Struct, Generic[A], frozen=True):
    """What a checkpoint keeps of the chains carried into the next step: ``(item id, offset)`` of
    each, in order, and the snapshot they ran on in epoch ``epoch``."""

    chains: tuple[tuple[str, float], ...]
    snapshot: A
    epoch: int


class Combee(Generic[A]):
    """Parallel map, augmented shuffle, parallel curators, reduce tree, one apply.

    ``seed`` roots the shuffle's draws (path ``("shuffle", epoch, step)``); ``map_config.workers``
    chains run at once. With ``map_config.sync_rounds`` chains may be carried across steps.
    """

    name = "combee"
    batches_span_epochs = False

    def __init__(self, learner: Learner[A, Any, Any], map_config: MapConfig, combee: CombeeConfig, *, seed: int) -> None:
        self.learner = learner
        self.map_config = map_config
        self.combee = combee
        self.seed = seed
        self._carried: list[Carried] = []
        self._carried_on: tuple[A, int] | None = None  # the snapshot and epoch the carried chains ran on

    async def start(self, artifact: A) -> None:
        """Nothing to do before the first batch."""
        return None

    def pending(self) -> int:
        return len(self._carried)

    def carried(self) -> CarriedChains[A] | None:
        if not self._carried or self._carried_on is None:
            return None
        snapshot, epoch = self._carried_on
        return CarriedChains(tuple((carry.partial.item_id, carry.offset) for carry in self._carried), snapshot, epoch)

    def carried_type(self, artifact_type: Any) -> Any:
        return CarriedChains[artifact_type] | None

    async def resume(self, carried: CarriedChains[A] | None, items: Mapping[str, Any]) -> None:
        """Carry the chains of ``carried`` into the next step again, as a checkpointed run had them:
        each is run again from its item on the snapshot it ran on and, as in the map, goes on in
        the background after the step's rounds. Its requests are seeded by path, so it makes the
        same calls as the first time. Each must leave its step again (else
        :class:`~combee_fast.errors.CheckpointError`, one line)."""
        if carried is None:
            return
        snapshot, epoch = carried.snapshot, carried.epoch
        unknown = [item_id for item_id, _ in carried.chains if item_id not in items]
        if unknown:
            raise CheckpointError(f"cannot resume: the checkpoint carries a chain of item {unknown[0]!r}, which the "
                                  f"run's train split does not hold (a checkpoint of another split, or forged); "
                                  "start the run again")
        text = await self.learner.render(snapshot)
        rounds, timeout = self.map_config.rounds_in_step, self.map_config.item_timeout_s
        traces = await asyncio.gather(*(
            self.learner.run_item(items[item_id], snapshot, text, epoch=epoch, rounds=rounds)
            for item_id, _ in carried.chains
        ))
        chains: list[Carried] = []
        for trace, (_, offset) in zip(traces, carried.chains):
            rest = self.learner.continuation(trace, snapshot, text, epoch=epoch)
            if rest is None:
                for carry in chains:
                    carry.rest.cancel()
                raise CheckpointError(f"cannot resume: the chain of item {trace.item_id!r}, carried past the last "
                                      "checkpointed step, did not run again as it ran (a nondeterministic endpoint, "
                                      "or a changed seed?); start the run again")
            chains.append(Carried(trace, asyncio.create_task(asyncio.wait_for(rest, timeout)), offset))
        self._carried, self._carried_on = chains, (snapshot, epoch)

    async def step(
        self, items: Sequence[Any], artifact: A, *, epoch: int, step: int, shape: StepShape | None = None
    ) -> StepResult[A]:
        """One step; ``shape`` overrides the curator groups' shape for this step only."""
        started = time.perf_counter()
        text = await self.learner.render(artifact)
        carried, self._carried = self._carried, []
        mapped = self._map(items, carried, artifact, text, epoch)
        groups = self._shuffle(mapped.size, epoch, step, shape or StepShape())
        try:
            proposals, traces, rests = await self._map_and_curate(mapped, groups, artifact, text, epoch, step)
            finished = mapped.finish_times(traces, rests)
            reduced = await self._reduce(proposals, text, epoch, step)
            curated_at = group_finish_times(groups, finished, proposals)
            sim_seconds = max(curated_at + finished, default=0.0) + reduced.sim_seconds
            all_traces = [*traces, *rests]
            applied = await self.learner.apply(artifact, all_traces, reduced.edits, f"combee[{epoch}.{step}]")
        except BaseException:
            mapped.cancel()
            raise
        self._carried = mapped.leaving_chains(traces, finished, sim_seconds)
        self._carried_on = (artifact, epoch)
        return StepResult(
            applied.artifact, (applied.report,), tuple(all_traces), _made(proposals, reduced), sim_seconds,
            time.perf_counter() - started, mapped.insights(traces, rests), applied.kept, applied.log,
            rewards=rewards_of(traces), proposed=proposed_texts(self.learner.edit_text, proposals),
        )

    def _map(self, items: Sequence[Any], carried: Sequence[Carried], artifact: A, text: str, epoch: int) -> SnapshotMap:
        """The map stage: this batch's items, then the chains carried into this step."""
        return SnapshotMap(
            self.learner, items, carried, artifact, text, epoch=epoch, workers=self.map_config.workers,
            rounds=self.map_config.rounds_in_step, carry=self.map_config.sync_rounds is not None,
            item_timeout_s=self.map_config.item_timeout_s,
        )

    def _shuffle(self, records: int, epoch: int, step: int, shape: StepShape) -> list[tuple[int, ...]]:
        """The augmented shuffle of this step's records into curator groups."""
        path = ("shuffle", epoch, step) if not shape.shuffle_salt else ("shuffle", epoch, step, "salt", shape.shuffle_salt)
        duplicates = self.combee.duplicates if shape.duplicates is None else shape.duplicates
        max_group = self.combee.max_group if shape.max_group is None else shape.max_group
        return augmented_groups(records, duplicates, rng_at(self.seed, *path), max_group=max_group)

    async def _map_and_curate(
        self, mapped: SnapshotMap, groups: list[tuple[int, ...]], artifact: A, text: str, epoch: int, step: int
    ) -> tuple[list[Proposal[Any] | None], list[Any], list[Any]]:
        """Run the map; each group's curator starts as soon as its records exist."""
        async with asyncio.TaskGroup() as group:
            curations = [
                group.create_task(
                    curate_group(
                        self.learner, [mapped.record(i) for i in members], artifact, text,
                        source=f"curator[{index}]", seed_path=(epoch, step, index),
                    )
                )
                for index, members in enumerate(groups)
            ]
            traces, rests = await mapped.run()
        return [task.result() for task in curations], traces, rests

    async def _reduce(self, proposals: list[Proposal[Any] | None], text: str, epoch: int, step: int) -> ReduceOutcome:
        """The reduce stage over every successful proposal."""
        proposed = [p.edits for p in proposals if p is not None and p.error is None]
        return await reduce_proposals(
            self.learner, proposed, text, fan_in=self.combee.max_fan_in, max_ops=self.combee.max_reduce_ops,
            seed_path=(epoch, step),
        )


def _made(proposals: list[Proposal[Any] | None], reduced: ReduceOutcome) -> tuple[Proposal[Any], ...]:
    """Every proposer and merger call of a step, in the order they were planned."""
    return tuple(p for p in proposals if p is not None) + reduced.calls
