"""Sequential ACE: batch 1, every call on the critical path (the baseline Combee is measured against)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from combee_fast.config import MapConfig
from combee_fast.methods.base import StepShape, StepResult
from combee_fast.playbook import Playbook
from combee_fast.protocols import Learner


class Sequential:
    """For each item in turn: its whole chain, one proposer call on its record, one apply."""

    name = "sequential"

    def __init__(self, learner: Learner, map_config: MapConfig) -> None:
        self.learner = learner
        self.map_config = map_config

    def pending(self) -> int:
        return 0

    async def step(
        self, items: Sequence[Any], playbook: Playbook, *, epoch: int, step: int, shape: StepShape | None = None
    ) -> StepResult:
        """``shape`` is ignored: this method has no curator groups."""
        started = time.perf_counter()
        reports, log, traces, proposals, insights, kept = [], [], [], [], [], []
        sim_seconds = 0.0
        for offset, item in enumerate(items):
            text = await self.learner.render(playbook)
            trace = await self.learner.run_item(item, playbook, text, epoch=epoch, rounds=self.map_config.max_rounds)
            traces.append(trace)
            sim_seconds += trace.sim_seconds
            edits: tuple = ()
            if (record := self.learner.record(trace)) is not None:
                insights.append(self.learner.insight(record))
                proposal = await self.learner.propose(
                    [record], playbook, text, source="curator[0]", seed_path=(epoch, step, offset)
                )
                proposals.append(proposal)
                sim_seconds += proposal.usage.effective_latency_s
                edits = proposal.ops
            applied = await self.learner.apply(playbook, [trace], edits, f"sequential[{epoch}.{step}.{offset}]")
            playbook = applied.artifact
            reports.append(applied.report)
            log.extend(applied.log)
            kept.extend(applied.kept)
        return StepResult(
            playbook, tuple(reports), tuple(traces), tuple(proposals), sim_seconds,
            time.perf_counter() - started, tuple(insights), tuple(kept), tuple(log),
        )
