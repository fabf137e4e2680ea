"""One typed event stream per run: what a person, a file or a tracker sees of a run.

The training loop, the role calls and the embedded learners emit :data:`Event` values into an
:class:`Events` hub; everything that shows or records a run is a consumer subscribed to it (the
run directory's ledger and error files, the progress output, reports, trackers, metrics
endpoints), and none of them reaches into the loop.

    StepDone          a learning step completed: its ledger row
    VersionApplied    a new artifact version exists (the run's or an embedded learner's)
    CallFailed        one LLM call failed or gave an unusable reply (role, kind, message)
    EpisodeFailed     one agent episode failed (its item, error kind, message)
    ReleaseDecision   a release policy promoted, rolled back or held a candidate, with its evidence
    ReleaseStatus     an online learner's release: versions served, candidate share, rewards per version
    BatchApplied      an online learner applied one batch: its size, the queue behind it, its latencies
    RunStopped        the run ended: why, and what that stop means (done, limit, interrupt, failure)

Contract: consumers are called synchronously, in subscription order, on the emitter's thread,
and must be cheap (a consumer with slow work queues it). A consumer that raises is removed and
the exception is reported once on stderr: a broken tracker never stops a run. A *critical*
consumer (the run directory's own record) is the exception: what it raises propagates, since a
run that cannot keep its record must stop. Events are frozen msgspec structs tagged by ``kind``,
so a JSONL event log encodes and decodes them as they are.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import msgspec

from combee_fast.run.ledger import LedgerRow


class StepDone(msgspec.Struct, frozen=True, tag="step_done", tag_field="kind"):
    """A learning step completed (its ledger row: time, calls, tokens, accuracy...)."""

    row: LedgerRow


class VersionApplied(msgspec.Struct, frozen=True, tag="version_applied", tag_field="kind"):
    """A new version of the artifact: its number and size, and the step or batch that made it."""

    version: int
    size: int
    step: int


class CallFailed(msgspec.Struct, frozen=True, tag="call_failed", tag_field="kind"):
    """One failed or unusable LLM call (``label``: the failure kind, e.g. ``5xx``, ``malformed``)."""

    role: str
    label: str
    message: str


class EpisodeFailed(msgspec.Struct, frozen=True, tag="episode_failed", tag_field="kind"):
    """One agent episode failed (``label``: its error kind)."""

    item: str
    label: str
    message: str


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


class ReleaseStatus(msgspec.Struct, frozen=True, tag="release_status", tag_field="kind"):
    """Where an online learner's release stands: the ``policy``, the ``incumbent`` version in
    service, the ``candidate`` (None: none) and the share of requests it serves, the rewards of
    the versions kept, the rollouts ``queued`` for learning, and the cost of shadow re-runs."""

    policy: str
    incumbent: int
    candidate: int | None
    share: float
    rewards: tuple[VersionRewards, ...]
    queued: int
    shadow_calls: int = 0
    shadow_tokens: int = 0


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


class RunStopped(msgspec.Struct, frozen=True, tag="run_stopped", tag_field="kind"):
    """The run ended after ``steps`` steps: ``reason``, and what it means (``ends``: done,
    limit, interrupt or failure)."""

    reason: str
    ends: str
    steps: int


Event = (StepDone | VersionApplied | CallFailed | EpisodeFailed | ReleaseDecision | ReleaseStatus | BatchApplied
         | RunStopped)
"""Every event a run emits."""

Consumer = Callable[[Event], None]


class Events:
    """The hub a run emits into; see the module docstring for the consumers' contract."""

    def __init__(self, *consumers: Consumer) -> None:
        self._consumers: list[tuple[Consumer, bool]] = [(consumer, False) for consumer in consumers]

    def subscribe(self, consumer: Consumer, *, critical: bool = False) -> Consumer:
        """Add ``consumer`` (returned, so it can be passed to :meth:`unsubscribe`); ``critical``:
        what it raises propagates to the emitter."""
        self._consumers.append((consumer, critical))
        return consumer

    def unsubscribe(self, consumer: Consumer) -> None:
        self._consumers = [(c, critical) for c, critical in self._consumers if c is not consumer]

    def emit(self, event: Event) -> None:
        for consumer, critical in list(self._consumers):
            try:
                consumer(event)
            except Exception as exc:
                if critical:
                    raise
                self.unsubscribe(consumer)  # a broken observer never stops a run
                print(f"combee: an event consumer ({getattr(consumer, '__qualname__', consumer)!r}) failed and was "
                      f"removed: {type(exc).__name__}: {exc}", file=sys.stderr)


def on_kind(kind: type[Any], consumer: Callable[[Any], None]) -> Consumer:
    """A consumer that hands ``consumer`` only the events of type ``kind``."""

    def filtered(event: Event) -> None:
        if isinstance(event, kind):
            consumer(event)

    filtered.__qualname__ = getattr(consumer, "__qualname__", "consumer")
    return filtered
