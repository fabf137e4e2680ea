"""Batch plans for the trainer (:class:`~combee_fast.protocols.BatchPlan`): a fixed size, the live
batch-shape planner (``--batch-size auto``, :class:`LivePlan`) or the paper's profile-and-fit rule
(``controller.mode = "paper"``, :class:`ControllerPlan`).

Each step reports its critical-path seconds (simulated seconds on the simulated endpoint) and its
*retention*: the fraction of the distinct insights of the step's records that the artifact holds
after the step (already held or newly applied), the direct symptom of context overload. Every
decision goes to the run directory's ``controller.jsonl`` with its inputs and reason.

The plans are generic over the learner: what they read of an artifact is its lessons
(``lessons``, the learner's :meth:`~combee_fast.protocols.LearnerKind.lessons`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from combee_fast.config import CombeeConfig, ControllerConfig
from combee_fast.combee.controller import BatchSizeController, IterationMeasurement
from combee_fast.combee.planner import ShapeDecision, ShapePlanner
from combee_fast.methods.base import StepResult, StepShape
from combee_fast.run.rundir import RunDir
from combee_fast.run.step_signals import step_signals

Lessons = Callable[[Any], Sequence[str]]
"""The texts retention looks for in an artifact."""


class ReflectTemperature(Protocol):
    """Where a diversity remedy sets the reflections' temperature (ACE: the run's ``Agents``)."""

    reflect_temperature: float | None

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

    async def observe(self, batch_size: int, result: StepResult[Any], samples_in_epoch: int) -> None:
        return None

    def state(self) -> None:
        """Nothing to checkpoint: the size never changes."""
        return None

    def restore(self, state: None) -> None:
        return None


def step_retention(result: StepResult[Any], lessons: Lessons) -> float:
    """Fraction of the step's distinct insights present among its resulting artifact's lessons."""
    from combee_fast.native.similarity import retention

    return retention(result.insights, list(lessons(result.artifact)))


class ControllerPlan:
    """Asks the controller for each batch size and feeds it each step's time and retention."""

    def __init__(self, controller: BatchSizeController, lessons: Lessons, run_dir: RunDir | None = None) -> None:
        self.controller = controller
        self.lessons = lessons
        self.run_dir = run_dir

    @classmethod
    async def start(cls, config: ControllerConfig, *, capacity: int | None, lessons: Lessons,
                    run_dir: RunDir | None = None) -> ControllerPlan:
        """A controller bounded by ``config.max_batch`` and ``capacity`` (the endpoint's
        running-sequence capacity, when known). Compiles (or loads from cache) the similarity
        kernels off the event loop."""
        from combee_fast.native.similarity import warmup

        await asyncio.to_thread(warmup)
        return cls(BatchSizeController(config, capacity=capacity), lessons, run_dir)

    def next_size(self, remaining: int) -> tuple[int, str]:
        decision = self.controller.next_batch_size()
        if self.run_dir is not None:
            self.run_dir.append_decision(decision)
        return decision.batch_size, decision.reason

    def step_shape(self) -> StepShape | None:
        return None

    async def observe(self, batch_size: int, result: StepResult[Any], samples_in_epoch: int) -> None:
        retention = await asyncio.to_thread(step_retention, result, self.lessons)
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
    steps measured; diversity remedies applied to the reflections' temperature (``knob``) and the
    shuffle. ``workers``: the map's width (the schedule the step's calls ran on);
    ``rollout_role``: the role whose calls are rollouts."""

    def __init__(self, planner: ShapePlanner, *, workers: int, lessons: Lessons, rollout_role: str,
                 knob: ReflectTemperature | None = None, run_dir: RunDir | None = None) -> None:
        self.planner = planner
        self.workers = workers
        self.lessons = lessons
        self.rollout_role = rollout_role
        self.knob = knob
        self.run_dir = run_dir
        self.decision: ShapeDecision | None = None

    @classmethod
    async def start(cls, config: ControllerConfig, combee: CombeeConfig, *, workers: int, lessons: Lessons,
                    rollout_role: str, knob: ReflectTemperature | None = None,
                    run_dir: RunDir | None = None) -> LivePlan:
        """A planner bounded by ``config.max_batch``; compiles the kernels off the loop."""
        from combee_fast.native import warmup

        await asyncio.to_thread(warmup)
        return cls(ShapePlanner(config, combee, upper=config.max_batch), workers=workers, lessons=lessons,
                   rollout_role=rollout_role, knob=knob, run_dir=run_dir)

    def next_size(self, remaining: int) -> tuple[int, str]:
        decision = self.planner.decide(remaining)
        self.decision = decision
        if self.knob is not None and decision.reflect_temperature is not None:
            self.knob.reflect_temperature = decision.reflect_temperature
        if self.run_dir is not None:
            self.run_dir.append_decision(decision)
        return decision.batch_size, decision.reason

    def step_shape(self) -> StepShape | None:
        if self.decision is None:
            return None
        return StepShape(self.decision.max_group, self.decision.duplicates, self.decision.shuffle_salt)

    async def observe(self, batch_size: int, result: StepResult[Any], samples_in_epoch: int) -> None:
        def measure():
            return step_signals(batch_size, result, workers=self.workers, lessons=self.lessons,
                                rollout_role=self.rollout_role, retention=step_retention(result, self.lessons))

        self.planner.record(await asyncio.to_thread(measure))

    def state(self) -> tuple[ShapePlanner, ShapeDecision | None, float | None]:
        """What a checkpoint keeps: the planner, its last decision and the reflections' temperature
        (a diversity remedy may have raised it)."""
        temperature = self.knob.reflect_temperature if self.knob is not None else None
        return self.planner, self.decision, temperature

    def restore(self, state: tuple[ShapePlanner, ShapeDecision | None, float | None]) -> None:
        """Continue from a checkpointed planner (see :meth:`state`)."""
        self.planner, self.decision, temperature = state
        if self.knob is not None:
            self.knob.reflect_temperature = temperature
