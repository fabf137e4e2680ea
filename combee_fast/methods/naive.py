"""Naive batching: the parallel map, then ONE proposer call over every record of the batch.

Fast, but the one proposer is overloaded: it keeps generic advice and drops specific lessons
(the failure Combee fixes, kept as its yardstick).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from combee_fast.combee.map import SnapshotMap
from combee_fast.config import MapConfig
from combee_fast.methods.base import StepResult, StepShape, StepsOnly, proposed_texts, rewards_of
from combee_fast.protocols.learning import Learner

A = TypeVar("A")


class Naive(StepsOnly, Generic[A]):
    """Parallel map over a frozen snapshot; one proposer call; one apply."""

    name = "naive"
    batches_span_epochs = False

    def __init__(self, learner: Learner[A, Any, Any], map_config: MapConfig) -> None:
        self.learner = learner
        self.map_config = map_config

    async def step(
        self, items: Sequence[Any], artifact: A, *, epoch: int, step: int, shape: StepShape | None = None
    ) -> StepResult[A]:
        """``shape`` is ignored: this method has no proposer groups."""
        started = time.perf_counter()
        text = await self.learner.render(artifact)
        mapped = SnapshotMap(
            self.learner, items, (), artifact, text, epoch=epoch, workers=self.map_config.workers,
            rounds=self.map_config.max_rounds, carry=False, item_timeout_s=self.map_config.item_timeout_s,
        )
        traces, _ = await mapped.run()
        records = [r for t in traces if (r := self.learner.record(t)) is not None]
        sim_seconds = max(mapped.finish_times(traces, ()), default=0.0)
        proposals: tuple[Any, ...] = ()
        edits: tuple[Any, ...] = ()
        if records:
            proposal = await self.learner.propose(records, artifact, text, source="curator[0]", seed_path=(epoch, step, 0))
            proposals = (proposal,)
            edits = proposal.edits
            sim_seconds += proposal.usage.effective_latency_s
        applied = await self.learner.apply(artifact, traces, edits, f"naive[{epoch}.{step}]")
        return StepResult(
            applied.artifact, (applied.report,), tuple(traces), proposals, sim_seconds,
            time.perf_counter() - started, tuple(self.learner.insight(r) for r in records), applied.kept, applied.log,
            rewards=rewards_of(traces), proposed=proposed_texts(self.learner.edit_text, proposals),
        )
