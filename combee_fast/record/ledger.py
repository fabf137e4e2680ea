"""The ledger: one row per learning step, with time, calls and tokens per role, rollouts,
GPU-seconds, errors, accuracy. Rows are built from a step's :class:`~combee_fast.methods.base.StepResult`
alone, whatever the learner.

Every row names the model and endpoint that served each role, so the model that proposes edits,
the one that answers and the one being evaluated can always be told apart. Calls, retried
attempts and failed calls are counted per role, and retries and failures per kind
(:attr:`~combee_fast.schema.CallError.label`: ``429``, ``5xx``, ``timeout``, ``connection``,
``malformed``, ``schema_mismatch``, ``truncated``, ``replay_miss``...), in :class:`CallCounts`.
Each row also holds its step's dollars per role (:mod:`combee_fast.money.dollars`) and calls in
flight per role, requested and achieved (:mod:`combee_fast.record.concurrency`), and the step
seconds the batch plan predicted for it, beside the measured ``sim_seconds``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

import msgspec

from combee_fast.methods.base import StepResult
from combee_fast.protocols.learning import EpisodeTrace
from combee_fast.record.bounds import Count
from combee_fast.record.concurrency import RoleConcurrency
from combee_fast.schema import CallError, Trajectory, Usage


class ErrorRecord(msgspec.Struct, frozen=True):
    """One failed call of a step: which item or call, its error kind and message."""

    item: str
    kind: str
    message: str


class LedgerRow(msgspec.Struct, frozen=True):
    """One step of a run, as written to ``ledger.jsonl``. ``batch_size``: the batch's items;
    ``first_try_accuracy``: the mean first-attempt reward of its items; ``version``/``size``: the
    artifact's after the step (ACE: playbook version and bullets; GEPA: pool version and
    candidates); ``added``/``rejected``/``evicted``: what its applies changed."""

    method: str
    epoch: int
    step: int
    batch_size: int
    batch_reason: str
    first_try_accuracy: float
    calls: dict[str, int]
    models: dict[str, str]  # role -> "model @ endpoint" that served it
    prompt_tokens: dict[str, int]
    completion_tokens: dict[str, int]
    sim_seconds: float
    wall_seconds: float
    cumulative_sim_seconds: float
    version: int
    size: int
    added: int
    rejected: int
    evicted: int
    errors: tuple[ErrorRecord, ...]
    retries: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)  # role -> kind -> retried attempts
    failures: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)  # role -> kind -> failed calls
    val_accuracy: float | None = None  # over the answered validation examples
    val_answered: int | None = None
    val_unanswered: int | None = None
    rollouts: int = 0  # generator calls the step made (collected traces: none; agent tasks: episodes)
    gpu_seconds: float | None = None  # what the step cost the hardware (money/cost.py); None: unknown.
    # Measured like wall_seconds (the simulator's busy time follows real arrival times), so two
    # runs of one seed may differ in it while every other field is identical.
    episodes: int = 0  # agent episodes the step ran (single-call tasks: none)
    episode_failures: dict[str, int] = msgspec.field(default_factory=dict)  # kind -> failed episodes
    env_seconds: float = 0.0  # seconds its episodes spent in their environments (on the critical path too)
    env_seconds_per_episode: float = 0.0
    dollars: dict[str, float | None] = msgspec.field(default_factory=dict)  # role -> dollars (None: no price; money/dollars.py)
    concurrency: dict[str, RoleConcurrency] = msgspec.field(default_factory=dict)  # role -> calls in flight (record/concurrency.py)
    # Measured like wall_seconds: two runs of one seed may differ in it.
    predicted_seconds: float | None = None  # the batch plan's prediction of sim_seconds (None: it made none)
    rejections: dict[str, int] = msgspec.field(default_factory=dict)  # why edits were rejected -> how many (rejection_reasons)
    cached_prompt_tokens: dict[str, int] = msgspec.field(default_factory=dict)  # role -> prompt tokens the server's cache spared


class CallCounts(msgspec.Struct):
    """Calls, prompt and completion tokens per role (and the prompt tokens a server's prompt cache
    spared, where it says); retried attempts and failed calls per role and kind. Adds up over
    steps. (The tokens were added after checkpoints held these counts: one written before has
    none, and a run resumed from it counts only the tokens after it.)"""

    calls: dict[str, Count] = msgspec.field(default_factory=dict)
    retries: dict[str, dict[str, Count]] = msgspec.field(default_factory=dict)
    errors: dict[str, dict[str, Count]] = msgspec.field(default_factory=dict)
    prompt_tokens: dict[str, Count] = msgspec.field(default_factory=dict)
    completion_tokens: dict[str, Count] = msgspec.field(default_factory=dict)
    cached_prompt_tokens: dict[str, Count] = msgspec.field(default_factory=dict)

    def add(self, usage: Usage, error: CallError | None) -> None:
        """Count one call (after its retries), its tokens and how it ended; nothing for an
        outcome that is no call (:func:`is_call`)."""
        if not is_call(usage, error):
            return
        self.calls[usage.role] = self.calls.get(usage.role, 0) + 1
        self.prompt_tokens[usage.role] = self.prompt_tokens.get(usage.role, 0) + usage.prompt_tokens
        self.completion_tokens[usage.role] = self.completion_tokens.get(usage.role, 0) + usage.completion_tokens
        if usage.cached_prompt_tokens:
            self.cached_prompt_tokens[usage.role] = self.cached_prompt_tokens.get(usage.role, 0) + usage.cached_prompt_tokens
        for kind in usage.retry_kinds:
            _bump(self.retries, usage.role, kind, 1)
        if error is not None:
            _bump(self.errors, usage.role, error.label, 1)

    def generated_per_item(self, items: int) -> dict[str, float]:
        """Completion tokens per role over ``items`` learned from (one decimal); empty when none was."""
        if items <= 0:
            return {}
        return {role: round(tokens / items, 1) for role, tokens in self.completion_tokens.items()}

    @classmethod
    def of_row(cls, row: LedgerRow) -> CallCounts:
        """The counts one ledger row holds (copied: adding to them leaves the row as it is)."""
        return cls(calls=dict(row.calls), retries={r: dict(k) for r, k in row.retries.items()},
                   errors={r: dict(k) for r, k in row.failures.items()}, prompt_tokens=dict(row.prompt_tokens),
                   cached_prompt_tokens=dict(row.cached_prompt_tokens),
                   completion_tokens=dict(row.completion_tokens))

    def add_counts(self, other: CallCounts) -> None:
        """Add every count of ``other``."""
        for mine_n, theirs_n in ((self.calls, other.calls), (self.prompt_tokens, other.prompt_tokens),
                                 (self.completion_tokens, other.completion_tokens),
                                 (self.cached_prompt_tokens, other.cached_prompt_tokens)):
            for role, n in theirs_n.items():
                mine_n[role] = mine_n.get(role, 0) + n
        for mine, theirs in ((self.retries, other.retries), (self.errors, other.errors)):
            for role, kinds in theirs.items():
                for kind, n in kinds.items():
                    _bump(mine, role, kind, n)

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def total_errors(self) -> int:
        return sum(n for kinds in self.errors.values() for n in kinds.values())

    def errors_by_kind(self) -> dict[str, int]:
        """Failed calls per kind over every role, most frequent first."""
        totals: Counter[str] = Counter()
        for kinds in self.errors.values():
            totals.update(kinds)
        return dict(sorted(totals.items(), key=lambda item: (-item[1], item[0])))


def _bump(table: dict[str, dict[str, int]], role: str, kind: str, n: int) -> None:
    kinds = table.setdefault(role, {})
    kinds[kind] = kinds.get(kind, 0) + n


def is_call(usage: Usage, error: CallError | None) -> bool:
    """Whether an outcome is a model call: a role-less usage without an error
    (:data:`~combee_fast.protocols.base.NO_CALL`) says a learner's proposal, trace part or
    evaluated example was made without one, and is never counted or priced, whatever the learner."""
    return bool(usage.role) or error is not None


def step_outcomes(result: StepResult[Any]) -> list[tuple[Usage, CallError | None]]:
    """``(usage, error)`` of every LLM call the step made (collected traces cost no call; no
    outcome that :func:`is_call` says is none)."""
    outcomes = [o for t in result.traces for o in t.call_outcomes()] + [(p.usage, p.error) for p in result.proposals]
    return [(usage, error) for usage, error in outcomes if is_call(usage, error)]


def call_counts(outcomes: Iterable[tuple[Usage, CallError | None]]) -> CallCounts:
    """Calls, tokens, retries and failures of ``outcomes`` (a step's :func:`step_outcomes`)."""
    counts = CallCounts()
    for usage, error in outcomes:
        counts.add(usage, error)
    return counts


REJECTION_KINDS_KEPT = 5
"""Distinct rejection reasons a ledger row keeps (the commonest; ``rejected`` counts every one)."""


def rejection_reasons(reports: Iterable[Any]) -> dict[str, int]:
    """Why the edits of ``reports`` were rejected: each reason's kind (its text before the first
    ``:`` or ``(``, e.g. ``content has a line break``) and how many times, the commonest
    :data:`REJECTION_KINDS_KEPT`. Rejections that state no reason (only ACE's ops carry one,
    :class:`~combee_fast.ace.playbook.RejectedOp`) are counted in ``rejected`` alone."""
    kinds = Counter(re.split(r"[:(]", reason, maxsplit=1)[0].strip()[:120] for report in reports for rejected in report.rejected
                    if isinstance(reason := getattr(rejected, "reason", None), str) and reason.strip())
    return dict(kinds.most_common(REJECTION_KINDS_KEPT))


def step_episodes(result: StepResult[Any]) -> list[Trajectory]:
    """The agent episodes of a step's traces, in order."""
    return [e for t in result.traces if isinstance(t, EpisodeTrace) for e in t.episodes()]


def serving_models(outcomes: Iterable[tuple[Usage, CallError | None]]) -> dict[str, str]:
    """Per role, the "model @ endpoint" that served its first call of ``outcomes``."""
    models: dict[str, str] = {}
    for usage, _ in outcomes:
        models.setdefault(usage.role, f"{usage.model} @ {usage.endpoint}")
    return models


def ledger_row(
    method: str, epoch: int, step: int, reason: str, batch_size: int, result: StepResult[Any], cumulative: float,
    *, rollout_role: str, predicted_seconds: float | None = None,
) -> LedgerRow:
    """The ledger row of one step of ``batch_size`` items; ``cumulative`` is the run's simulated
    seconds so far; ``rollout_role`` the role whose calls are rollouts; ``predicted_seconds`` the
    step seconds the batch plan predicted for it."""
    outcomes = step_outcomes(result)
    counts = call_counts(outcomes)
    errors = [ErrorRecord(item, e.kind, e.message) for t in result.traces for item, e in t.errors()]
    errors += [ErrorRecord(p.source, p.error.kind, p.error.message) for p in result.proposals if p.error]
    episodes = step_episodes(result)
    failed = Counter(e.error.kind for e in episodes if e.error is not None)
    errors += [ErrorRecord(e.key, e.error.kind, e.error.message) for e in episodes if e.error is not None]
    env_seconds = sum(e.env_seconds for e in episodes)
    rewards = result.rewards
    return LedgerRow(
        method=method, epoch=epoch, step=step, batch_size=batch_size, batch_reason=reason,
        first_try_accuracy=sum(rewards) / len(rewards) if rewards else 0.0,
        calls=counts.calls, models=serving_models(outcomes), prompt_tokens=counts.prompt_tokens,
        completion_tokens=counts.completion_tokens,
        sim_seconds=result.sim_seconds, wall_seconds=result.wall_seconds,
        cumulative_sim_seconds=cumulative, version=result.artifact.version, size=len(result.artifact),
        added=sum(len(r.added_ids) for r in result.reports), rejected=sum(len(r.rejected) for r in result.reports),
        evicted=sum(len(r.evicted) for r in result.reports), errors=tuple(errors),
        retries=counts.retries, failures=counts.errors,
        rollouts=len(episodes) if episodes else counts.calls.get(rollout_role, 0), episodes=len(episodes),
        episode_failures=dict(sorted(failed.items())), env_seconds=env_seconds,
        env_seconds_per_episode=env_seconds / len(episodes) if episodes else 0.0,
        predicted_seconds=predicted_seconds, rejections=rejection_reasons(result.reports),
        cached_prompt_tokens=counts.cached_prompt_tokens,
    )
