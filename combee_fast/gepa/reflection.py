"""How a child's text is proposed from the parent's graded minibatch: one strategy per class.

- :class:`SerialReflection` (methods ``gepa`` and ``naive``): one reflection call over the whole minibatch.
- :class:`CombeeReflection` (method ``combee-gepa``): Combee's map and reduce. The graded
  examples are cut into augmented-shuffle groups (:func:`combee_fast.combee.shuffle.augmented_groups`),
  one reflection call per group, all in flight at once against the same parent, then the
  aggregation tree (:func:`combee_fast.combee.reduce.reduce_tree`, aggregation calls of at most
  ``max_fan_in`` rewrites each) merges their rewrites into one. A failed aggregation falls back to
  the first rewrite it was given.

Both return the proposed text (``None``: nothing new) and every call made, with the phase's
critical path in simulated seconds.
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
from combee_fast.gepa.calls import Evaluation
from combee_fast.gepa.learner import ComponentText, GepaProposer
from combee_fast.schema import Proposal


class Reflection(Protocol):
    """Proposes one component's new text from the parent's graded minibatch."""

    async def reflect(
        self, learner: GepaProposer, current: str, evaluations: Sequence[Evaluation], *, iteration: int
    ) -> Reflected: ...


class Reflected(msgspec.Struct, frozen=True):
    """A reflection phase: the proposed text (None: none), every call, its critical path."""

    text: str | None
    calls: tuple[Proposal[ComponentText], ...]
    sim_seconds: float


def _text(edits: Sequence[ComponentText]) -> str | None:
    return edits[0].text if edits else None


class SerialReflection:
    """GEPA's own reflection: one call reading every graded example of the minibatch."""

    async def reflect(
        self, learner: GepaProposer, current: str, evaluations: Sequence[Evaluation], *, iteration: int
    ) -> Reflected:
        proposal = await learner.propose(
            evaluations, None, current, source="proposer[0]", seed_path=(iteration, 0)
        )
        return Reflected(_text(proposal.edits), (proposal,), proposal.usage.effective_latency_s)


class CombeeReflection:
    """Combee's map (shuffled groups, one reflection each, all at once) and reduce (aggregation
    tree). ``seed`` roots the shuffle's draws (path ``("gepa", "shuffle", iteration)``)."""

    def __init__(self, combee: CombeeConfig, *, seed: int) -> None:
        self.combee = combee
        self.seed = seed

    async def reflect(
        self, learner: GepaProposer, current: str, evaluations: Sequence[Evaluation], *, iteration: int
    ) -> Reflected:
        groups = augmented_groups(
            len(evaluations), self.combee.duplicates, rng_at(self.seed, "gepa", "shuffle", iteration),
            max_group=self.combee.max_group,
        )
        proposals = await asyncio.gather(
            *(
                learner.propose(
                    [evaluations[i] for i in members], None, current, source=f"proposer[{index}]",
                    seed_path=(iteration, index),
                )
                for index, members in enumerate(groups)
            )
        )
        usable = [p.edits for p in proposals if p.error is None and p.edits]
        reduced = await reduce_tree(
            learner, usable, current, fan_in=self.combee.max_fan_in, seed_path=(iteration,), label="aggregator"
        )
        mapped = max((p.usage.effective_latency_s for p in proposals), default=0.0)
        return Reflected(_text(reduced.edits), (*proposals, *reduced.calls), mapped + reduced.sim_seconds)
