"""Batch plans for the trainer (:class:`~combee_fast.protocols.BatchPlan`): a fixed size, the live
batch-shape planner (``--batch-size auto``, :class:`LivePlan`) or the paper's profile-and-fit rule
(``controller.mode = "paper"``, :class:`ControllerPlan`).

Each step reports its critical-path seconds (simulated seconds on the simulated endpoint) and its
*retention*: the fraction of the distinct key insights in the step's reflections that are in the
playbook after the step (already held or newly applied), the direct symptom of context overload.
Every decision goes to the run directory's ``controller.jsonl`` with its inputs and reason.
"""

from __future__ import annotations

import asyncio

from combee_fast.config import CombeeConfig, ControllerConfig
from combee_fast.combee.controller import BatchSizeController, IterationMeasurement
from combee_fast.combee.planner import ShapeDecision, ShapePlanner
from combee_fast.methods.base import StepResult, StepShape
from combee_fast.roles.agents import Agents
from combee_fast.run.rundir import RunDir
from combee_fast.run.step_signals import step_signals

class FixedBatch:
    """The same batch size every step."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"batch size must be >= 1, got {size}")
        self.size = size

    def next_size(self, remaining: int) -> tuple[int, str]:
        return self.size, "fixed"

    def step_shape(self) -> StepShape | None:
        return None

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

    def next_size(self, remaining: int) -> tuple[int, str]:
        decision = self.controller.next_batch_size()
        if self.run_dir is not None:
            self.run_dir.append_decision(decision)
        return decision.batch_size, decision.reason

    def step_shape(self) -> StepShape | None:
        return None

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

class LivePlan:
    """The live planner: every step's batch size and group shape re-planned from what the last
    steps measured; diversity remedies applied to the reflections' temperature and the shuffle."""

    def __init__(self, planner: ShapePlanner, *, workers: int, agents: Agents | None = None,
                 run_dir: RunDir | None = None) -> None:
        self.planner = planner
        self.workers = workers
        self.agents = agents
        self.run_dir = run_dir
        self.decision: ShapeDecision | None = None

    @classmethod
    async def start(cls, config: ControllerConfig, combee: CombeeConfig, *, workers: int, agents: Agents | None = None,
                    run_dir: RunDir | None = None) -> LivePlan:
        """A planner bounded by ``workers`` (the concurrency cap); compiles the kernels off the loop."""
        from combee_fast.native import warmup

        await asyncio.to_thread(warmup)
        return cls(ShapePlanner(config, combee, upper=workers), workers=workers, agents=agents, run_dir=run_dir)

    def next_size(self, remaining: int) -> tuple[int, str]:
        decision = self.planner.decide(remaining)
        self.decision = decision
        if self.agents is not None and decision.reflect_temperature is not None:
            self.agents.reflect_temperature = decision.reflect_temperature
        if self.run_dir is not None:
            self.run_dir.append_decision(decision)
        return decision.batch_size, decision.reason

    def step_shape(self) -> StepShape | None:
        if self.decision is None:
            return None
        return StepShape(self.decision.max_group, self.decision.duplicates, self.decision.shuffle_salt)

    async def observe(self, batch_size: int, result: StepResult, samples_in_epoch: int) -> None:
        def measure():
            return step_signals(batch_size, result, workers=self.workers, retention=step_retention(result))

        self.planner.record(await asyncio.to_thread(measure))

    def state(self) -> tuple[ShapePlanner, ShapeDecision | None, float | None]:
        """What a checkpoint keeps: the planner, its last decision and the reflections' temperature
        (a diversity remedy may have raised it)."""
        temperature = self.agents.reflect_temperature if self.agents is not None else None
        return self.planner, self.decision, temperature

    def restore(self, state: tuple[ShapePlanner, ShapeDecision | None, float | None]) -> None:
        """Continue from a checkpointed planner (see :meth:`state`)."""
        self.planner, self.decision, temperature = state
        if self.agents is not None:
            self.agents.reflect_temperature = temperature
