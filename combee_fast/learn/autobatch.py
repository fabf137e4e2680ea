"""``--batch-size auto``: the batch-size controller as the trainer's :class:`BatchPlan`.

Each step reports its critical-path seconds (simulated seconds on the simulated endpoint) and its
*retention*: the fraction of the distinct key insights in the step's reflections that are in the
playbook after the step (already held or newly applied), the direct symptom of context overload.
Every decision goes to the run directory's ``controller.jsonl`` with its inputs and reason.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from combee_fast.learn.controller import BatchSizeController, ControllerConfig, IterationMeasurement
from combee_fast.learn.methods import StepResult
from combee_fast.learn.rundir import RunDir

if TYPE_CHECKING:
    from combee_fast.session import Session

RETENTION_FLOOR = 0.35
"""Below this the batch shrinks. Even a lightly loaded curator keeps only about half of the
insights it reads (ACE at batch 1 adds ~0.5 entries per sample), so overload shows as retention
well under one half, not as a drop below ~1."""


def step_retention(result: StepResult) -> float:
    """Fraction of the step's distinct insights present in its resulting playbook."""
    from combee_fast.native.similarity import retention

    return retention(result.insights, [bullet.content for bullet in result.playbook.bullets()])


class ControllerPlan:
    """Asks the controller for each batch size and feeds it each step's time and retention."""

    def __init__(self, controller: BatchSizeController, run_dir: RunDir | None = None) -> None:
        self.controller = controller
        self.run_dir = run_dir

    @classmethod
    async def for_session(cls, session: Session, run_dir: RunDir | None = None) -> ControllerPlan:
        """Bounded by the simulated server's running-sequence capacity, or the concurrency cap.

        Compiles (or loads from cache) the similarity kernels off the event loop first.
        """
        from combee_fast.native.similarity import warmup

        await asyncio.to_thread(warmup)
        capacity = session.config.concurrency
        if session.server is not None and session.server.preset.max_running is not None:
            capacity = min(capacity, session.server.preset.max_running)
        return cls(BatchSizeController(ControllerConfig(retention_floor=RETENTION_FLOOR), capacity=capacity), run_dir)

    def next_size(self) -> tuple[int, str]:
        decision = self.controller.next_batch_size()
        if self.run_dir is not None:
            self.run_dir.append_decision(decision)
        return decision.batch_size, decision.reason

    async def observe(self, batch_size: int, result: StepResult, samples_in_epoch: int) -> None:
        retention = await asyncio.to_thread(step_retention, result)
        self.controller.record(
            IterationMeasurement(
                batch_size=batch_size,
                seconds=max(result.sim_seconds, 1e-9),
                samples_in_epoch=samples_in_epoch,
                retention=retention,
            )
        )
