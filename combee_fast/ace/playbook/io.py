"""Playbook files: JSON through msgspec, with a ``schema_version``, written atomically.

Version 2 (current, :data:`combee_fast.schema.SCHEMA_VERSION`)::

    {"schema_version": 2, "version": 7, "next_id": 43, "token_budget": null,
     "max_bullet_chars": 1000, "sections": ["strategies_and_hard_rules", ...],
     "bullets": [{"id": "form-00003", "section": "formulas_and_calculations", "content": "...",
                  "helpful": 2, "harmful": 0, "created_version": 3, "updated_version": 5,
                  "source_rollout_ids": ["train:12#r0"]}, ...],
     "removed_ids": ["mist-00001"]}

Version 1 (before per-bullet provenance)::

    {"schema_version": 1, "version": 4, "next_id": 9, "token_budget": null,
     "sections": [...], "bullets": [{"id", "section", "content", "helpful", "harmful"}, ...],
     "removed_ids": [...]}

It had no ``max_bullet_chars`` (the default applies), no created/updated versions (migrated as 0:
unknown, older than anything versioned; eviction then falls back to id order, which is creation
order) and no source rollout ids (migrated as empty).
"""

from __future__ import annotations

import os

import msgspec

from combee_fast.errors import PlaybookFileError
from combee_fast.files import read_regular, write_atomic
from combee_fast.ace.playbook.format import MAX_BULLET_CHARS
from combee_fast.ace.playbook.state import PlaybookState, build_state, bullets_in_order
from combee_fast.schema import SCHEMA_VERSION
from combee_fast.ace.records import Bullet


class PlaybookFileV2(msgspec.Struct, forbid_unknown_fields=True):
    schema_version: int
    version: int
    next_id: int
    token_budget: int | None
    max_bullet_chars: int
    sections: list[str]
    bullets: list[Bullet]
    removed_ids: list[str]


class BulletV1(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    section: str
    content: str
    helpful: int = 0
    harmful: int = 0


class PlaybookFileV1(msgspec.Struct, forbid_unknown_fields=True):
    schema_version: int
    version: int
    next_id: int
    sections: list[str]
    bullets: list[BulletV1]
    removed_ids: list[str] = []
    token_budget: int | None = None


class _VersionProbe(msgspec.Struct):
    schema_version: int


def migrate_v1(old: PlaybookFileV1) -> PlaybookFileV2:
    """The version-2 layout of a version-1 file (see the module docstring for what is filled in)."""
    return PlaybookFileV2(
        schema_version=SCHEMA_VERSION,
        version=old.version,
        next_id=old.next_id,
        token_budget=old.token_budget,
        max_bullet_chars=MAX_BULLET_CHARS,
        sections=old.sections,
        bullets=[Bullet(b.id, b.section, b.content, b.helpful, b.harmful) for b in old.bullets],
        removed_ids=old.removed_ids,
    )


def decode_playbook_file(data: bytes) -> PlaybookFileV2:
    """The current layout of a file's bytes, migrating older versions.

    Raises ``ValueError`` naming the problem: not JSON, no usable ``schema_version``, a version
    this build cannot read, or fields that do not match that version's layout.
    """
    try:
        probe = msgspec.json.decode(data, type=_VersionProbe)
    except msgspec.DecodeError as error:
        raise ValueError(f"not a playbook file: {error}") from error
    try:
        if probe.schema_version == SCHEMA_VERSION:
            return msgspec.json.decode(data, type=PlaybookFileV2)
        if probe.schema_version == 1:
            return migrate_v1(msgspec.json.decode(data, type=PlaybookFileV1))
    except msgspec.ValidationError as error:
        raise ValueError(f"schema_version {probe.schema_version} layout mismatch: {error}") from error
    raise ValueError(f"unsupported schema_version {probe.schema_version} (this build reads 1 to {SCHEMA_VERSION})")


def load_state(path: str | os.PathLike[str]) -> PlaybookState:
    """The validated state saved at ``path``; :class:`PlaybookFileError` naming the path and the
    problem when it cannot be read, is corrupt or truncated, has an unknown schema version, or
    breaks a playbook invariant."""
    name = os.fspath(path)
    try:
        data = read_regular(name)
    except OSError as error:
        raise PlaybookFileError(name, f"cannot read: {error.strerror or error}") from error
    try:
        return decode_state(data)
    except ValueError as error:
        raise PlaybookFileError(name, str(error)) from error


def decode_state(data: bytes) -> PlaybookState:
    """The validated state in playbook-file bytes; ``ValueError`` naming the problem."""
    file = decode_playbook_file(data)
    return build_state(
        version=file.version,
        sections=file.sections,
        token_budget=file.token_budget,
        max_bullet_chars=file.max_bullet_chars,
        next_id=file.next_id,
        bullets=file.bullets,
        removed=file.removed_ids,
    )


def encode_state(state: PlaybookState) -> bytes:
    """The current file layout of ``state`` as indented JSON; tombstones sorted for stable output."""
    file = PlaybookFileV2(
        schema_version=SCHEMA_VERSION,
        version=state.version,
        next_id=state.next_id,
        token_budget=state.token_budget,
        max_bullet_chars=state.max_bullet_chars,
        sections=list(state.sections),
        bullets=list(bullets_in_order(state)),
        removed_ids=sorted(state.removed),
    )
    return msgspec.json.format(msgspec.json.encode(file), indent=1) + b"\n"


def save_state(state: PlaybookState, path: str | os.PathLike[str]) -> None:
    """Write ``state`` to ``path`` atomically (a crash leaves either the old file or the new one)."""
    write_atomic(path, encode_state(state))
