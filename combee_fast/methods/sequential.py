"""Sequential: batch 1, every call on the critical path (ACE's loop; the baseline Combee is measured against)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from combee_fast.config import MapConfig
from combee_fast.methods.base import StepResult, StepShape, StepsOnly, proposed_texts, rewards_of
from combee_fast.protocols.learning import Learner

A = TypeVar("A")


class Sequential(StepsOnly, Generic[A]):
    """For each item in turn: its whole chain, one proposer call on its record, one apply."""

    name = "sequential"
    batches_span_epochs = False

    def __init__(self, learner: Learner[A, Any, Any], map_config: MapConfig) -> None:
        self.learner = learner
        self.map_config = map_config

    async def step(
        self, items: Sequence[Any], artifact: A, *, epoch: int, step: int, shape: StepShape | None = None
    ) -> StepResult[A]:
        """``shape`` is ignored: this method has no proposer groups."""
        started = time.perf_counter()
        reports: list[Any] = []
        log: list[Any] = []
        traces: list[Any] = []
        proposals: list[Any] = []
        insights: list[str] = []
        kept: list[str] = []
        sim_seconds = 0.0
        for offset, item in enumerate(items):
            text = await self.learner.render(artifact)
            trace = await self.learner.run_item(item, artifact, text, epoch=epoch, rounds=self.map_config.max_rounds)
            traces.append(trace)
            sim_seconds += trace.sim_seconds
            edits: tuple[Any, ...] = ()
            if (record := self.learner.record(trace)) is not None:
                insights.append(self.learner.insight(record))
                proposal = await self.learner.propose(
                    [record], artifact, text, source="curator[0]", seed_path=(epoch, step, offset)
                )
                proposals.append(proposal)
                sim_seconds += proposal.usage.effective_latency_s
                edits = proposal.edits
            applied = await self.learner.apply(artifact, [trace], edits, f"sequential[{epoch}.{step}.{offset}]")
            artifact = applied.artifact
            reports.append(applied.report)
            log.extend(applied.log)
            kept.extend(applied.kept)
        return StepResult(
            artifact, tuple(reports), tuple(traces), tuple(proposals), sim_seconds,
            time.perf_counter() - started, tuple(insights), tuple(kept), tuple(log),
            rewards=rewards_of(traces), proposed=proposed_texts(self.learner.edit_text, proposals),
        )
