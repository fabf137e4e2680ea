"""What the notes learner learns and deploys: :class:`Notes`, short lines an answerer reads first."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import msgspec

MAX_NOTES = 80
"""Most notes kept; the oldest go first."""


class NotesChange(msgspec.Struct, frozen=True):
    """What one apply did (a :class:`~combee_fast.protocols.ChangeReport`)."""

    added_ids: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()


class NotesDelta(msgspec.Struct, frozen=True):
    """One apply that changed the notes, as ``deltas.jsonl`` keeps it."""

    version: int
    source: str
    added: tuple[str, ...]
    evicted: tuple[str, ...]


class Notes(msgspec.Struct, frozen=True):
    """Notes in the order they were learned, and the ``version`` of this value. ``render()`` is
    the context text (one ``- note`` line each); ``len()`` counts the notes."""

    notes: tuple[str, ...] = ()
    version: int = 0

    def __len__(self) -> int:
        return len(self.notes)

    def render(self) -> str:
        return "\n".join(f"- {note}" for note in self.notes)

    def with_notes(self, added: Sequence[str], source: str,
                   limit: int = MAX_NOTES) -> tuple[Notes, NotesChange, NotesDelta | None]:
        """These notes and every new one of ``added`` (blank lines and ones already held are
        turned down), the oldest dropped past ``limit`` (:data:`MAX_NOTES`; the learner's setting ``max_notes``); the next version if any was added."""
        kept, fresh, rejected = list(self.notes), [], []
        for note in added:
            line = " ".join(note.split())
            if not line or line in kept:
                rejected.append(note)
                continue
            kept.append(line)
            fresh.append(line)
        evicted = kept[:max(0, len(kept) - limit)]
        kept = kept[len(evicted):]
        change = NotesChange(tuple(fresh), tuple(rejected), tuple(evicted))
        if not fresh:
            return self, change, None
        notes = Notes(tuple(kept), self.version + 1)
        return notes, change, NotesDelta(notes.version, source, tuple(fresh), tuple(evicted))

    def to_bytes(self) -> bytes:
        return msgspec.json.format(msgspec.json.encode(self), indent=2)

    def save(self, path: str | os.PathLike[str]) -> None:
        Path(path).write_bytes(self.to_bytes())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Notes | None:
        """The notes saved at ``path``; None when the file is not a notes file (not a JSON object
        with ``notes``)."""
        try:
            data = msgspec.json.decode(Path(path).read_bytes())
        except (OSError, msgspec.DecodeError):
            return None
        if not isinstance(data, dict) or "notes" not in data:
            return None
        return msgspec.convert(data, cls)
