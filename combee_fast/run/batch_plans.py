"""Batch plans for the trainer (:class:`~combee_fast.protocols.BatchPlan`): a fixed size, or
the batch-size controller (``--batch-size auto``).

Each step reports its critical-path seconds (simulated seconds on the simulated endpoint) and its
*retention*: the fraction of the distinct key insights in the step's reflections that are in the
playbook after the step (already held or newly applied), the direct symptom of context overload.
Every decision goes to the run directory's ``controller.jsonl`` with its inputs and reason.
"""

from __future__ import annotations

import asyncio

from combee_fast.config import ControllerConfig
from combee_fast.combee.controller import BatchSizeController, IterationMeasurement
from combee_fast.methods.base import StepResult
from combee_fast.run.rundir import RunDir

class FixedBatch:
    """The same batch size every step."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"batch size must be >= 1, got {size}")
        self.size = size

    def next_size(self) -> tuple[int, str]:
        return self.size, "fixed"

    async def observe(self, batch_size: int, result: StepResult, samples_in_epoch: int) -> None:
        return None

    def state(self) -> None:
        """Nothing to checkpoint: the size never changes."""
        return None

    def restore(self, state: None) -> None:
        return None


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
    async def start(cls, config: ControllerConfig, *, capacity: int, run_dir: RunDir | None = None) -> ControllerPlan:
        """A controller bounded by ``capacity`` (the endpoint's running-sequence capacity or the
        concurrency cap). Compiles (or loads from cache) the similarity kernels off the event loop."""
        from combee_fast.native.similarity import warmup

        await asyncio.to_thread(warmup)
        return cls(BatchSizeController(config, capacity=capacity), run_dir)

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

    def state(self) -> BatchSizeController:
        """What a checkpoint keeps: the controller (its profile, fit, cap and decisions)."""
        return self.controller

    def restore(self, state: BatchSizeController) -> None:
        """Continue from a checkpointed controller (see :meth:`state`)."""
        self.controller = state
