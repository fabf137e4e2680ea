"""Immutable playbook snapshots: ``apply(delta) -> (next version, report)``.

A :class:`Playbook` never changes: :meth:`Playbook.apply` returns a new snapshot and leaves the
old one whole, so a reader holding any version always sees that entire version. The rules of
each op kind, rejection and token-budget eviction are in :mod:`combee_fast.ace.playbook.apply`; the
text format in :mod:`combee_fast.ace.playbook.format`; parsing in :mod:`combee_fast.ace.playbook.text`;
the file format and its versions in :mod:`combee_fast.ace.playbook.io`; the data of a snapshot and
its checks in :mod:`combee_fast.ace.playbook.state`; a run's delta log and its replay in
:mod:`combee_fast.ace.playbook.deltalog`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import msgspec

from combee_fast.errors import ConfigError
from combee_fast.ace.playbook.apply import ApplyReport, RejectedOp, aggregate_tags, apply_delta
from combee_fast.ace.playbook.format import DEFAULT_SECTIONS, MAX_BULLET_CHARS, text_length
from combee_fast.ace.playbook.io import decode_state, encode_state, load_state, save_state
from combee_fast.ace.playbook.state import PlaybookState, build_state, bullets_in_order, options_problem, render
from combee_fast.ace.playbook.text import parse_state
from combee_fast.ace.records import Bullet, Delta
from combee_fast.tokens import CHARS_PER_TOKEN

__all__ = [
    "DEFAULT_SECTIONS",
    "MAX_BULLET_CHARS",
    "ApplyReport",
    "Playbook",
    "PlaybookDiff",
    "RejectedOp",
    "aggregate_tags",
]


class PlaybookDiff(msgspec.Struct, frozen=True):
    """Ids that differ between two snapshots: ``added`` (live only in the newer), ``updated``
    (live in both, with a different section, content or counters), ``removed`` (live only in the
    older). Each in the render order of the snapshot it is live in (the newer for updated)."""

    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


class Playbook:
    """One version of a playbook. Read-only; build with :meth:`empty`, :meth:`parse` or
    :meth:`load`, change with :meth:`apply`."""

    __slots__ = ("_state", "_rendered", "_ordered")

    def __init__(self, state: PlaybookState) -> None:
        """Wrap a validated state; callers use :meth:`empty`, :meth:`parse` or :meth:`load`."""
        self._state = state
        self._rendered: str | None = None
        self._ordered: tuple[Bullet, ...] | None = None

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def empty(
        cls,
        *,
        sections: Sequence[str] = DEFAULT_SECTIONS,
        token_budget: int | None = None,
        max_bullet_chars: int = MAX_BULLET_CHARS,
    ) -> Playbook:
        """Version 0 with no bullets. :class:`ConfigError` on an invalid option."""
        if problem := options_problem(tuple(sections), token_budget, max_bullet_chars):
            raise ConfigError(problem)
        return cls(
            build_state(
                version=0,
                sections=sections,
                token_budget=token_budget,
                max_bullet_chars=max_bullet_chars,
                next_id=1,
                bullets=(),
                removed=(),
            )
        )

    @classmethod
    def parse(
        cls,
        text: str,
        *,
        sections: Sequence[str] = DEFAULT_SECTIONS,
        token_budget: int | None = None,
        max_bullet_chars: int = MAX_BULLET_CHARS,
    ) -> Playbook:
        """The playbook rendered as ``text`` (see :mod:`combee_fast.ace.playbook.text` for what text
        cannot carry). :class:`~combee_fast.errors.PlaybookParseError` names the bad line."""
        return cls(
            parse_state(text, sections=tuple(sections), token_budget=token_budget, max_bullet_chars=max_bullet_chars)
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Playbook:
        """The playbook saved at ``path`` (schema versions 1 and 2).
        :class:`~combee_fast.errors.PlaybookFileError` names the path and the problem."""
        return cls(load_state(path))

    @classmethod
    def from_bytes(cls, data: bytes) -> Playbook:
        """The playbook in playbook-file JSON (what :meth:`to_bytes` gives); ``ValueError``
        naming the problem."""
        return cls(decode_state(data))

    def to_bytes(self) -> bytes:
        """This snapshot as playbook-file JSON, tombstones and counter included."""
        return encode_state(self._state)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write this snapshot, tombstones and counter included, atomically to ``path``."""
        save_state(self._state, path)

    # -- read-only view ----------------------------------------------------------------------

    @property
    def version(self) -> int:
        """0 for a new empty playbook; +1 for every apply in which some op took effect."""
        return self._state.version

    @property
    def sections(self) -> tuple[str, ...]:
        """Known and user-defined sections, in first-seen order (the render order)."""
        return self._state.sections

    @property
    def token_budget(self) -> int | None:
        """Most tokens :meth:`render` may take; ``None`` for no limit."""
        return self._state.token_budget

    @property
    def max_bullet_chars(self) -> int:
        return self._state.max_bullet_chars

    @property
    def next_id(self) -> int:
        """Counter the next added bullet gets; above every id ever used, live or removed."""
        return self._state.next_id

    def bullets(self) -> tuple[Bullet, ...]:
        """Live bullets in render order."""
        if self._ordered is None:
            self._ordered = bullets_in_order(self._state)
        return self._ordered

    def get(self, bullet_id: str) -> Bullet | None:
        return self._state.bullets.get(bullet_id)

    def __len__(self) -> int:
        return len(self._state.bullets)

    def __contains__(self, bullet_id: object) -> bool:
        return bullet_id in self._state.bullets

    def removed_ids(self) -> frozenset[str]:
        """Tombstones: ids removed by REMOVE or evicted by the budget; never live again."""
        return self._state.removed

    def render(self) -> str:
        """The ACE line format: ``## <section>`` per non-empty section (empty ones are omitted),
        then ``[<id>] helpful=<n> harmful=<n> :: <content>`` per bullet; a blank line between
        sections; no trailing newline; ``""`` when there are no bullets."""
        if self._rendered is None:
            self._rendered = render(self._state)
        return self._rendered

    def tokens(self) -> int:
        """``estimate_tokens(self.render())``, known without rendering."""
        return -(-text_length(self._state.cost) // CHARS_PER_TOKEN)

    # -- change ------------------------------------------------------------------------------

    def apply(self, delta: Delta) -> tuple[Playbook, ApplyReport]:
        """The next version and what happened. Returns ``self`` (same version) when no op took
        effect. Never changes ``self``."""
        state, report = apply_delta(self._state, delta)
        return (self if state is self._state else Playbook(state)), report

    def renumbered(self, version: int) -> Playbook:
        """The same content numbered ``version``, which may not be below this one's (a release
        gate learning on from an older version after a rollback keeps numbers unique this way).
        ``ValueError`` below the current version."""
        if version < self._state.version:
            raise ValueError(f"a playbook cannot be renumbered down, from version {self.version} to {version}")
        if version == self._state.version:
            return self
        renumbered = Playbook(dataclasses.replace(self._state, version=version))
        renumbered._rendered, renumbered._ordered = self._rendered, self._ordered
        return renumbered

    def diff(self, other: Playbook) -> PlaybookDiff:
        """What changed from ``self`` to ``other``."""
        mine, theirs = self._state.bullets, other._state.bullets
        added: list[str] = []
        updated: list[str] = []
        for bullet in other.bullets():
            old = mine.get(bullet.id)
            if old is None:
                added.append(bullet.id)
            elif (old.section, old.content, old.helpful, old.harmful) != (
                bullet.section,
                bullet.content,
                bullet.helpful,
                bullet.harmful,
            ):
                updated.append(bullet.id)
        removed = tuple(b.id for b in self.bullets() if b.id not in theirs)
        return PlaybookDiff(added=tuple(added), updated=tuple(updated), removed=removed)

    def __repr__(self) -> str:
        return f"Playbook(version={self.version}, bullets={len(self)}, tokens={self.tokens()})"
