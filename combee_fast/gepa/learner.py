"""GEPA's proposer on Combee's shared mechanisms (:mod:`combee_fast.combee`).

The records a proposer reads are graded evaluations (:class:`~combee_fast.schema.GradedAnswer`);
an edit is the new text of one component (:class:`ComponentText`); ``propose`` is one reflection
call and ``merge`` one aggregation call, so the reduce tree of :mod:`combee_fast.combee.reduce`
merges rewrites as it merges playbook edits. :class:`GepaProposer` is a
:class:`~combee_fast.protocols.Proposer`: GEPA's step is its own search iteration
(:mod:`.iteration`), not the map of :mod:`combee_fast.methods`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from combee_fast.gepa.calls import GepaCalls
from combee_fast.schema import CallError, GradedAnswer, Proposal, Usage


class ComponentText(msgspec.Struct, frozen=True):
    """An edit: ``component``'s new text."""

    component: str
    text: str


class GepaProposer:
    """Proposes and merges rewrites of ``component`` through ``calls``. The ``text`` each call
    receives is the parent's current text of that component."""

    def __init__(self, calls: GepaCalls, component: str) -> None:
        self.calls = calls
        self.component = component

    def insight(self, record: GradedAnswer) -> str:
        return record.feedback

    async def propose(
        self, records: Sequence[GradedAnswer], artifact: Any, text: str, *, source: str,
        seed_path: tuple[int | str, ...],
    ) -> Proposal[ComponentText]:
        """One reflection call over ``records``; no edit when it failed or changed nothing."""
        rewrite = await self.calls.propose(text, records, seed_path=seed_path, component=self.component)
        return self._proposal(rewrite.text, text, source, rewrite.usage, rewrite.error)

    async def merge(
        self, proposals: Sequence[Sequence[ComponentText]], text: str, *, source: str,
        seed_path: tuple[int | str, ...],
    ) -> Proposal[ComponentText]:
        """One aggregation call over the rewrites in ``proposals``."""
        texts = [edit.text for edits in proposals for edit in edits]
        rewrite = await self.calls.aggregate(text, texts, seed_path=seed_path)
        return self._proposal(rewrite.text, text, source, rewrite.usage, rewrite.error)

    def edit_text(self, edit: ComponentText) -> str:
        return edit.text

    def edit_target(self, edit: ComponentText) -> str | None:
        return edit.component

    def _proposal(self, new: str | None, current: str, source: str, usage: Usage,
                  error: CallError | None) -> Proposal[ComponentText]:
        edits = () if new is None or new == current else (ComponentText(self.component, new),)
        return Proposal(source=source, edits=edits, usage=usage, error=error)
