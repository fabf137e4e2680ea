"""GEPA's step: one search iteration over a minibatch, as a :class:`~combee_fast.protocols.Method`
of the run loop (:mod:`combee_fast.run.train`).

Before the first minibatch (:meth:`GepaIteration.start`) the seed candidate is graded on the
validation set and becomes the pool's first candidate. Then each step:

1. draws a parent from the Pareto pool (seed path ``("gepa", "parent", iteration)``) and picks
   its component round-robin;
2. grades the parent on the step's minibatch (its items, in the epoch order every method uses;
   a minibatch may run on into the next epoch);
3. if it already scores 1 on every example (and ``skip_perfect``), stops here;
4. proposes the component's new text (the method's :class:`~combee_fast.gepa.reflection.Reflection`);
5. grades the child on the same minibatch; accepts it only when its total is strictly higher;
6. grades an accepted child on the whole validation set and adds it to the pool.

Every grading of a candidate on one example is one metric call; the run stops once the budget is
spent (:class:`~combee_fast.gepa.stops.MetricCallBudget`). Gradings of one set run ``workers`` at
once (a child's validation longest first, by its parent's model seconds on each instance: see
:func:`grade`); a phase's time is its critical path in simulated seconds (with, for agent episodes, the
environment's seconds), and an iteration's time is the sum of its phases. Deterministic given the
seed and the endpoint's answers.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import msgspec

from combee_fast.gepa.settings import GepaConfig
from combee_fast.engine.rng import rng_at
from combee_fast.engine.stream import indexed_map
from combee_fast.engine.timing import finish_times
from combee_fast.gepa.calls import GepaCalls
from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.learner import ComponentText, GepaProposer
from combee_fast.gepa.measure import ProposalMeasure, added_lines, line_retention
from combee_fast.gepa.pool import GepaState, PoolChange
from combee_fast.gepa.reflection import Reflection
from combee_fast.methods.base import StepResult, StepShape, StepsOnly
from combee_fast.schema import Example, GradedAnswer, Proposal


class Graded(msgspec.Struct, frozen=True):
    """One candidate graded on a set of examples: every evaluation and the critical path
    (``sim_seconds``: the solves' model seconds, and the environment seconds of episodes;
    ``env_seconds``: how much longer that path is than the model seconds' alone)."""

    evaluations: tuple[GradedAnswer, ...]
    sim_seconds: float
    env_seconds: float = 0.0

    @property
    def model_seconds(self) -> float:
        """The critical path of the solves' model seconds alone."""
        return self.sim_seconds - self.env_seconds

    @property
    def total(self) -> float:
        return sum(e.score for e in self.evaluations)

    @property
    def scores(self) -> tuple[float, ...]:
        return tuple(e.score for e in self.evaluations)


class Solves(msgspec.Struct, frozen=True):
    """One candidate's solves of a set of examples, run ``workers`` at once in a given order:
    each evaluation (in example order) and when it ended in that run, with its episode's
    environment seconds (``ended``) and on model seconds alone (``model_ended``)."""

    evaluations: tuple[GradedAnswer, ...]
    ended: tuple[float, ...]
    model_ended: tuple[float, ...]

    def graded(self, indices: Sequence[int] | None = None, *, after: Graded | None = None) -> Graded:
        """The grading of the examples at ``indices`` (all: None), in that order; ``after``: a
        grading of some of them that ended first, whose time this one does not count again."""
        chosen = range(len(self.evaluations)) if indices is None else indices
        evaluations = tuple(self.evaluations[i] for i in chosen)
        path = max((self.ended[i] for i in chosen), default=0.0) - (after.sim_seconds if after else 0.0)
        if not any(e.trajectory is not None for e in evaluations):
            return Graded(evaluations, max(0.0, path))
        model = max((self.model_ended[i] for i in chosen), default=0.0) - (after.model_seconds if after else 0.0)
        return Graded(evaluations, max(0.0, path), max(0.0, path - max(0.0, model)))


async def solve_in_order(calls: GepaCalls, candidate: Candidate, examples: Sequence[Example], order: Sequence[int], *,
                         workers: int) -> Solves:
    """``candidate``'s solves of ``examples``, started in ``order`` (indices), ``workers`` at once."""
    async def one(_: int, example: Example) -> GradedAnswer:
        return await calls.solve_candidate(example, candidate)

    started = await indexed_map([examples[i] for i in order], one, concurrency=workers)
    ended = finish_times([e.sim_seconds for e in started], workers)
    model_ended = finish_times([e.usage.effective_latency_s for e in started], workers)
    evaluations: list[GradedAnswer] = list(started)
    by_index, model_by_index = list(ended), list(model_ended)
    for position, index in enumerate(order):
        evaluations[index], by_index[index], model_by_index[index] = \
            started[position], ended[position], model_ended[position]
    return Solves(tuple(evaluations), tuple(by_index), tuple(model_by_index))


async def grade(calls: GepaCalls, candidate: Candidate, examples: Sequence[Example], *, workers: int,
                expected: Sequence[float] | None = None) -> Graded:
    """``candidate`` graded on every example, ``workers`` solves at once, started in example
    order, or longest first when ``expected`` gives each example's expected seconds (those of
    the candidate it was made from: the solves of one example take alike long, so the long ones
    no longer start last and hold the set up); the evaluations are in example order either way."""
    order = start_order(expected, len(examples))
    return (await solve_in_order(calls, candidate, examples, order, workers=workers)).graded()


def start_order(expected: Sequence[float] | None, count: int) -> list[int]:
    """The order a grading of ``count`` examples starts its solves in: longest first by
    ``expected`` when it gives each example's seconds, else example order."""
    return longest_first(expected) if expected is not None and len(expected) == count else list(range(count))


def longest_first(seconds: Sequence[float]) -> list[int]:
    """The indices of ``seconds``, longest first (ties: in index order)."""
    return sorted(range(len(seconds)), key=lambda i: (-seconds[i], i))


async def grade_seed(calls: GepaCalls, artifact: GepaState, val: Sequence[Example], *,
                     workers: int) -> StepResult[GepaState] | None:
    """The work before GEPA's first minibatch: the seed graded on the validation set becomes the
    pool's first candidate (None: the pool already has it)."""
    if artifact.candidates:
        return None
    started = time.perf_counter()
    graded = await grade(calls, artifact.seed, val, workers=workers)
    state = artifact.with_candidate(artifact.seed, graded.evaluations).spent(0, len(graded.evaluations))
    return StepResult(
        state, (PoolChange("seeded", added_ids=(0,)),), graded.evaluations, (), graded.sim_seconds,
        time.perf_counter() - started, (), (), validation=state.validation(),
    )


class GepaIteration(StepsOnly):
    """GEPA's iteration with one reflection strategy, named ``name`` in ledgers and summaries."""

    batches_span_epochs = True

    def __init__(self, name: str, calls: GepaCalls, reflection: Reflection, val: Sequence[Example], *,
                 config: GepaConfig, seed: int, workers: int) -> None:
        if not val:
            raise ValueError("GEPA needs at least one validation example")
        self.name = name
        self.calls = calls
        self.reflection = reflection
        self.val = tuple(val)
        self.config = config
        self.seed = seed
        self.workers = workers

    async def start(self, artifact: GepaState) -> StepResult[GepaState] | None:
        """Grade the seed on the validation set: the pool's first candidate (None: already graded)."""
        return await grade_seed(self.calls, artifact, self.val, workers=self.workers)

    async def step(
        self, items: Sequence[Any], artifact: GepaState, *, epoch: int, step: int, shape: StepShape | None = None
    ) -> StepResult[GepaState]:
        """One iteration on the minibatch ``items`` (module docstring); ``shape`` is ignored."""
        started = time.perf_counter()
        iteration = artifact.iterations
        pool = artifact.pool()
        parent_index = pool.sample_parent(rng_at(self.seed, "gepa", "parent", iteration))
        parent = artifact.candidates[parent_index]
        names = parent.names()
        component = names[iteration % len(names)]
        graded = [await grade(self.calls, parent, items, workers=self.workers)]
        state, reflect_seconds = artifact, 0.0
        proposals: tuple[Proposal[ComponentText], ...] = ()
        change, child_text = PoolChange("perfect"), None
        if not (self.config.skip_perfect and all(e.score >= 1.0 for e in graded[0].evaluations)):
            reflected = await self.reflection.reflect(
                GepaProposer(self.calls, component), parent.components[component], list(graded[0].evaluations),
                iteration=iteration,
            )
            proposals, reflect_seconds = reflected.calls, reflected.sim_seconds
            change = PoolChange("no-proposal")
            if reflected.text is not None:
                child = parent.replaced(component, reflected.text, parent=parent_index)
                child_text = reflected.text
                graded.append(await grade(self.calls, child, items, workers=self.workers))
                change = PoolChange("rejected", rejected=(len(state.candidates),))
                if graded[-1].total > graded[0].total:
                    graded.append(await grade(self.calls, child, self.val, workers=self.workers,
                                              expected=artifact.seconds_of(parent_index)))
                    state = state.with_candidate(child, graded[-1].evaluations)
                    change = PoolChange("accepted", added_ids=(len(state.candidates) - 1,))
        evaluations = tuple(e for g in graded for e in g.evaluations)
        state = state.spent(1, len(evaluations))
        sim_seconds = sum(g.sim_seconds for g in graded) + reflect_seconds
        measure = _measure(iteration, parent_index, len(items), change.outcome, parent.components[component], proposals,
                           child_text, graded, reflect_seconds, sim_seconds)
        return StepResult(
            state, (msgspec.structs.replace(change, measure=measure),), evaluations, tuple(proposals), sim_seconds,
            time.perf_counter() - started, (), (), rewards=graded[0].scores, validation=state.validation(),
        )


def _measure(iteration: int, parent: int, minibatch: int, outcome: str, base: str, calls: Sequence[Any],
             child: str | None, graded: Sequence[Graded], reflect_seconds: float, latency: float) -> ProposalMeasure:
    """What one synchronous iteration measured (its reflection and merge timed as one stage)."""
    reflections = [call for call in calls if call.source.startswith("proposer")]
    proposed, kept = line_retention(base, [edit.text for call in reflections for edit in call.edits], child)
    stages = ("grade", "screen", "validate")[: len(graded)]
    durations = [(stages[0], graded[0].sim_seconds)] + ([("reflect", reflect_seconds)] if calls else [])
    durations += [(stage, g.sim_seconds) for stage, g in zip(stages[1:], graded[1:])]
    spans, at = {}, 0.0
    for stage, seconds in durations:
        spans[stage] = (at, at + seconds)
        at += seconds
    return ProposalMeasure(
        iteration=iteration, minibatch=minibatch, outcome=outcome, groups=len(reflections), proposed=proposed,
        kept=kept, spans=spans, latency=latency,
        gain=graded[1].total - graded[0].total if len(graded) > 1 else None,
        loads={stage: len(g.evaluations) for stage, g in zip(stages, graded)},
        added=added_lines(base, child) if outcome == "accepted" and child is not None else (), drawn=parent,
        parent=parent,
    )
