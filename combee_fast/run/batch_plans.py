"""Batch plans for the trainer (:class:`~combee_fast.protocols.BatchPlan`): a fixed size, the live
batch-shape planner (``--batch-size auto``, :class:`LivePlan`), the paper's profile-and-fit rule
(``controller.mode = "paper"``, :class:`ControllerPlan`), or the decisions of an earlier run
replayed (``--plan-from RUN/controller.jsonl``, :class:`ReplayedPlan`).

Each step reports its critical-path seconds (simulated seconds on the simulated endpoint) and its
*retention*: the fraction of the distinct insights of the step's records that the artifact holds
after the step (already held or newly applied), the direct symptom of context overload. Every
decision goes to the run directory's ``controller.jsonl`` with its inputs and reason.

The plans are generic over the learner: what they read of an artifact is its lessons
(``lessons``, the learner's :meth:`~combee_fast.protocols.CompleteKind.lessons`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Protocol

import msgspec

from combee_fast.combee.controller import BatchSizeController, ControllerState, IterationMeasurement
from combee_fast.combee.planner import PlannerState, ShapeDecision, ShapePlanner
from combee_fast.config import CombeeConfig, ControllerConfig
from combee_fast.endpoint.batching import BatchingCurve
from combee_fast.engine.slow_wait import said_if_slow
from combee_fast.errors import ConfigError
from combee_fast.files import read_regular
from combee_fast.methods.base import StepResult, StepShape
from combee_fast.protocols.running import DecisionLog
from combee_fast.run.events import Events, KernelsCompiling, NoGo
from combee_fast.run.step_signals import step_signals

Lessons = Callable[[Any], Sequence[str]]
"""The texts retention looks for in an artifact."""


async def compiled(warm: Callable[[], None], events: Events | None) -> None:
    """Run ``warm`` (compile or load Numba's kernels) off the event loop; when it takes longer
    than :data:`~combee_fast.engine.slow_wait.NOTICE_AFTER_S` (a cold cache), emit
    :class:`KernelsCompiling` on ``events`` as the wait begins and again, with its seconds, when
    it ends (:func:`~combee_fast.engine.slow_wait.said_if_slow`)."""
    await said_if_slow(asyncio.to_thread(warm), events, lambda seconds: KernelsCompiling(seconds=seconds))


class DiverseTemperature(Protocol):
    """Where a diversity remedy sets the temperature of the learner's ``diverse`` roles (ACE's
    reflector, GEPA's proposer, TextGrad's gradient): the run's
    :class:`~combee_fast.roles.calls.RoleCalls`."""

    diverse_temperature: float | None

MAX_DUPLICATES = 16
"""The most copies of each record a replayed decision may ask for (the live planner's bound,
``controller.max_duplicates``, is far below it; more is a plan no run made)."""

MAX_TEMPERATURE = 2.0
"""The highest sampling temperature a replayed remedy may set (OpenAI's range)."""


class PlannedStep(msgspec.Struct, frozen=True):
    """One step's decision as ``controller.jsonl`` records it (a live plan's shape, or the paper's
    rule's batch size alone). Decoding checks each value's range (a batch of at least 1, groups
    of at least 1, 1 to :data:`MAX_DUPLICATES` copies, a temperature of 0 to
    :data:`MAX_TEMPERATURE`, a salt of at least 0)."""

    batch_size: Annotated[int, msgspec.Meta(ge=1)]
    reason: str
    max_group: Annotated[int, msgspec.Meta(ge=1)] | None = None
    duplicates: Annotated[int, msgspec.Meta(ge=1, le=MAX_DUPLICATES)] | None = None
    reflect_temperature: Annotated[float, msgspec.Meta(ge=0.0, le=MAX_TEMPERATURE)] | None = None
    shuffle_salt: Annotated[int, msgspec.Meta(ge=0)] = 0


class ReplayedPlan:
    """The decisions of an earlier run, step by step: its batch sizes, group shapes and diversity
    remedies (the reflections' temperature through ``knob``), so a run on a deterministic
    endpoint repeats it without a replay cache. Each decision is written again to this run's
    ``controller.jsonl``. A run needing more steps than the plan has stops with
    :class:`~combee_fast.errors.ConfigError`."""

    state_type = int

    def __init__(self, steps: Sequence[PlannedStep], source: str, *, knob: DiverseTemperature | None = None,
                 run_dir: DecisionLog | None = None) -> None:
        if not steps:
            raise ConfigError(f"{source}: no batch decisions to replay")
        self.steps = tuple(steps)
        self.source = source
        self.knob = knob
        self.run_dir = run_dir
        self.position = 0  # decisions taken so far

    @classmethod
    def load(cls, path: str, *, knob: DiverseTemperature | None = None,
             run_dir: DecisionLog | None = None) -> ReplayedPlan:
        """The decisions in ``path`` (a run's ``controller.jsonl``); :class:`ConfigError` naming the
        file and line when it cannot be read or a line is not a decision."""
        try:
            data = read_regular(path)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the plan: {exc.strerror or exc}") from None
        decoder, steps = msgspec.json.Decoder(PlannedStep), []
        for number, line in enumerate(data.splitlines(), start=1):
            if line.strip():
                try:
                    steps.append(decoder.decode(line))
                except msgspec.MsgspecError as exc:
                    raise ConfigError(f"{path}:{number}: not a batch decision: {exc}") from None
        return cls(steps, path, knob=knob, run_dir=run_dir)

    def next_size(self, remaining: int) -> tuple[int, str]:
        if self.position >= len(self.steps):
            raise ConfigError(f"{self.source} holds {len(self.steps)} batch decisions; this run needs more (is the "
                              "endpoint deterministic, and the configuration the one that made the plan?)")
        step = self.steps[self.position]
        self.position += 1
        if self.knob is not None and step.reflect_temperature is not None:
            self.knob.diverse_temperature = step.reflect_temperature
        if self.run_dir is not None:
            self.run_dir.append_decision(step)
        return step.batch_size, f"replayed: {step.reason}"

    def step_shape(self) -> StepShape | None:
        step = self.steps[self.position - 1] if self.position else None
        if step is None or (step.max_group is None and step.duplicates is None and not step.shuffle_salt):
            return None
        return StepShape(step.max_group, step.duplicates, step.shuffle_salt)

    def predicted_seconds(self) -> float | None:
        return None

    async def observe(self, batch_size: int, result: StepResult[Any], samples_in_epoch: int) -> None:
        return None

    def state(self) -> int:
        """What a checkpoint keeps: how many decisions were taken."""
        return self.position

    def restore(self, state: int) -> None:
        self.position = state
        if self.knob is not None:  # the latest remedy taken stays in force
            temperatures = [s.reflect_temperature for s in self.steps[:state] if s.reflect_temperature is not None]
            if temperatures:
                self.knob.diverse_temperature = temperatures[-1]


class FixedBatch:
    """The same batch size every step."""

    state_type = type(None)

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"batch size must be >= 1, got {size}")
        self.size = size

    def next_size(self, remaining: int) -> tuple[int, str]:
        return self.size, "fixed"

    def step_shape(self) -> StepShape | None:
        return None

    def predicted_seconds(self) -> float | None:
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

    state_type = ControllerState

    def __init__(self, controller: BatchSizeController, lessons: Lessons, run_dir: DecisionLog | None = None) -> None:
        self.controller = controller
        self.lessons = lessons
        self.run_dir = run_dir

    @classmethod
    async def start(cls, config: ControllerConfig, *, capacity: int | None, lessons: Lessons,
                    run_dir: DecisionLog | None = None, events: Events | None = None) -> ControllerPlan:
        """A controller bounded by ``config.max_batch`` and ``capacity`` (the endpoint's
        running-sequence capacity, when known). Compiles (or loads from cache) the similarity
        kernels off the event loop, saying so on ``events`` (:func:`compiled`)."""
        from combee_fast.native.similarity import warmup

        await compiled(warmup, events)
        return cls(BatchSizeController(config, capacity=capacity), lessons, run_dir)

    def next_size(self, remaining: int) -> tuple[int, str]:
        decision = self.controller.next_batch_size()
        if self.run_dir is not None:
            self.run_dir.append_decision(decision)
        return decision.batch_size, decision.reason

    def step_shape(self) -> StepShape | None:
        return None

    def predicted_seconds(self) -> float | None:
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

    def state(self) -> ControllerState:
        """What a checkpoint keeps: the controller's profile, fit, cap and decisions."""
        return self.controller.state()

    def restore(self, state: ControllerState) -> None:
        """Continue from a checkpointed controller (see :meth:`state`)."""
        self.controller.restore(state)

class LivePlanState(msgspec.Struct, frozen=True):
    """What a checkpoint keeps of a :class:`LivePlan`: the planner, its last decision and the
    reflections' temperature (a diversity remedy may have raised it)."""

    planner: PlannerState
    decision: ShapeDecision | None
    reflect_temperature: float | None


class LivePlan:
    """The live planner: every step's batch size and group shape re-planned from what the last
    steps measured; diversity remedies applied to the reflections' temperature (``knob``) and the
    shuffle. ``workers``: the map's width (the schedule the step's calls ran on);
    ``rollout_role``: the role whose calls are rollouts."""

    state_type = LivePlanState

    def __init__(self, planner: ShapePlanner, *, workers: int, lessons: Lessons, rollout_role: str,
                 knob: DiverseTemperature | None = None, run_dir: DecisionLog | None = None,
                 events: Events | None = None) -> None:
        self.planner = planner
        self.workers = workers
        self.lessons = lessons
        self.rollout_role = rollout_role
        self.knob = knob
        self.run_dir = run_dir
        self.events = events
        self.decision: ShapeDecision | None = None

    @classmethod
    async def start(cls, config: ControllerConfig, combee: CombeeConfig, *, workers: int, lessons: Lessons,
                    rollout_role: str, knob: DiverseTemperature | None = None,
                    run_dir: DecisionLog | None = None, events: Events | None = None,
                    probe: BatchingCurve | None = None, in_flight_cap: float = math.inf) -> LivePlan:
        """A planner bounded by ``config.max_batch``, seeded with the start-up probe's curve
        (``probe``; :meth:`ShapePlanner.seed`), knowing the most requests the rollout role's
        endpoint takes at once (``in_flight_cap``); compiles the kernels off the loop, saying so
        on ``events`` (:func:`compiled`)."""
        from combee_fast.native import warmup

        await compiled(warmup, events)
        planner = ShapePlanner(config, combee, upper=config.max_batch, in_flight_cap=in_flight_cap)
        if probe is not None:
            planner.seed(probe)
        return cls(planner, workers=workers, lessons=lessons, rollout_role=rollout_role, knob=knob, run_dir=run_dir,
                   events=events)

    def next_size(self, remaining: int) -> tuple[int, str]:
        """The next step's size and why; the planner's no-go is said once, on ``events``."""
        said = self.planner.no_go is not None and self.decision is not None
        decision = self.planner.decide(remaining)
        self.decision = decision
        if self.planner.no_go is not None and not said and self.events is not None:
            self.events.emit(NoGo(self.planner.no_go))
        if self.knob is not None and decision.reflect_temperature is not None:
            self.knob.diverse_temperature = decision.reflect_temperature
        if self.run_dir is not None:
            self.run_dir.append_decision(decision)
        return decision.batch_size, decision.reason

    def step_shape(self) -> StepShape | None:
        if self.decision is None:
            return None
        return StepShape(self.decision.max_group, self.decision.duplicates, self.decision.shuffle_salt)

    def predicted_seconds(self) -> float | None:
        """The planner's predicted seconds of the step it just sized (none before two steps are measured)."""
        return self.decision.inputs.get("predicted_step_s") if self.decision is not None else None

    async def observe(self, batch_size: int, result: StepResult[Any], samples_in_epoch: int) -> None:
        def measure():
            return step_signals(batch_size, result, workers=self.workers, lessons=self.lessons,
                                rollout_role=self.rollout_role, retention=step_retention(result, self.lessons))

        self.planner.record(await asyncio.to_thread(measure))

    def state(self) -> LivePlanState:
        """What a checkpoint keeps (:class:`LivePlanState`)."""
        temperature = self.knob.diverse_temperature if self.knob is not None else None
        return LivePlanState(self.planner.state(), self.decision, temperature)

    def restore(self, state: LivePlanState) -> None:
        """Continue from a checkpointed planner (see :meth:`state`)."""
        self.planner.restore(state.planner)
        self.decision = state.decision
        if self.knob is not None:
            self.knob.diverse_temperature = state.reflect_temperature
