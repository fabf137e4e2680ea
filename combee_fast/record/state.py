"""The state of a training run: what the loop works on, and what a checkpoint keeps.

:class:`TrainState` holds where the run is in its epochs, the artifact and the best one, every
running total, and the states of the batch plan and of the method's carried work. A checkpoint
(:mod:`combee_fast.record.checkpoint`) keeps this object but its latest ledger rows and the stop
being decided (a resumed run reads its rows back from ``ledger.jsonl``).

:class:`CallsRecord` is what ``calls.json`` says (calls per role, trimmed, failed), summed over
every process that worked on the run up to its last checkpoint.

:class:`EpochOrder` is the order items are visited in: each epoch's permutation drawn from the
seed tree at ``("order", epoch)``, the same for every method and learner.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import msgspec
import numpy as np

from combee_fast.config import HISTORY_KEPT
from combee_fast.engine.rng import rng_at
from combee_fast.methods.base import EvalResult
from combee_fast.money.dollars import add_dollars
from combee_fast.protocols.running import Ends
from combee_fast.record.bounds import Count
from combee_fast.record.concurrency import ConcurrencyTotal, add_step
from combee_fast.record.ledger import CallCounts, LedgerRow

A = TypeVar("A")


class CallsRecord(msgspec.Struct, frozen=True):
    """Calls per role, calls sent again with a trimmed playbook per role, and failed calls (the
    run's ``calls.json``)."""

    calls: dict[str, Count] = msgspec.field(default_factory=dict)
    trimmed: dict[str, Count] = msgspec.field(default_factory=dict)
    failed: Count = 0

    def plus(self, calls: dict[str, int], trimmed: dict[str, int], failed: int) -> CallsRecord:
        """This record with the counts of another process added."""
        return CallsRecord(_summed(self.calls, calls), _summed(self.trimmed, trimmed), self.failed + failed)

    def as_file(self) -> dict[str, object]:
        """``calls.json``'s content: calls per role, ``trimmed`` per role, ``failed``."""
        return {**self.calls, "trimmed": self.trimmed, "failed": self.failed}


def _summed(ours: dict[str, int], theirs: dict[str, int]) -> dict[str, int]:
    return {key: ours.get(key, 0) + theirs.get(key, 0) for key in sorted({*ours, *theirs})}


@dataclass
class TrainState(Generic[A]):
    """A training run after ``steps`` completed steps.

    ``epoch``/``position``: where in the epoch order the next batch starts (``position`` equal to
    the order's length: the epoch's batches are done; carried work may still be draining).
    ``best``/``best_score``: the artifact with the highest validation score so far (over its
    answered examples) and that score; ``stale_validations``: validations since it last rose.
    ``episodes``/``episodes_failed``/``env_seconds``: agent episodes run, failed, and their
    seconds in the environment. ``explored``/``accepted``: candidates the applies judged and
    those they kept, as the learner counts them (:mod:`combee_fast.money.improvements`).
    ``dollars``: per role, what the steps' calls cost (None: no price, :mod:`combee_fast.money.dollars`);
    ``concurrency``: per role, the steps' calls in flight (:mod:`combee_fast.record.concurrency`).
    ``plan_state``/``carried``: what the batch plan's :meth:`~combee_fast.protocols.BatchPlan.state`
    and the method's :meth:`~combee_fast.protocols.Method.carried` returned after the last step;
    ``calls_record``: ``calls.json`` as of the last checkpoint.
    ``stopping``: why the run ends after this step (set by the stop rules; ``stop_ends`` says
    what that stop means); ``validated``: this step's validation, if it had one.
    """

    artifact: A
    best: A
    steps: int = 0
    epoch: int = 0
    position: int = 0
    best_score: float | None = None
    final_eval: EvalResult | None = None
    stale_validations: int = 0
    sim_seconds: float = 0.0
    wall_seconds: float = 0.0
    gpu_seconds: float = 0.0
    calls: int = 0
    tokens: int = 0
    samples: int = 0
    rollouts: int = 0
    episodes: int = 0
    episodes_failed: int = 0
    env_seconds: float = 0.0
    explored: int = 0
    accepted: int = 0
    dollars: dict[str, float | None] = field(default_factory=dict)
    concurrency: dict[str, ConcurrencyTotal] = field(default_factory=dict)
    counts: CallCounts = field(default_factory=CallCounts)
    val_counts: CallCounts = field(default_factory=CallCounts)
    plan_state: Any = None
    carried: Any = None
    calls_record: CallsRecord = field(default_factory=CallsRecord)
    ledger: collections.deque[LedgerRow] = field(default_factory=lambda: collections.deque(maxlen=HISTORY_KEPT))
    stopping: str | None = None
    stop_ends: Ends | None = None
    validated: EvalResult | None = None

    @classmethod
    def fresh(cls, artifact: A) -> TrainState[A]:
        """The state before the first step of a run starting from ``artifact``."""
        return cls(artifact=artifact, best=artifact)

    def add_step(self, row: LedgerRow, *, batch_size: int, wall_seconds: float) -> None:
        """Count the step of ``row`` (its calls, tokens, time and cost) into the totals."""
        self.sim_seconds += row.sim_seconds
        self.wall_seconds += wall_seconds
        self.gpu_seconds += row.gpu_seconds or 0.0
        step_counts = CallCounts.of_row(row)
        self.calls += step_counts.total_calls
        self.tokens += sum(row.prompt_tokens.values()) + sum(row.completion_tokens.values())
        self.samples += batch_size
        self.rollouts += row.rollouts
        self.episodes += row.episodes
        self.episodes_failed += sum(row.episode_failures.values())
        self.env_seconds += row.env_seconds
        add_dollars(self.dollars, row.dollars)
        add_step(self.concurrency, row.concurrency, batch_size=batch_size, calls=row.calls)
        self.counts.add_counts(step_counts)
        self.steps += 1

    def add_improvements(self, counted: Iterable[tuple[int, int]]) -> None:
        """Count ``(explored, accepted)`` of each of a step's applies into the totals."""
        for explored, accepted in counted:
            self.explored += explored
            self.accepted += accepted

    def add_validation(self, result: EvalResult, artifact: A) -> None:
        """Record a validation of ``artifact``: the latest result, and the best artifact so far."""
        self.final_eval = self.validated = result
        for usage, error in result.outcomes:
            self.val_counts.add(usage, error)
        if result.answered and (self.best_score is None or result.accuracy > self.best_score):
            self.best, self.best_score, self.stale_validations = artifact, result.accuracy, 0
        else:
            self.stale_validations += 1


class EpochOrder:
    """The order ``n`` items are visited in, epoch by epoch (seed path ``("order", epoch)``)."""

    def __init__(self, seed: int, n: int) -> None:
        self.seed = seed
        self.n = n
        self._cached: tuple[int, np.ndarray] | None = None

    def of(self, epoch: int) -> np.ndarray:
        """The permutation of epoch ``epoch`` (the latest one is kept)."""
        if self._cached is None or self._cached[0] != epoch:
            self._cached = (epoch, rng_at(self.seed, "order", epoch).permutation(self.n))
        return self._cached[1]

    def take(self, state: TrainState[Any], size: int, *, span: bool) -> tuple[list[int], int]:
        """The indices of the next batch of at most ``size`` items from ``state``'s position, and
        the epoch it starts in; moves the position past them. Without ``span`` the batch ends at
        the end of its epoch; with it, it runs on into the next epoch."""
        if state.position >= self.n and span:
            state.epoch, state.position = state.epoch + 1, 0
        epoch = state.epoch
        taken: list[int] = []
        while len(taken) < size:
            if state.position >= self.n:
                if not span or not self.n:
                    break
                state.epoch, state.position = state.epoch + 1, 0
            order = self.of(state.epoch)
            end = min(self.n, state.position + size - len(taken))
            taken.extend(int(i) for i in order[state.position:end])
            state.position = end
        return taken, epoch
