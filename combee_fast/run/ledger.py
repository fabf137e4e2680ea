"""The ledger: one row per learning step, with time, calls and tokens per role, rollouts,
GPU-seconds, errors, accuracy.

Every row names the model and endpoint that served each role, so the model that proposes edits,
the one that answers and the one being evaluated can always be told apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import msgspec

from combee_fast.methods.base import StepResult
from combee_fast.schema import Usage


class ErrorRecord(msgspec.Struct, frozen=True):
    """One failed call of a step: which item or call, its error kind and message."""

    item: str
    kind: str
    message: str


class LedgerRow(msgspec.Struct, frozen=True):
    """One step of a run, as written to ``ledger.jsonl``."""

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
    playbook_version: int
    bullets: int
    added: int
    rejected: int
    evicted: int
    errors: tuple[ErrorRecord, ...]
    val_accuracy: float | None = None
    rollouts: int = 0  # generator calls the step made (collected traces: none)
    gpu_seconds: float | None = None  # what the step cost the hardware (run/cost.py); None: unknown.
    # Measured like wall_seconds (the simulator's busy time follows real arrival times), so two
    # runs of one seed may differ in it while every other field is identical.


def step_usages(result: StepResult) -> list[Usage]:
    """Usage of every LLM call the step made (collected traces cost no call)."""
    return [u for t in result.traces for u in t.call_usages()] + [
        p.usage for p in result.proposals
    ]


def usage_columns(
    usages: Iterable[Usage],
) -> tuple[Counter[str], dict[str, str], dict[str, int], dict[str, int]]:
    """Per role: calls, the "model @ endpoint" that served it, prompt and completion tokens."""
    calls: Counter[str] = Counter()
    prompt: Counter[str] = Counter()
    completion: Counter[str] = Counter()
    models: dict[str, str] = {}
    for usage in usages:
        calls[usage.role] += 1
        models.setdefault(usage.role, f"{usage.model} @ {usage.endpoint}")
        prompt[usage.role] += usage.prompt_tokens
        completion[usage.role] += usage.completion_tokens
    return calls, models, dict(prompt), dict(completion)


def ledger_row(
    method: str, epoch: int, step: int, reason: str, result: StepResult, cumulative: float
) -> LedgerRow:
    """The ledger row of one step; ``cumulative`` is the run's simulated seconds so far."""
    calls, models, prompt, completion = usage_columns(step_usages(result))
    errors = [ErrorRecord(item, e.kind, e.message) for t in result.traces for item, e in t.errors()]
    errors += [ErrorRecord(p.source, p.error.kind, p.error.message) for p in result.proposals if p.error]
    fresh = [t for t in result.traces if t.rollouts and t.rollouts[0].round == 0]
    return LedgerRow(
        method=method, epoch=epoch, step=step, batch_size=len(fresh), batch_reason=reason,
        first_try_accuracy=sum(t.first_correct for t in fresh) / max(1, len(fresh)),
        calls=dict(calls), models=models, prompt_tokens=prompt, completion_tokens=completion,
        sim_seconds=result.sim_seconds, wall_seconds=result.wall_seconds,
        cumulative_sim_seconds=cumulative, playbook_version=result.playbook.version,
        bullets=len(result.playbook), added=sum(len(r.added_ids) for r in result.reports),
        rejected=sum(len(r.rejected) for r in result.reports),
        evicted=sum(len(r.evicted) for r in result.reports), errors=tuple(errors),
        rollouts=calls["generator"],
    )
