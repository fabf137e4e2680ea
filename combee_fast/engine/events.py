"""The event hub, and the events emitted below the run loop (by endpoints, role calls, rollouts).

Every part of a session that has something to say emits a typed event into one :class:`Events`
hub instead of calling a callback set on it; whoever wants to hear subscribes. The run's own
events (steps, versions, releases, the stop) and the full list are in
:mod:`combee_fast.run.events`, which re-exports everything here; this module sits low enough for
the endpoint client to import.

    CallFailed        one LLM call failed or gave an unusable reply (role, kind, message, raw reply)
    CallReplied       one LLM call was accounted: its role, its reply (cut) and its failure's label
    RetryAfter        a server asked a call to wait (Retry-After): the endpoint and the seconds
    Overloaded        a timeout lowered the requests an endpoint may have in flight to ``limit``
    EpisodeFinished   an agent episode ran to its trajectory (not one answered from a resumed record)
    EpisodeFailed     an agent episode failed (its item, error kind, message, and the step it failed at)
    EpisodeRerun      an episode is sent again after the worker running it was lost
    EndpointsProbed   the session waits for its endpoints' start-up probes (model, structured output, tools)
    VersionApplied    a new artifact version exists (the run's or an embedded learner's)

Contract: consumers are called synchronously, in subscription order, on the emitter's thread,
and must be cheap (a consumer with slow work queues it). A consumer that raises is removed and
the exception is reported once on stderr: a broken tracker never stops a run. A *critical*
consumer (the run directory's own record) is the exception: what it raises propagates to the
emitter, since a run that cannot keep its record must stop. An emit from inside a consumer is
delivered at once (a hub forwarding into another is a consumer too). Events are frozen msgspec
structs tagged by ``kind``, so a JSONL event log encodes and decodes them as they are.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import msgspec

from combee_fast.schema import Example, ToolCall, Trajectory

OBSERVATION_KEPT = 2000
"""Characters of the failing step's observation an :class:`EpisodeFailed` keeps (its end)."""


class CallFailed(msgspec.Struct, frozen=True, tag="call_failed", tag_field="kind"):
    """One failed or unusable LLM call of ``role``: ``label`` is the failure as counted (``5xx``,
    ``malformed``...), ``error_kind`` the error's kind (``http_status``, ``malformed_json``...),
    ``status`` its HTTP status, ``raw`` the reply as received (None: there was none)."""

    role: str
    label: str
    message: str
    error_kind: str = ""
    status: int | None = None
    raw: str | None = None

    def record(self) -> dict[str, Any]:
        """The failure as a line of a run's ``errors.jsonl``."""
        return {"role": self.role, "kind": self.error_kind, "label": self.label, "message": self.message,
                "status": self.status, "raw": self.raw}


REPLY_KEPT = 16_000
"""Characters of a reply a :class:`CallReplied` keeps (its start)."""


class CallReplied(msgspec.Struct, frozen=True, tag="call_replied", tag_field="kind"):
    """One LLM call of ``role`` was accounted: its ``reply`` as received (None: none came; cut to
    :data:`REPLY_KEPT` characters, ``cut`` then true) and ``failed``, the failure's label ('' when
    the call succeeded)."""

    role: str
    reply: str | None
    failed: str = ""
    cut: bool = False

    @classmethod
    def of(cls, role: str, reply: str | None, failed: str) -> CallReplied:
        cut = reply is not None and len(reply) > REPLY_KEPT
        return cls(role, reply[:REPLY_KEPT] if cut and reply is not None else reply, failed, cut)


class RetryAfter(msgspec.Struct, frozen=True, tag="retry_after", tag_field="kind"):
    """A server asked a call to ``endpoint`` to wait ``seconds`` before it is sent again."""

    endpoint: str
    seconds: float


class Overloaded(msgspec.Struct, frozen=True, tag="overload", tag_field="kind"):
    """A request to ``endpoint`` timed out: at most ``limit`` requests in flight from now on
    (growing back as answers come)."""

    endpoint: str
    limit: int


class EndpointsProbed(msgspec.Struct, frozen=True, tag="endpoints_probed", tag_field="kind"):
    """The session waits for start-up probes of ``endpoints`` (their URLs, without credentials)
    finding out ``what`` (e.g. ``model``, ``structured output``, ``tool calling``): ``seconds``
    None when the wait begins, else how long it took, when it is over."""

    endpoints: tuple[str, ...]
    what: tuple[str, ...]
    seconds: float | None = None


class EpisodeFinished(msgspec.Struct, frozen=True, tag="episode_finished", tag_field="kind"):
    """An agent episode on ``example`` ran to ``trajectory`` (failed or not)."""

    trajectory: Trajectory
    example: Example


class EpisodeFailed(msgspec.Struct, frozen=True, tag="episode_failed", tag_field="kind"):
    """One agent episode failed: ``label`` is its error kind. ``episode``: its key; ``step``: the
    step it failed at (None: none), with that step's ``action``, the end of its ``observation``
    and its ``raw`` reply."""

    item: str
    label: str
    message: str
    episode: str = ""
    step: int | None = None
    action: ToolCall | None = None
    observation: str | None = None
    raw: str | None = None

    @classmethod
    def of(cls, trajectory: Trajectory) -> EpisodeFailed:
        """The failure of ``trajectory`` (which has an error)."""
        error = trajectory.error
        assert error is not None
        steps = trajectory.steps
        step = steps[error.step] if error.step is not None and error.step < len(steps) else None
        return cls(trajectory.item_id, error.kind, error.message, episode=trajectory.key, step=error.step,
                   action=step.action if step is not None else None,
                   observation=step.observation[-OBSERVATION_KEPT:] if step is not None else None,
                   raw=step.raw if step is not None else None)

    def record(self) -> dict[str, Any]:
        """The failure as a line of a run's ``errors.jsonl``."""
        return {"episode": self.episode, "item": self.item, "kind": self.label, "message": self.message,
                "step": self.step, "action": msgspec.to_builtins(self.action) if self.action is not None else None,
                "observation": self.observation, "raw": self.raw}


class EpisodeRerun(msgspec.Struct, frozen=True, tag="episode_rerun", tag_field="kind"):
    """Episode ``episode`` (of item ``item``) is sent again: the worker running it was lost (``why``)."""

    episode: str
    item: str
    why: str

    def record(self) -> dict[str, Any]:
        """The loss as a line of a run's ``errors.jsonl`` (kind ``worker_lost``; ``rerun``: the episode goes on)."""
        return {"episode": self.episode, "item": self.item, "kind": "worker_lost", "message": self.why, "rerun": True}


class VersionApplied(msgspec.Struct, frozen=True, tag="version_applied", tag_field="kind"):
    """A new version of the artifact: its number and size, and the step or batch that made it."""

    version: int
    size: int
    step: int


Consumer = Callable[[Any], None]
"""What a hub calls with each event (a run's :data:`combee_fast.run.events.Event`, an embedded
learner's :data:`combee_fast.embedded.events.EmbeddedEvent`)."""


class Events:
    """The hub a session and its runs emit into; see the module docstring for the consumers' contract."""

    def __init__(self, *consumers: Consumer) -> None:
        self._consumers: list[tuple[Consumer, bool]] = [(consumer, False) for consumer in consumers]

    def subscribe(self, consumer: Consumer, *, critical: bool = False) -> Consumer:
        """Add ``consumer`` (returned, so it can be passed to :meth:`unsubscribe`); ``critical``:
        what it raises propagates to the emitter."""
        self._consumers.append((consumer, critical))
        return consumer

    def unsubscribe(self, consumer: Consumer) -> None:
        self._consumers = [(c, critical) for c, critical in self._consumers if c is not consumer]

    def emit(self, event: Any) -> None:
        for consumer, critical in list(self._consumers):
            try:
                consumer(event)
            except Exception as exc:
                if critical:
                    raise
                self.unsubscribe(consumer)  # a broken observer never stops a run
                print(f"combee: an event consumer ({getattr(consumer, '__qualname__', consumer)!r}) failed and was "
                      f"removed: {type(exc).__name__}: {exc}", file=sys.stderr)


def on_kind(kind: type[Any] | tuple[type[Any], ...], consumer: Callable[[Any], None]) -> Consumer:
    """A consumer that hands ``consumer`` only the events of type ``kind`` (or of one of them)."""

    def filtered(event: Any) -> None:
        if isinstance(event, kind):
            consumer(event)

    filtered.__qualname__ = getattr(consumer, "__qualname__", "consumer")
    return filtered
