"""The notes learner as the generic methods drive it (a :class:`~combee_fast.protocols.Learner`):

- map (``run_item``): answer one example against the step's frozen notes, then the critic's note
  on that answer (:class:`NoteTrace`; the chain stops at its first failed call);
- record: the note; propose: one editor call choosing among a set of notes; merge: one editor
  call over several choices made against the same notes;
- apply: the chosen notes added once (:meth:`~.notes.Notes.with_notes`).

So ``sequential``, ``naive`` and ``combee`` of :mod:`combee_fast.methods` are its three methods.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any

import msgspec

from combee_fast.methods.base import Applied
from combee_fast.schema import CallError, Example, GradedAnswer, Proposal, Usage

from .calls import Note, NotesCalls
from .notes import MAX_NOTES, Notes


class NoteTrace(msgspec.Struct, frozen=True):
    """One example's chain (a :class:`~combee_fast.protocols.Trace`): its answer, then the note."""

    answer: GradedAnswer
    note: Note | None = None

    @property
    def item_id(self) -> str:
        return self.answer.example.id

    @property
    def reward(self) -> float:
        return self.answer.score

    def _calls(self) -> list[GradedAnswer | Note]:
        return [call for call in (self.answer, self.note) if call is not None]

    @property
    def sim_seconds(self) -> float:
        return sum(call.usage.effective_latency_s for call in self._calls())

    def call_outcomes(self) -> list[tuple[Usage, CallError | None]]:
        return [(call.usage, call.error) for call in self._calls()]

    def errors(self) -> list[tuple[str, CallError]]:
        return [(f"{self.item_id}:{what}", call.error) for what, call in zip(("answer", "critic"), self._calls())
                if call.error is not None]


class NotesLearner:
    """The notes learner on ``calls`` (module docstring); its chains carry nothing past their step."""

    def __init__(self, calls: NotesCalls, *, max_notes: int = MAX_NOTES) -> None:
        self.calls, self.max_notes = calls, max_notes

    async def render(self, artifact: Notes) -> str:
        return artifact.render()

    async def run_item(self, item: Example, artifact: Notes, text: str, *, epoch: int, rounds: int) -> NoteTrace:
        answer = await self.calls.answer(item, text, epoch=epoch)
        if answer.error is not None:
            return NoteTrace(answer)
        return NoteTrace(answer, await self.calls.critique(answer, epoch=epoch))

    def continuation(self, trace: NoteTrace, artifact: Notes, text: str, *, epoch: int) -> Awaitable[NoteTrace] | None:
        return None

    def record(self, trace: NoteTrace) -> str | None:
        note = trace.note
        return note.text if note is not None and note.error is None and note.text else None

    def insight(self, record: str) -> str:
        return record

    async def propose(self, records: Sequence[str], artifact: Notes, text: str, *, source: str,
                      seed_path: tuple[int | str, ...]) -> Proposal[str]:
        choice = await self.calls.edit(text, records, seed_path=seed_path)
        return Proposal(source=source, edits=choice.notes, usage=choice.usage, error=choice.error)

    async def merge(self, proposals: Sequence[Sequence[str]], text: str, *, source: str,
                    seed_path: tuple[int | str, ...]) -> Proposal[str]:
        choice = await self.calls.merge(text, proposals, seed_path=seed_path)
        return Proposal(source=source, edits=choice.notes, usage=choice.usage, error=choice.error)

    def edit_text(self, edit: str) -> str:
        return edit

    def edit_target(self, edit: str) -> str | None:
        return None

    async def apply(self, artifact: Notes, traces: Sequence[Any], edits: Sequence[str], source: str) -> Applied[Notes]:
        notes, change, delta = artifact.with_notes(edits, source, self.max_notes)
        return Applied(notes, change, change.added_ids, () if delta is None else (delta,))
