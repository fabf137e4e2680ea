"""One typed event stream per run: what a person, a file or a tracker sees of a run.

Every part of a run says what happens by emitting :data:`Event` values into an :class:`Events`
hub (no callback slot is set on them): the endpoints, the role calls and the rollouts into the
session's hub (:attr:`combee_fast.session.Session.events`; the hub and their events are defined
low, in :mod:`combee_fast.engine.events`), the training loop and the embedded learners into the
run's.
Everything that shows or records a run is a consumer subscribed to it (the run directory's
record: ledger, ``errors.jsonl``, ``trajectories.jsonl``; the notices on stderr; the progress
output, reports, trackers, metrics endpoints), and none of them reaches into the loop.

    StepDone          a learning step completed: its ledger row
    VersionApplied    a new artifact version exists (the run's or an embedded learner's)
    CallFailed        one LLM call failed or gave an unusable reply (role, kind, message, raw reply)
    CallReplied       one LLM call was accounted: its role, its reply (cut) and its failure's label
    RetryAfter        a server asked a call to wait (Retry-After): the endpoint and the seconds
    Overloaded        a timeout lowered the requests an endpoint may have in flight
    EpisodeFinished   an agent episode ran to its trajectory
    EpisodeFailed     one agent episode failed (its item, error kind, message, the step it failed at)
    EpisodeRerun      an episode is sent again after the worker running it was lost
    ReleaseDecision   a release policy promoted, rolled back or held a candidate, with its evidence
    ReleaseStatus     an online learner's release: versions served, candidate share, rewards per version
    BatchApplied      an online learner applied one batch: its size, the queue behind it, its latencies
    KernelsCompiling  the batch planner waits for its Numba kernels to compile (first run on a machine)
    EndpointsProbed   the session waits for its endpoints' start-up probes (model, structured output, tools)
    NoGo              the batch planner found that parallelism cannot pay here: it runs the sequential schedule
    RunStopped        the run ended: why, and what that stop means (done, limit, interrupt, failure)

The consumers' contract (synchronous, cheap; a consumer that raises is dropped, a *critical* one
stops the emitter) is :mod:`combee_fast.engine.events`'s. Events are frozen msgspec structs
tagged by ``kind``, so a JSONL event log encodes and decodes them as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from combee_fast.engine.events import (CallFailed, CallReplied, EndpointsProbed, EpisodeFailed, EpisodeFinished,
                                       EpisodeRerun, Events, Overloaded, RetryAfter, on_kind)
from combee_fast.protocols.running import Ends
from combee_fast.run.ledger import LedgerRow


class StepDone(msgspec.Struct, frozen=True, tag="step_done", tag_field="kind"):
    """A learning step completed (its ledger row: time, calls, tokens, accuracy...)."""

    row: LedgerRow


class VersionApplied(msgspec.Struct, frozen=True, tag="version_applied", tag_field="kind"):
    """A new version of the artifact: its number and size, and the step or batch that made it."""

    version: int
    size: int
    step: int


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


class KernelsCompiling(msgspec.Struct, frozen=True, tag="kernels_compiling", tag_field="kind"):
    """The run waits for Numba to compile its kernels (the cache is cold: the first run on a
    machine): ``seconds`` None when the wait begins, else how long it took, when it is over."""

    seconds: float | None = None


class NoGo(msgspec.Struct, frozen=True, tag="no_go", tag_field="kind"):
    """The batch planner found that parallelism cannot pay on the endpoint and runs the
    sequential schedule (:mod:`combee_fast.combee.planner`): ``reason`` says what it measured."""

    reason: str


class RunStopped(msgspec.Struct, frozen=True, tag="run_stopped", tag_field="kind"):
    """The run ended after ``steps`` steps: ``reason``, and what it means (``ends``: done,
    limit, interrupt or failure)."""

    reason: str
    ends: Ends
    steps: int


Event = (StepDone | VersionApplied | CallFailed | CallReplied | RetryAfter | Overloaded | EpisodeFinished
         | EpisodeFailed | EpisodeRerun | ReleaseDecision | ReleaseStatus | BatchApplied | KernelsCompiling | EndpointsProbed
         | NoGo | RunStopped)
"""Every event a run emits."""

Consumer = Callable[[Event], None]
"""What a hub calls with each event."""

__all__ = [
    "BatchApplied", "CallFailed", "Consumer", "EndpointsProbed", "EpisodeFailed", "EpisodeFinished", "EpisodeRerun",
    "Event", "Events", "KernelsCompiling", "NextDecision", "NoGo", "Overloaded", "ReleaseDecision", "ReleaseStatus",
    "RetryAfter", "RunStopped", "StepDone", "VersionApplied", "VersionRewards", "on_kind",
]
