"""One typed event stream per run: what a person, a file or a tracker sees of a training run.

Every part of a run says what happens by emitting :data:`Event` values into an :class:`Events`
hub (no callback slot is set on them): the endpoints, the role calls and the rollouts into the
session's hub (:attr:`combee_fast.session.Session.events`; the hub and their events are defined
low, in :mod:`combee_fast.engine.events`), the training loop into the run's. An embedded
learner's own events (batches, release decisions) are :mod:`combee_fast.embedded.events`'.
Everything that shows or records a run is a consumer subscribed to it (the run directory's
record, :mod:`.recorder`: ledger, ``errors.jsonl``, ``trajectories.jsonl``; the notices on
stderr, the progress output, reports and trackers, :mod:`combee_fast.readout`), and none of them
reaches into the loop.

    StepDone          a learning step completed: its ledger row
    VersionApplied    a new artifact version exists (the run's or an embedded learner's)
    CallFailed        one LLM call failed or gave an unusable reply (role, kind, message, raw reply)
    CallReplied       one LLM call was accounted: its role, its reply (cut) and its failure's label
    RetryAfter        a server asked a call to wait (Retry-After): the endpoint and the seconds
    Overloaded        a timeout lowered the requests an endpoint may have in flight
    EpisodeFinished   an agent episode ran to its trajectory
    EpisodeFailed     one agent episode failed (its item, error kind, message, the step it failed at)
    EpisodeRerun      an episode is sent again after the worker running it was lost
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

import msgspec

from combee_fast.engine.events import (CallFailed, CallReplied, EndpointsProbed, EpisodeFailed, EpisodeFinished,
                                       EpisodeRerun, Events, Overloaded, RetryAfter, VersionApplied, on_kind)
from combee_fast.protocols.running import Ends
from combee_fast.record.ledger import LedgerRow


class StepDone(msgspec.Struct, frozen=True, tag="step_done", tag_field="kind"):
    """A learning step completed (its ledger row: time, calls, tokens, accuracy...)."""

    row: LedgerRow


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
         | EpisodeFailed | EpisodeRerun | KernelsCompiling | EndpointsProbed | NoGo | RunStopped)
"""Every event a training run emits."""

Consumer = Callable[[Event], None]
"""What a hub calls with each event."""

__all__ = [
    "CallFailed", "CallReplied", "Consumer", "EndpointsProbed", "EpisodeFailed", "EpisodeFinished", "EpisodeRerun",
    "Event", "Events", "KernelsCompiling", "NoGo", "Overloaded", "RetryAfter", "RunStopped", "StepDone",
    "VersionApplied", "on_kind",
]
