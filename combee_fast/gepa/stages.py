"""The stages of one asynchronous GEPA proposal, and what each does (:mod:`.pipeline` runs them).

    grade       the parent on the proposal's minibatch                       (metric calls)
    reflect     the reflection calls over the graded minibatch (the map)
    aggregate   their rewrites merged into one child text (the reduce)
    screen      the child (and the rival a stale child was rebased onto) on the minibatch (metric calls)
    validate    an accepted child on the validation set                      (metric calls)

A :class:`Proposal` is plain data: its minibatch, the pool version and parent it was drawn from,
the metric calls still reserved for it, and each stage's result once known. Every stage's work
is a function of the proposal's earlier results alone (seeded by path, as in the synchronous
loop: iteration ``iteration``'s parent draw, shuffle and reflection seeds), so it may run as soon
as its inputs exist, whatever the other proposals are doing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import msgspec

from combee_fast.gepa.calls import GepaCalls
from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.iteration import Graded, grade, solve_in_order, start_order
from combee_fast.gepa.learner import GepaProposer
from combee_fast.gepa.pool import GepaState
from combee_fast.gepa.reflection import Mapped, Reflected, Reflection
from combee_fast.methods.base import StepShape
from combee_fast.schema import Example, GradedAnswer

STAGES = ("grade", "reflect", "aggregate", "screen", "validate")
"""The stages, in the order a proposal goes through them."""

GRADING_STAGES = frozenset({"grade", "screen", "validate"})
"""The stages that make metric calls."""


class Screened(msgspec.Struct, frozen=True):
    """The child graded on its minibatch, and the rival it was rebased onto and must beat (None:
    its parent, graded before); ``validation``: a speculated screening's rest, the child's
    validation once its minibatch ended (:attr:`~combee_fast.gepa.settings.PipelineConfig.speculate`)."""

    child: Graded
    rival: Graded | None = None
    validation: Graded | None = None

    @property
    def sim_seconds(self) -> float:
        return max(self.child.sim_seconds, self.rival.sim_seconds if self.rival is not None else 0.0)

    @property
    def env_seconds(self) -> float:
        """How much longer the screening is with its episodes' environment seconds."""
        model = max(self.child.model_seconds, self.rival.model_seconds if self.rival is not None else 0.0)
        return max(0.0, self.sim_seconds - model)


class Proposal(msgspec.Struct, kw_only=True):
    """One proposal in flight: iteration ``iteration`` on ``items``, its parent (pool index
    ``parent``, drawn from pool version ``proposed_at``) and the ``component`` it rewrites.

    ``reserved``: metric calls still promised to it; ``dispatched``: stages whose work was started
    (their metric calls spent); ``spans``: each stage's ``(start, end)`` in simulated seconds;
    ``delays``: the environment delay each stage task in flight started with, and ``chain``
    the one its latest ended stage ended with (or it was started with: :mod:`.delays`);
    ``waited``: simulated seconds spent queued for slots; ``loads``: per grading stage, the metric
    calls in flight in simulated time when its task started (its own included); ``staleness``: candidates that joined
    the pool between its parent's draw and its screening. The results: ``graded`` (parent on the
    minibatch), ``mapped``, ``reflected``, ``child``, ``rival`` (the candidate a stale child is
    also screened against), ``screened``, ``validated``. ``joined``: the pool indices of the
    candidates it added so far (its child, then the merges of it validated after it: ``child``
    is then the merge being validated); ``based_at``: the pool version its child's base was
    taken from (the parent's draw, the rival's screening, a merge's decision). ``closing``: the
    search's closing merge (no minibatch: its ``child`` is only validated). ``held``: an
    accepted child whose validation waits for the seed's to end (it then joins after the seed).
    ``speculated``: its screening is the start of its validation (:class:`Screened`).
    """

    iteration: int
    items: tuple[Example, ...]
    proposed_at: int
    parent: int
    component: str
    shape: StepShape | None
    reserved: int
    started_at: float
    dispatched: list[str] = msgspec.field(default_factory=list)
    spans: dict[str, tuple[float, float]] = msgspec.field(default_factory=dict)
    delays: dict[str, float] = msgspec.field(default_factory=dict)
    chain: float = 0.0
    waited: float = 0.0
    loads: dict[str, int] = msgspec.field(default_factory=dict)
    staleness: int = 0
    graded: Graded | None = None
    mapped: Mapped | None = None
    reflected: Reflected | None = None
    child: Candidate | None = None
    rival: int | None = None
    screened: Screened | None = None
    validated: Graded | None = None
    joined: list[int] = msgspec.field(default_factory=list)
    based_at: int = 0
    closing: bool = False
    held: bool = False
    speculated: bool = False

    def result(self, stage: str) -> Any:
        """The result of ``stage`` (None: not known yet)."""
        return getattr(self, _RESULT_FIELD[stage])

    def keep(self, stage: str, result: Any) -> None:
        setattr(self, _RESULT_FIELD[stage], result)


_RESULT_FIELD = {"grade": "graded", "reflect": "mapped", "aggregate": "reflected", "screen": "screened",
                 "validate": "validated"}


class StageWork:
    """What each stage does, on ``calls`` with ``reflection``; gradings run ``workers`` solves at
    once; ``val`` is the validation set; ``skip_perfect`` as in :class:`~combee_fast.gepa.settings.GepaConfig`."""

    def __init__(self, calls: GepaCalls, reflection: Reflection, val: Sequence[Example], *, workers: int,
                 skip_perfect: bool) -> None:
        self.calls = calls
        self.reflection = reflection
        self.val = tuple(val)
        self._val_index = {example.id: i for i, example in enumerate(self.val)}
        self.workers = workers
        self.skip_perfect = skip_perfect

    def metric_calls(self, stage: str, proposal: Proposal) -> int:
        """The metric calls ``stage`` makes for ``proposal`` (0 for the reflection stages; a
        speculated screening makes the validation's, and the validation none)."""
        if stage == "validate":
            return 0 if proposal.speculated else len(self.val)
        if stage == "screen":
            return len(self.val) if proposal.speculated else len(proposal.items) * (1 if proposal.rival is None else 2)
        return len(proposal.items) if stage == "grade" else 0

    def covers(self, items: Sequence[Example]) -> bool:
        """Every one of ``items`` is a validation example (a screening on them may begin the
        validation)."""
        return all(item.id in self._val_index for item in items)

    def worst_case(self, minibatch: int, *, rescreens: bool) -> int:
        """The most metric calls a proposal on ``minibatch`` examples can make."""
        return minibatch * (3 if rescreens else 2) + len(self.val)

    async def run(self, stage: str, proposal: Proposal, pool: GepaState,
                  expected: Sequence[float] | None = None) -> Any:
        """``stage``'s work for ``proposal``; ``pool`` holds the candidates it names; a validation
        starts its solves longest first by ``expected`` (:func:`~combee_fast.gepa.iteration.grade`)."""
        parent = pool.candidate(proposal.parent)
        if stage == "grade":
            return await grade(self.calls, parent, proposal.items, workers=self.workers)
        proposer = GepaProposer(self.calls, proposal.component)
        current = parent.components[proposal.component]
        if stage == "reflect":
            assert proposal.graded is not None
            return await self.reflection.map(proposer, current, proposal.graded.evaluations,
                                             iteration=proposal.iteration, shape=proposal.shape)
        if stage == "aggregate":
            assert proposal.mapped is not None
            return await self.reflection.reduce(proposer, current, proposal.mapped, iteration=proposal.iteration)
        assert proposal.child is not None
        if stage == "screen" and proposal.speculated:
            return await self._speculate(proposal, expected)
        if stage == "screen":
            if proposal.rival is None:
                return Screened(await grade(self.calls, proposal.child, proposal.items, workers=self.workers))
            child, rival = await asyncio.gather(
                grade(self.calls, proposal.child, proposal.items, workers=self.workers),
                grade(self.calls, pool.candidates[proposal.rival], proposal.items, workers=self.workers))
            return Screened(child, rival)
        if proposal.speculated and proposal.screened is not None and proposal.screened.validation is not None:
            return proposal.screened.validation  # begun with the screening
        return await grade(self.calls, proposal.child, self.val, workers=self.workers, expected=expected)

    async def _speculate(self, proposal: Proposal, expected: Sequence[float] | None) -> Screened:
        """The child graded on the whole validation set, its minibatch first, then the rest
        longest first by ``expected``: the minibatch's solves are its screening, the rest (timed
        from the screening's end) its validation."""
        assert proposal.child is not None
        first = [self._val_index[item.id] for item in proposal.items]  # a minibatch run on into the next epoch
        taken = list(dict.fromkeys(first))                               # may repeat one
        rest = start_order(expected, len(self.val))
        solves = await solve_in_order(self.calls, proposal.child, self.val, taken + [i for i in rest if i not in taken],
                                      workers=self.workers)
        screening = solves.graded(first)
        return Screened(screening, validation=solves.graded(after=screening))

    def perfect(self, proposal: Proposal) -> bool:
        """The parent already scores 1 on the whole minibatch (and perfect parents are skipped)."""
        assert proposal.graded is not None
        return self.skip_perfect and all(e.score >= 1.0 for e in proposal.graded.evaluations)

    def counted(self, stage: str, proposal: Proposal, result: Any) -> list[GradedAnswer]:
        """The metric calls ``stage``'s ``result`` holds for ``proposal``, as evaluations (a
        speculated screening's are the whole validation's, so its validation holds none)."""
        if stage == "screen":
            if result.validation is not None:
                return list(result.validation.evaluations)
            return [*result.child.evaluations, *(result.rival.evaluations if result.rival else ())]
        return [] if stage == "validate" and proposal.speculated else list(result.evaluations)

    def accepted(self, proposal: Proposal) -> bool:
        """The child's minibatch total beats its parent's (its rival's, when it was rebased onto one)."""
        assert proposal.graded is not None and proposal.screened is not None
        screened = proposal.screened
        against = screened.rival if screened.rival is not None else proposal.graded
        return screened.child.total > against.total


def duration(result: Any) -> float:
    """The simulated seconds a stage's result takes in the schedule: its critical path in model
    seconds (every result carries its critical path, and a grading of episodes how much of it
    the environment took: :func:`env_delay`)."""
    return float(result.sim_seconds) - env_delay(result)


def env_delay(result: Any) -> float:
    """The seconds a stage's result took in its episodes' environments on top of its model
    seconds (0 for a stage of model calls alone). Real seconds, which differ from run to run:
    they lengthen the search's reported time, never its decisions."""
    return float(getattr(result, "env_seconds", 0.0))
