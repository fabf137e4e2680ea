"""The data that crosses a boundary: between stages, to and from endpoints, to disk.

All types are msgspec Structs. Values shared between tasks (examples, ops, deltas, bullets,
usage records) are frozen so a reader can never see one change under it. Anything persisted
carries ``schema_version``; see :data:`SCHEMA_VERSION`.
"""

from __future__ import annotations

import enum
from typing import Generic, Literal, TypeVar

import msgspec

SCHEMA_VERSION = 2
"""Version of every persisted record. 1: playbooks without per-bullet provenance."""


class Message(msgspec.Struct, frozen=True):
    """One chat message as sent to an OpenAI-compatible endpoint."""

    role: str
    content: str


class Usage(msgspec.Struct, frozen=True):
    """Accounting for one LLM call (after retries), tagged with who made it and where.

    ``latency_s`` is wall-clock seconds measured by the client. ``sim_latency_s`` is the latency
    the simulated server reports in its own (simulated) seconds; ``None`` for real endpoints.
    ``retry_kinds`` holds the :attr:`CallError.label` of each failed attempt that was retried
    (``len(retry_kinds) == retries``).
    """

    role: str = ""
    model: str = ""
    endpoint: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    sim_latency_s: float | None = None
    retries: int = 0
    cached: bool = False
    retry_kinds: tuple[str, ...] = ()

    @property
    def effective_latency_s(self) -> float:
        """Simulated seconds when the endpoint reports them, wall seconds otherwise."""
        return self.latency_s if self.sim_latency_s is None else self.sim_latency_s


ErrorKind = Literal[
    "timeout",
    "connection",
    "http_status",
    "malformed_json",
    "truncated",
    "too_large",
    "schema_mismatch",
    "replay_miss",
    "cancelled",
    "placeholder",
    "no_answer",
]


class CallError(msgspec.Struct, frozen=True):
    """A failed LLM call or an unusable response, recorded on the record it belongs to."""

    kind: ErrorKind
    message: str
    status: int | None = None
    raw: str | None = None  # the offending response text, kept so nothing is lost

    @property
    def label(self) -> str:
        """The failure kind as counted in ledgers and summaries: ``429``, ``5xx``, ``http_<status>``
        for other HTTP statuses, ``malformed`` for unparseable JSON, else :attr:`kind`."""
        if self.kind == "http_status":
            if self.status == 429:
                return "429"
            if self.status is not None and 500 <= self.status <= 599:
                return "5xx"
            return f"http_{self.status}"
        if self.kind == "malformed_json":
            return "malformed"
        return self.kind


class Example(msgspec.Struct, frozen=True):
    """One task instance. ``index`` is its position in its split and its identity in a run."""

    index: int
    input: str
    target: str | None = None
    split: str = ""
    meta: dict[str, str] = msgspec.field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.split}:{self.index}"


class Rollout(msgspec.Struct, frozen=True):
    """One generator attempt on one example, scored.

    ``round`` counts regenerations after reflection (0 = first attempt). ``error`` is set when
    the call failed or its output could not be parsed; ``answer`` is then ``None``.
    """

    example: Example
    round: int
    messages: tuple[Message, ...]
    answer: str | None
    reasoning: str
    bullet_ids: tuple[str, ...]
    score: float | None
    feedback: str
    usage: Usage
    error: CallError | None = None
    raw: str | None = None

    @property
    def id(self) -> str:
        return f"{self.example.id}#r{self.round}"

    @property
    def correct(self) -> bool:
        return self.score is not None and self.score >= 1.0


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


E = TypeVar("E")
"""The edit type of a learner (ACE: :class:`Op`; GEPA: a component rewrite)."""


class Proposal(msgspec.Struct, Generic[E], frozen=True):
    """Edits proposed by one proposer or merger call (ACE: curator or reducer, playbook ops), or
    the error that call ended in. ``source`` names the call, e.g. ``curator[3]`` or ``reducer[0.1]``."""

    source: str
    edits: tuple[E, ...]
    usage: Usage
    error: CallError | None = None
