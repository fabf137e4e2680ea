"""Combee: the paper's step as named stages over the mechanisms in :mod:`combee_fast.combee`.

    shuffle   records of this batch (and of chains carried in) -> augmented groups
    map       every item's chain against one frozen snapshot, in parallel
    curate    one proposer call per group, each as soon as its group's records exist
    reduce    reducer tree over the proposals (split by topic past ``max_reduce_ops``)
    apply     summed tags and merged edits, as one delta applied once
    carry     chains still retrying leave for the next step
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from combee_fast.combee.map import Carried, SnapshotMap
from combee_fast.combee.reduce import ReduceOutcome, curate_group, group_finish_times, reduce_proposals
from combee_fast.combee.shuffle import augmented_groups
from combee_fast.config import CombeeConfig, MapConfig
from combee_fast.engine.rng import rng_at
from combee_fast.methods.base import Applied, StepResult, StepShape
from combee_fast.playbook import Playbook
from combee_fast.protocols import Learner
from combee_fast.schema import Proposal


class Combee:
    """Parallel map, augmented shuffle, parallel curators, reduce tree, one apply.

    ``seed`` roots the shuffle's draws (path ``("shuffle", epoch, step)``); ``workers`` chains
    run at once. With ``map_config.sync_rounds`` chains may be carried across steps.
    """

    name = "combee"

    def __init__(
        self, learner: Learner, map_config: MapConfig, combee: CombeeConfig, *, workers: int, seed: int
    ) -> None:
        self.learner = learner
        self.map_config = map_config
        self.combee = combee
        self.workers = workers
        self.seed = seed
        self._carried: list[Carried] = []

    def pending(self) -> int:
        return len(self._carried)

    def carried(self) -> tuple[tuple[str, float], ...]:
        """``(item id, offset)`` of each chain carried into the next step, in order (for a checkpoint)."""
        return tuple((carry.partial.item_id, carry.offset) for carry in self._carried)

    async def resume_carried(
        self, items: Sequence[Any], offsets: Sequence[float], playbook: Playbook, *, epoch: int
    ) -> None:
        """Carry ``items`` into the next step again, as a checkpointed run had them: each chain is
        run again from its item on ``playbook`` (the snapshot it ran on) and, as in the map, goes on
        in the background after the step's rounds. Its requests are seeded by path, so it makes
        the same calls as the first time. Each must leave its step again (else ``RuntimeError``)."""
        text = await self.learner.render(playbook)
        rounds, timeout = self.map_config.rounds_in_step, self.map_config.item_timeout_s
        traces = await asyncio.gather(*(
            self.learner.run_item(item, playbook, text, epoch=epoch, rounds=rounds) for item in items
        ))
        carried = []
        for trace, offset in zip(traces, offsets):
            rest = self.learner.continuation(trace, playbook, text, epoch=epoch)
            if rest is None:
                for carry in carried:
                    carry.rest.cancel()
                raise RuntimeError(f"carried chain {trace.item_id!r} did not replay as it ran (a nondeterministic endpoint?)")
            carried.append(Carried(trace, asyncio.create_task(asyncio.wait_for(rest, timeout)), offset))
        self._carried = carried

    async def step(
        self, items: Sequence[Any], playbook: Playbook, *, epoch: int, step: int, shape: StepShape | None = None
    ) -> StepResult:
        """One step; ``shape`` overrides the curator groups' shape for this step only."""
        started = time.perf_counter()
        text = await self.learner.render(playbook)
        carried, self._carried = self._carried, []
        mapped = self._map(items, carried, playbook, text, epoch)
        groups = self._shuffle(mapped.size, epoch, step, shape or StepShape())
        try:
            proposals, traces, rests = await self._map_and_curate(mapped, groups, playbook, text, epoch, step)
            finished = mapped.finish_times(traces, rests)
            reduced = await self._reduce(proposals, text, epoch, step)
            curated_at = group_finish_times(groups, finished, proposals)
            sim_seconds = max(curated_at + finished, default=0.0) + reduced.sim_seconds
            all_traces = [*traces, *rests]
            applied = await self.learner.apply(playbook, all_traces, reduced.ops, f"combee[{epoch}.{step}]")
        except BaseException:
            mapped.cancel()
            raise
        self._carried = mapped.leaving_chains(traces, finished, sim_seconds)
        return self._result(applied, all_traces, proposals, reduced, sim_seconds, started, mapped.insights(traces, rests))

    def _map(self, items: Sequence[Any], carried: Sequence[Carried], playbook: Playbook, text: str, epoch: int) -> SnapshotMap:
        """The map stage: this batch's items, then the chains carried into this step."""
        return SnapshotMap(
            self.learner, items, carried, playbook, text, epoch=epoch, workers=self.workers,
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
        self, mapped: SnapshotMap, groups: list[tuple[int, ...]], playbook: Playbook, text: str, epoch: int, step: int
    ) -> tuple[list[Proposal | None], list[Any], list[Any]]:
        """Run the map; each group's curator starts as soon as its records exist."""
        async with asyncio.TaskGroup() as group:
            curations = [
                group.create_task(
                    curate_group(
                        self.learner, [mapped.record(i) for i in members], playbook, text,
                        source=f"curator[{index}]", seed_path=(epoch, step, index),
                    )
                )
                for index, members in enumerate(groups)
            ]
            traces, rests = await mapped.run()
        return [task.result() for task in curations], traces, rests

    async def _reduce(self, proposals: list[Proposal | None], text: str, epoch: int, step: int) -> ReduceOutcome:
        """The reduce stage over every successful proposal."""
        proposed = [p.ops for p in proposals if p is not None and p.error is None]
        return await reduce_proposals(
            self.learner, proposed, text, fan_in=self.combee.max_fan_in, max_ops=self.combee.max_reduce_ops,
            seed_path=(epoch, step),
        )

    @staticmethod
    def _result(
        applied: Applied, traces: list[Any], proposals: list[Proposal | None], reduced: ReduceOutcome,
        sim_seconds: float, started: float, insights: tuple[str, ...],
    ) -> StepResult:
        made = tuple(p for p in proposals if p is not None) + reduced.calls
        return StepResult(
            applied.artifact, (applied.report,), tuple(traces), made, sim_seconds,
            time.perf_counter() - started, insights, applied.kept, applied.log,
        )
