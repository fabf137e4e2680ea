"""GEPA's half of a step on Combee's shared mechanisms (:mod:`combee_fast.combee`).

The records a proposer reads are graded evaluations (:class:`~combee_fast.gepa.calls.Evaluation`);
a proposal is the rewrite of one component, carried as one UPDATE :class:`~combee_fast.schema.Op`
naming the component (``bullet_id``) with the new text (``content``), so the reduce tree of
:mod:`combee_fast.combee.reduce` merges rewrites exactly as it merges playbook edits: ``merge`` is
one aggregation call. These are the parts of the :class:`~combee_fast.protocols.Learner`
protocol that the shuffle and the reduce use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from combee_fast.gepa.calls import Evaluation, GepaCalls
from combee_fast.schema import Op, OpKind, Proposal


def rewrite_op(component: str, text: str) -> Op:
    """A rewrite of ``component`` as an edit."""
    return Op(OpKind.UPDATE, section=component, content=text, bullet_id=component)


class GepaLearner:
    """Proposes and merges rewrites of ``component`` through ``calls``. The ``text`` each call
    receives is the parent's current text of that component."""

    def __init__(self, calls: GepaCalls, component: str) -> None:
        self.calls = calls
        self.component = component

    def record(self, trace: Evaluation) -> Evaluation | None:
        """Every evaluation is readable: a failed solve is graded 0 with feedback saying why."""
        return trace

    def insight(self, record: Evaluation) -> str:
        return record.feedback

    async def propose(
        self, records: Sequence[Evaluation], artifact: Any, text: str, *, source: str,
        seed_path: tuple[int | str, ...],
    ) -> Proposal:
        """One reflection call over ``records``; no edit when it failed or changed nothing."""
        rewrite = await self.calls.propose(text, records, seed_path=seed_path)
        return self._proposal(rewrite.text, text, source, rewrite.usage, rewrite.error)

    async def merge(
        self, proposals: Sequence[Sequence[Op]], text: str, *, source: str, seed_path: tuple[int | str, ...]
    ) -> Proposal:
        """One aggregation call over the rewrites in ``proposals`` (each one UPDATE op)."""
        texts = [op.content for ops in proposals for op in ops]
        rewrite = await self.calls.aggregate(text, texts, seed_path=seed_path)
        return self._proposal(rewrite.text, text, source, rewrite.usage, rewrite.error)

    def edit_text(self, edit: Op) -> str:
        return edit.content

    def edit_target(self, edit: Op) -> str | None:
        return edit.bullet_id

    def _proposal(self, new: str | None, current: str, source: str, usage: Any, error: Any) -> Proposal:
        ops = () if new is None or new == current else (rewrite_op(self.component, new),)
        return Proposal(source=source, ops=ops, usage=usage, error=error)
