"""How a child's text is proposed from the parent's graded minibatch: one strategy per class.

- :class:`SerialReflection` (methods ``gepa`` and ``naive``): one reflection call over the whole minibatch.
- :class:`CombeeReflection` (method ``combee-gepa``): Combee's map and reduce. The graded
  examples are cut into augmented-shuffle groups (:func:`combee_fast.combee.shuffle.augmented_groups`),
  one reflection call per group, all in flight at once against the same parent, then the
  aggregation tree (:func:`combee_fast.combee.reduce.reduce_tree`, aggregation calls of at most
  ``max_fan_in`` rewrites each) merges their rewrites into one. A failed aggregation falls back to
  the first rewrite it was given.

Both return the proposed text (``None``: nothing new) and every call made, with the phase's
critical path in simulated seconds. Each also comes in two halves, :meth:`~Reflection.map` (the
reflection calls) and :meth:`~Reflection.reduce` (merging what they proposed), which the
asynchronous pipeline (:mod:`.pipeline`) runs as two stages; ``reflect`` is the one followed by
the other. A :class:`~combee_fast.methods.base.StepShape` overrides the shuffle's shape for one
iteration (records per group, copies per record, a salted seed path).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

import msgspec

from combee_fast.combee.reduce import reduce_tree
from combee_fast.combee.shuffle import augmented_groups
from combee_fast.config import CombeeConfig
from combee_fast.engine.rng import rng_at
from combee_fast.gepa.learner import ComponentText, GepaProposer
from combee_fast.methods.base import StepShape
from combee_fast.schema import GradedAnswer, Proposal


class Mapped(msgspec.Struct, frozen=True):
    """The map half of a reflection: every reflection call, in group order, its critical path and
    how many graded examples each call read."""

    calls: tuple[Proposal[ComponentText], ...]
    sim_seconds: float
    records: tuple[int, ...] = ()


class Reflected(msgspec.Struct, frozen=True):
    """A reflection phase: the proposed text (None: none), every call, its critical path."""

    text: str | None
    calls: tuple[Proposal[ComponentText], ...]
    sim_seconds: float


class Reflection(Protocol):
    """Proposes one component's new text from the parent's graded minibatch."""

    async def map(
        self, learner: GepaProposer, current: str, evaluations: Sequence[GradedAnswer], *, iteration: int,
        shape: StepShape | None = None,
    ) -> Mapped:
        """The reflection calls over the graded ``evaluations``."""
        ...

    async def reduce(self, learner: GepaProposer, current: str, mapped: Mapped, *, iteration: int) -> Reflected:
        """What the calls of ``mapped`` proposed, merged into one text (its calls: the merges only)."""
        ...

    async def reflect(
        self, learner: GepaProposer, current: str, evaluations: Sequence[GradedAnswer], *, iteration: int
    ) -> Reflected: ...


def _text(edits: Sequence[ComponentText]) -> str | None:
    return edits[0].text if edits else None


class SerialReflection:
    """GEPA's own reflection: one call reading every graded example of the minibatch (its reduce
    makes no call)."""

    async def map(
        self, learner: GepaProposer, current: str, evaluations: Sequence[GradedAnswer], *, iteration: int,
        shape: StepShape | None = None,
    ) -> Mapped:
        proposal = await learner.propose(
            evaluations, None, current, source="proposer[0]", seed_path=(iteration, 0)
        )
        return Mapped((proposal,), proposal.usage.effective_latency_s, (len(evaluations),))

    async def reduce(self, learner: GepaProposer, current: str, mapped: Mapped, *, iteration: int) -> Reflected:
        return Reflected(_text(mapped.calls[0].edits), (), 0.0)

    async def reflect(
        self, learner: GepaProposer, current: str, evaluations: Sequence[GradedAnswer], *, iteration: int
    ) -> Reflected:
        mapped = await self.map(learner, current, evaluations, iteration=iteration)
        return Reflected(_text(mapped.calls[0].edits), mapped.calls, mapped.sim_seconds)


class CombeeReflection:
    """Combee's map (shuffled groups, one reflection each, all at once) and reduce (aggregation
    tree). ``seed`` roots the shuffle's draws (path ``("gepa", "shuffle", iteration)``, with
    ``("salt", n)`` appended under a salted shape)."""

    def __init__(self, combee: CombeeConfig, *, seed: int) -> None:
        self.combee = combee
        self.seed = seed

    def groups(self, records: int, iteration: int, shape: StepShape | None = None) -> list[tuple[int, ...]]:
        """The augmented-shuffle groups of ``records`` graded examples in iteration ``iteration``."""
        shape = shape or StepShape()
        path: tuple[int | str, ...] = ("gepa", "shuffle", iteration)
        if shape.shuffle_salt:
            path = (*path, "salt", shape.shuffle_salt)
        duplicates = self.combee.duplicates if shape.duplicates is None else shape.duplicates
        max_group = self.combee.max_group if shape.max_group is None else shape.max_group
        return augmented_groups(records, duplicates, rng_at(self.seed, *path), max_group=max_group)

    async def map(
        self, learner: GepaProposer, current: str, evaluations: Sequence[GradedAnswer], *, iteration: int,
        shape: StepShape | None = None,
    ) -> Mapped:
        groups = self.groups(len(evaluations), iteration, shape)
        proposals = await asyncio.gather(
            *(
                learner.propose(
                    [evaluations[i] for i in members], None, current, source=f"proposer[{index}]",
                    seed_path=(iteration, index),
                )
                for index, members in enumerate(groups)
            )
        )
        return Mapped(tuple(proposals), max((p.usage.effective_latency_s for p in proposals), default=0.0),
                      tuple(len(members) for members in groups))

    async def reduce(self, learner: GepaProposer, current: str, mapped: Mapped, *, iteration: int) -> Reflected:
        usable = [p.edits for p in mapped.calls if p.error is None and p.edits]
        reduced = await reduce_tree(
            learner, usable, current, fan_in=self.combee.max_fan_in, seed_path=(iteration,), label="aggregator"
        )
        return Reflected(_text(reduced.edits), reduced.calls, reduced.sim_seconds)

    async def reflect(
        self, learner: GepaProposer, current: str, evaluations: Sequence[GradedAnswer], *, iteration: int
    ) -> Reflected:
        mapped = await self.map(learner, current, evaluations, iteration=iteration)
        reduced = await self.reduce(learner, current, mapped, iteration=iteration)
        return Reflected(reduced.text, (*mapped.calls, *reduced.calls), mapped.sim_seconds + reduced.sim_seconds)
