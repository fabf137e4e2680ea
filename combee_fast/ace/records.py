"""ACE's records: a reflector's diagnosis of a rollout (:class:`Reflection`, its
:class:`BulletTag`), the operations a curator or reducer proposes (:class:`Op` of an
:class:`OpKind`, applied together as a :class:`Delta`) and the entries of a playbook
(:class:`Bullet`). Frozen msgspec Structs: a playbook snapshot shares them with every reader.
"""

from __future__ import annotations

import enum
from typing import Literal

import msgspec

from combee_fast.schema import CallError, Usage

TagName = Literal["helpful", "harmful", "neutral"]


class BulletTag(msgspec.Struct, frozen=True):
    bullet_id: str
    tag: TagName


class Reflection(msgspec.Struct, frozen=True):
    """The reflector's diagnosis of one rollout."""

    rollout_id: str
    reasoning: str
    error_identification: str
    root_cause: str
    correct_approach: str
    key_insight: str
    bullet_tags: tuple[BulletTag, ...]
    usage: Usage
    error: CallError | None = None

    @property
    def id(self) -> str:
        return f"refl:{self.rollout_id}"


class OpKind(enum.Enum):
    ADD = "ADD"
    UPDATE = "UPDATE"
    REMOVE = "REMOVE"
    TAG = "TAG"


class Op(msgspec.Struct, frozen=True):
    """One edit to a playbook.

    ADD needs ``section`` and ``content`` (``bullet_id`` is assigned on apply).
    UPDATE needs ``bullet_id`` and ``content``; REMOVE needs ``bullet_id``;
    TAG needs ``bullet_id`` and adds ``helpful``/``harmful`` to the bullet's counters.
    """

    kind: OpKind
    section: str = ""
    content: str = ""
    bullet_id: str | None = None
    helpful: int = 0
    harmful: int = 0


class Delta(msgspec.Struct, frozen=True):
    """Ops to apply together, with where they came from."""

    ops: tuple[Op, ...]
    source: str = ""  # the role call that produced it, e.g. "curator[3]" or "reducer"
    reflection_ids: tuple[str, ...] = ()
    rollout_ids: tuple[str, ...] = ()


class Bullet(msgspec.Struct, frozen=True):
    """One playbook entry. ``created_version``/``updated_version`` are playbook versions."""

    id: str
    section: str
    content: str
    helpful: int = 0
    harmful: int = 0
    created_version: int = 0
    updated_version: int = 0
    source_rollout_ids: tuple[str, ...] = ()
