"""Naive batching: the parallel map, then ONE proposer call over every record of the batch.

Fast, but the one curator is overloaded: it keeps generic advice and drops specific lessons
(paper Fig. 2). Kept as the failure Combee fixes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from combee_fast.combee.map import SnapshotMap
from combee_fast.config import MapConfig
from combee_fast.methods.base import StepShape, StepResult
from combee_fast.playbook import Playbook
from combee_fast.protocols import Learner


class Naive:
    """Parallel map over a frozen snapshot; one proposer call; one apply."""

    name = "naive"

    def __init__(self, learner: Learner, map_config: MapConfig, *, workers: int) -> None:
        self.learner = learner
        self.map_config = map_config
        self.workers = workers

    def pending(self) -> int:
        return 0

    async def step(
        self, items: Sequence[Any], playbook: Playbook, *, epoch: int, step: int, shape: StepShape | None = None
    ) -> StepResult:
        """``shape`` is ignored: this method has no curator groups."""
        started = time.perf_counter()
        text = await self.learner.render(playbook)
        mapped = SnapshotMap(
            self.learner, items, (), playbook, text, epoch=epoch, workers=self.workers,
            rounds=self.map_config.max_rounds, carry=False, item_timeout_s=self.map_config.item_timeout_s,
        )
        traces, _ = await mapped.run()
        records = [r for t in traces if (r := self.learner.record(t)) is not None]
        sim_seconds = max(mapped.finish_times(traces, ()), default=0.0)
        proposals: tuple = ()
        edits: tuple = ()
        if records:
            proposal = await self.learner.propose(records, playbook, text, source="curator[0]", seed_path=(epoch, step, 0))
            proposals = (proposal,)
            edits = proposal.ops
            sim_seconds += proposal.usage.effective_latency_s
        applied = await self.learner.apply(playbook, traces, edits, f"naive[{epoch}.{step}]")
        return StepResult(
            applied.artifact, (applied.report,), tuple(traces), proposals, sim_seconds,
            time.perf_counter() - started, tuple(self.learner.insight(r) for r in records), applied.kept, applied.log,
        )
