"""An embedded learner's events: its batches and its release gate's decisions and status, emitted
into the host's :class:`Events` hub beside the engine's (its calls, episodes and versions).

    BatchApplied      an online learner applied one batch: its size, the queue behind it, its latencies
    VersionApplied    a new version of the artifact (:mod:`combee_fast.engine.events`, as the run loop's)
    ReleaseDecision   a release policy promoted, rolled back or held a candidate, with its evidence
    ReleaseStatus     an online learner's release: versions served, candidate share, rewards per version

:data:`EmbeddedEvent` is every event an embedded learner emits (what a process learner's frames
carry to the host). Events are frozen msgspec structs tagged by ``kind``, as the run's are
(:mod:`combee_fast.run.events`), so one JSONL event log holds and decodes both.
"""

from __future__ import annotations

from typing import Any

import msgspec

from combee_fast.engine.events import (CallFailed, CallReplied, EndpointsProbed, EpisodeFailed, EpisodeFinished,
                                       EpisodeRerun, Events, Overloaded, RetryAfter, VersionApplied, on_kind)


class ReleaseDecision(msgspec.Struct, frozen=True, tag="release_decision", tag_field="kind"):
    """A release policy's decision about a candidate version (``decision``: promote, rollback,
    hold...) and the evidence it was made on."""

    decision: str
    candidate: int
    incumbent: int
    evidence: dict[str, Any] = msgspec.field(default_factory=dict)


class VersionRewards(msgspec.Struct, frozen=True):
    """The rewards submitted for one version: how many, their mean and its anytime-valid
    interval (:mod:`combee_fast.native.sequential`)."""

    version: int
    count: int
    mean: float
    lower: float
    upper: float


class NextDecision(msgspec.Struct, frozen=True):
    """What a release waits for: its next ``decision`` (``widen`` to ``share``, or ``promote``),
    the ``requests`` seen since the candidate's release (staged: of either version; shadow: the
    incumbent's), and ``more``: about how many more requests it needs (None: not within
    :data:`~combee_fast.embedded.release.STATUS_HORIZON`). ``more`` is an estimate for a candidate
    exactly as good as the incumbent, both at ``accuracy`` (the mean reward observed), on the
    evidence already in (:func:`~combee_fast.embedded.release_plan.next_decision`); a better
    candidate is decided sooner, a worse one rolled back instead."""

    decision: str
    share: float
    requests: int
    more: int | None
    accuracy: float


class ReleaseStatus(msgspec.Struct, frozen=True, tag="release_status", tag_field="kind"):
    """Where an online learner's release stands: the ``policy``, the ``incumbent`` version in
    service, the ``candidate`` (None: none) and the share of requests it serves, the rewards of
    the versions kept, the rollouts ``queued`` for learning, the cost of shadow re-runs, and
    what the release waits for (``next_decision``; None: no candidate, a policy that decides
    nothing by itself, or no reward yet to estimate from)."""

    policy: str
    incumbent: int
    candidate: int | None
    share: float
    rewards: tuple[VersionRewards, ...]
    queued: int
    shadow_calls: int = 0
    shadow_tokens: int = 0
    next_decision: NextDecision | None = None


class BatchApplied(msgspec.Struct, frozen=True, tag="batch_applied", tag_field="kind"):
    """An online learner applied batch ``number`` of ``rollouts``, learning ``version``;
    ``waiting``: rollouts queued behind it; ``batch_s``: seconds learning it; ``publish_s``:
    seconds from when it could start forming to its publish."""

    number: int
    version: int
    rollouts: int
    waiting: int
    batch_s: float
    publish_s: float


EmbeddedEvent = (VersionApplied | BatchApplied | ReleaseDecision | ReleaseStatus | CallFailed | CallReplied
                 | RetryAfter | Overloaded | EpisodeFinished | EpisodeFailed | EpisodeRerun | EndpointsProbed)
"""Every event an embedded learner emits."""

__all__ = [
    "BatchApplied", "EmbeddedEvent", "Events", "NextDecision", "ReleaseDecision", "ReleaseStatus", "VersionApplied",
    "VersionRewards", "on_kind",
]
