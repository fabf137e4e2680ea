"""The live planner for GEPA (``gepa.combee_minibatch = "auto"``, or ``--batch-size auto``): each
proposal's minibatch, the reflection groups that follow from it, and (``async-gepa``) how many
proposals are kept in flight, re-planned before every proposal from what the finished ones
measured (:class:`~combee_fast.gepa.measure.ProposalMeasure`, the iterations' own records, so a
replayed run decides the same). No trial minibatch is run: every proposal is a real one.

* **One merge per proposal.** A minibatch of ``b`` examples is reflected on in ``groups(b)``
  augmented-shuffle groups (the paper's ``floor(sqrt(b))``, or more under ``combee.max_group``),
  merged by an aggregation tree of ``max_fan_in``-wide calls. The largest minibatch whose groups
  one aggregation call merges is the *tree bound*: past it a second level of merging drops
  lessons a first one kept.
* **Time.** A proposal on ``b`` examples takes ``S(b)`` simulated seconds from start to end,
  fitted as a line over the finished proposals; the plan is the smallest ``b`` within
  ``time_slack`` of the fastest predicted seconds per example up to the bounds (with ``S``
  flat in ``b``, that is the bound).
* **Endpoint capacity.** Each grading task's seconds against the metric calls in flight when it
  started (its own included) are fitted as a line ``a + c * load``; where calls slow with load,
  the endpoint is full at the load where its throughput ``load / (a + c * load)`` reaches
  ``saturation`` of its ceiling. Minibatch and proposals in flight are kept below that load.
* **Merge quality.** The fraction of the lines a proposal's reflections proposed that its merged
  child kept (EMA over proposals) below ``retention_floor`` caps the minibatch at
  ``shrink_factor`` times the one that produced it; ``recover_after`` healthy proposals undo one notch.
* **Staleness** (``async-gepa``). The lines the latest accepted children added, and how many of
  them the pool's best candidate holds (*pool retention*): work done on a branch the search left
  behind is lost. Below ``retention_floor`` one proposal fewer is kept in flight; after
  ``recover_after`` healthy proposals one more, up to ``gepa.pipeline.proposals``. The search
  starts with two in flight.

Every decision keeps its inputs and reason (``controller.jsonl``); the histories are bounded.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Any

import msgspec

from combee_fast.combee.latency_curve import fit_line
from combee_fast.config import CombeeConfig, ControllerConfig
from combee_fast.engine.kept import capture, restore_into
from combee_fast.gepa.measure import ProposalMeasure
from combee_fast.gepa.pool import GepaState
from combee_fast.methods.base import StepResult, StepShape
from combee_fast.record.rundir import RunDir

ACCEPTED_KEPT = 8
"""Accepted children whose added lines pool retention is measured over."""

START_IN_FLIGHT = 2
"""Proposals in flight before anything is measured."""


class GepaDecision(msgspec.Struct, frozen=True):
    """One proposal's shape: its minibatch, its reflection groups' shape, the proposals kept in
    flight (1 for the synchronous methods), and why."""

    batch_size: int
    max_group: int | None
    duplicates: int
    in_flight: int
    reason: str
    inputs: dict[str, float]


def reflection_groups(minibatch: int, duplicates: int, max_group: int | None) -> int:
    """How many reflection calls :func:`~combee_fast.combee.shuffle.augmented_groups` makes of a
    minibatch of ``minibatch`` examples."""
    groups = max(1, math.isqrt(minibatch))
    if max_group is not None:
        groups = max(groups, -(-minibatch * duplicates // max_group))
    return groups


class GepaPlannerState(msgspec.Struct, frozen=True):
    """What a checkpoint keeps of a :class:`GepaPlanner` (everything not derived from its configuration)."""

    decisions: tuple[GepaDecision, ...]
    _latency: tuple[tuple[float, float], ...]
    _load: tuple[tuple[float, float], ...]
    _accepted: tuple[tuple[str, ...], ...]
    _merge: float | None
    _pool: float | None
    _cap: int
    _in_flight: int
    _healthy: int
    _problems: tuple[str, ...]


class GepaPlanState(msgspec.Struct, frozen=True):
    """What a checkpoint keeps of a :class:`GepaPlan`: the planner and its last decision."""

    planner: GepaPlannerState
    decision: GepaDecision | None


class GepaPlanner:
    """Decides each proposal's :class:`GepaDecision`; call :meth:`decide`, run it, :meth:`record`.
    ``in_flight_ceiling``: the most proposals the method runs at once (1: synchronous)."""

    def __init__(self, config: ControllerConfig, combee: CombeeConfig, *, in_flight_ceiling: int) -> None:
        self.config = config
        self.combee = combee
        self.ceiling = in_flight_ceiling
        self.lower, self.upper = config.min_batch, max(config.min_batch, config.max_batch)
        self.decisions: deque[GepaDecision] = deque(maxlen=config.history)
        self._latency: deque[tuple[float, float]] = deque(maxlen=16)  # (minibatch, proposal seconds)
        self._load: deque[tuple[float, float]] = deque(maxlen=64)  # (metric calls in flight, grading task seconds)
        self._accepted: deque[tuple[str, ...]] = deque(maxlen=ACCEPTED_KEPT)
        self._merge: float | None = None  # EMA of the merge retention
        self._pool: float | None = None  # the latest pool retention
        self._cap = self.upper
        self._in_flight = min(START_IN_FLIGHT, in_flight_ceiling)
        self._healthy = 0
        self._problems: list[str] = []

    def state(self) -> GepaPlannerState:
        return capture(self, GepaPlannerState)

    def restore(self, state: GepaPlannerState) -> None:
        restore_into(self, state)

    # -- measuring -----------------------------------------------------------------------------

    def record(self, measures: Sequence[ProposalMeasure], pool: GepaState) -> None:
        """Learn from the proposals that just ended, with ``pool`` the pool after them."""
        if not measures:
            return
        decay = self.config.recency_decay
        for m in measures:
            if m.latency > 0:
                self._latency.append((float(m.minibatch), m.latency))
            seconds = m.seconds
            for stage, load in m.loads.items():
                if seconds.get(stage, 0.0) > 0:
                    self._load.append((float(load), seconds[stage]))
            if m.retention is not None:
                self._merge = m.retention if self._merge is None else decay * self._merge + (1 - decay) * m.retention
            if m.outcome == "accepted" and m.added:
                self._accepted.append(m.added)
        if self._accepted:
            lines = set().union(*self._accepted)
            held = set(pool.best().render().split("\n"))
            self._pool = len(lines & held) / len(lines)
        self._guard(measures)

    def _guard(self, measures: Sequence[ProposalMeasure]) -> None:
        config, problems = self.config, []
        if self._merge is not None and self._merge < config.retention_floor:
            problems.append(f"the merges kept {self._merge:.2f} of the lines the reflections proposed "
                            f"(floor {config.retention_floor:.2f})")
            batch = max(m.minibatch for m in measures)
            self._cap = max(self.lower, min(self._cap, math.floor(batch * config.shrink_factor)))
        stale = self.ceiling > 1 and self._pool is not None and self._pool < config.retention_floor
        if stale:
            problems.append(f"the pool's best holds {self._pool:.2f} of the lines its latest accepted children "
                            f"added (floor {config.retention_floor:.2f}): work on branches left behind")
            self._in_flight = max(1, self._in_flight - 1)
        self._problems = problems
        if problems:
            self._healthy = 0
            return
        self._healthy += len(measures)
        if self._healthy >= config.recover_after:
            self._healthy = 0
            self._cap = min(self.upper, math.ceil(self._cap / config.shrink_factor))
            self._in_flight = min(self.ceiling, self._in_flight + 1)

    # -- deciding ------------------------------------------------------------------------------

    def tree_bound(self) -> int:
        """The largest minibatch whose reflections one aggregation call merges."""
        fan_in, duplicates, max_group = self.combee.max_fan_in, self.combee.duplicates, self.combee.max_group
        b = self.lower
        while b < self.upper and reflection_groups(b + 1, duplicates, max_group) <= fan_in:
            b += 1
        return b

    def capacity(self) -> float:
        """Metric calls in flight at which the endpoint's throughput reaches ``saturation`` of its
        ceiling (``inf`` when gradings do not slow with load, or too little was measured)."""
        line = fit_line(list(self._load), self.config.recency_decay)
        if line is None or line[1] <= 1e-12 * max(line[0], 1e-9):
            return math.inf
        base, slope = line
        saturation = self.config.saturation
        return saturation / (1.0 - saturation) * max(base, 1e-9) / slope

    def decide(self, remaining: int) -> GepaDecision:
        """The next proposal's shape; ``remaining`` examples wait in the epoch (logged only:
        GEPA's minibatches run on into the next epoch)."""
        tree = self.tree_bound()
        capacity = self.capacity()
        hi = min(tree, self._cap)
        inputs: dict[str, float] = {"remaining": float(remaining), "tree_bound": float(tree), "cap": float(self._cap)}
        reasons = [f"one aggregation call merges the reflections of up to {tree} examples"]
        if math.isfinite(capacity):
            inputs["capacity_in_flight"] = capacity
            if capacity < hi:
                hi = max(self.lower, _floor(capacity))
                reasons.append(f"the endpoint fills at ~{capacity:.0f} metric calls in flight")
        batch = self._knee(hi, inputs)
        if batch < hi:
            reasons.append(f"{batch} is within {self.config.time_slack:.0%} of the fastest seconds per example")
        if self._cap < tree:
            reasons.append(f"capped at {self._cap} by the merge-quality guard")
        in_flight = self._in_flight
        if math.isfinite(capacity) and in_flight > 1:
            fits = max(1, _floor(capacity / batch))
            if fits < in_flight:
                in_flight = fits
                reasons.append(f"{in_flight} proposal(s) in flight fill the endpoint")
        if self.ceiling > 1:
            reasons.append(f"{in_flight} proposal(s) in flight")
        for name, value in (("merge_retention", self._merge), ("pool_retention", self._pool)):
            if value is not None:
                inputs[name] = value
        inputs.update(in_flight=float(in_flight), groups=float(reflection_groups(batch, self.combee.duplicates,
                                                                                self.combee.max_group)))
        reason = "; ".join(reasons) + ("; quality: " + "; ".join(self._problems) if self._problems else "")
        decision = GepaDecision(batch, self.combee.max_group, self.combee.duplicates, in_flight,
                                ("plan: " if self._latency else "start: nothing measured yet; ") + reason, inputs)
        self.decisions.append(decision)
        return decision

    def _knee(self, hi: int, inputs: dict[str, float]) -> int:
        """The smallest minibatch up to ``hi`` whose predicted seconds per example are within
        ``time_slack`` of the best (``hi`` until two minibatch sizes were measured)."""
        line = fit_line(list(self._latency), self.config.recency_decay)
        if line is None:
            return max(self.lower, hi)
        base, slope = line
        inputs.update(latency_s=base, latency_s_per_example=slope)
        per_example = {b: (base + slope * b) / b for b in range(self.lower, max(self.lower, hi) + 1)}
        best = min(per_example.values())
        return min(b for b, t in per_example.items() if t <= (1 + self.config.time_slack) * best)


def _floor(value: float) -> int:
    """``floor`` that does not lose a whole unit to rounding (a fit's 39.99999... is 40)."""
    return math.floor(value + 1e-9)


class GepaPlan:
    """The planner as the run loop's :class:`~combee_fast.protocols.BatchPlan`: every decision
    goes to the run directory's ``controller.jsonl``."""

    state_type = GepaPlanState

    def __init__(self, planner: GepaPlanner, run_dir: RunDir | None = None) -> None:
        self.planner = planner
        self.run_dir = run_dir
        self.decision: GepaDecision | None = None

    def next_size(self, remaining: int) -> tuple[int, str]:
        self.decision = self.planner.decide(remaining)
        if self.run_dir is not None:
            self.run_dir.append_decision(self.decision)
        return self.decision.batch_size, self.decision.reason

    def step_shape(self) -> StepShape | None:
        if self.decision is None:
            return None
        in_flight = self.decision.in_flight if self.planner.ceiling > 1 else None
        return StepShape(self.decision.max_group, self.decision.duplicates, in_flight=in_flight)

    def predicted_seconds(self) -> float | None:
        return None

    async def observe(self, batch_size: int, result: StepResult[Any], samples_in_epoch: int) -> None:
        measures = [report.measure for report in result.reports if report.measure is not None]
        self.planner.record(measures, result.artifact)

    def state(self) -> GepaPlanState:
        """What a checkpoint keeps: the planner and its last decision."""
        return GepaPlanState(self.planner.state(), self.decision)

    def restore(self, state: GepaPlanState) -> None:
        self.planner.restore(state.planner)
        self.decision = state.decision
