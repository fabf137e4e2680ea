"""Offline GEPA training: the search of :mod:`combee_fast.gepa.search` as a run.

The run directory gets ``config.json`` and ``splits.json`` as for ACE, one ledger row per
iteration (``batch_size``: the minibatch; ``batch_reason``: the iteration's outcome;
``first_try_accuracy``: the parent's minibatch accuracy; ``playbook_version``: the best
candidate's pool index; ``bullets``: candidates in the pool; ``added``: 1 when a child was
accepted; ``val_accuracy``: the best candidate's validation accuracy), ``candidates/c*.json``
(every accepted candidate), and ``final.json``/``best.json``: the best candidate by validation
accuracy (GEPA's answer; a search has no separate final artifact).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from combee_fast.config import SessionConfig
from combee_fast.gepa.calls import SOLVER_ROLE, GepaCalls
from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.methods import build_reflection
from combee_fast.gepa.search import GepaSearch, Iteration, grade
from combee_fast.protocols import Task
from combee_fast.roles.agents import RoleClients
from combee_fast.run.ledger import CallCounts, ErrorRecord, LedgerRow, usage_columns
from combee_fast.run.rundir import RunDir
from combee_fast.schema import Example


class CandidateEval(msgspec.Struct, frozen=True):
    """The best candidate's validation result, as the search measured it."""

    accuracy: float
    examples: int
    answered: int | None = None  # the search counts a failed validation call as a wrong answer;
    unanswered: int | None = None  # answered/unanswered are not tracked for GEPA runs yet


class GepaTrainResult(msgspec.Struct, frozen=True):
    """A GEPA run: the best candidate (``final`` and ``best`` alike), time, calls, tokens, ledger."""

    method: str
    final: Candidate
    best: Candidate
    best_val_accuracy: float
    final_eval: CandidateEval
    train_sim_seconds: float
    train_wall_seconds: float
    samples: int
    calls: int
    tokens: int
    metric_calls: int
    candidates: int
    accepted: int
    ledger: tuple[LedgerRow, ...]
    rollouts: int = 0  # solver calls (every metric call is one)
    gpu_seconds: float | None = None  # not measured for GEPA runs yet
    counts: CallCounts = msgspec.field(default_factory=CallCounts)  # train calls, retries, failures
    val_counts: CallCounts = msgspec.field(default_factory=CallCounts)  # not split out for GEPA yet

    def artifact_summary(self) -> dict[str, Any]:
        """What the run summary says about the learned artifact."""
        return {
            "metric_calls": self.metric_calls, "candidates": self.candidates, "accepted": self.accepted,
            "instruction_chars": len(self.final.render()),
        }


def iteration_row(method: str, record: Iteration, cumulative: float, candidates: int) -> LedgerRow:
    """The ledger row of one GEPA iteration (module docstring)."""
    calls = Counter(usage.role for usage in record.usages)
    models, prompt, completion = usage_columns(record.usages)
    errors = tuple(ErrorRecord(item, kind, message) for item, kind, message in record.errors)
    return LedgerRow(
        method=method, epoch=record.epoch, step=record.iteration, batch_size=record.minibatch,
        batch_reason=record.outcome, first_try_accuracy=record.parent_total / max(1, record.minibatch),
        calls=dict(calls), models=models, prompt_tokens=prompt, completion_tokens=completion,
        sim_seconds=record.sim_seconds, wall_seconds=record.wall_seconds, cumulative_sim_seconds=cumulative,
        playbook_version=record.best, bullets=candidates, added=int(record.outcome == "accepted"),
        rejected=0, evicted=0,
        errors=errors, val_accuracy=record.best_val_accuracy, rollouts=calls[SOLVER_ROLE],
    )


async def train_gepa(
    method: str,
    config: SessionConfig,
    task: Task,
    clients: RoleClients,
    train_examples: Sequence[Example],
    val_examples: Sequence[Example],
    *,
    run_dir: RunDir | None = None,
    on_step: Callable[[LedgerRow], None] | None = None,
    seed_candidate: Candidate | None = None,
) -> GepaTrainResult:
    """Run GEPA method ``method`` (``gepa`` or ``combee-gepa``) from ``seed_candidate`` (default:
    our seed instruction) until ``config.gepa.max_metric_calls`` are spent."""
    reflection, minibatch = build_reflection(method, config)
    calls = GepaCalls(task, clients, seed=config.seed)
    search = GepaSearch(
        calls, reflection, minibatch=minibatch, config=config.gepa, seed=config.seed,
        concurrency=config.transport.concurrency,
    )
    ledger: list[LedgerRow] = []
    cumulative = 0.0
    candidates = 1

    def on_iteration(record: Iteration) -> None:
        nonlocal cumulative, candidates
        cumulative += record.sim_seconds
        candidates += record.child is not None
        row = iteration_row(method, record, cumulative, candidates)
        ledger.append(row)
        if run_dir is not None:
            run_dir.append_ledger(row)
        if on_step is not None:
            on_step(row)

    started = time.perf_counter()
    outcome = await search.run(
        train_examples, val_examples, seed_candidate or Candidate.seed(), on_iteration=on_iteration
    )
    wall = time.perf_counter() - started
    chosen = outcome.candidates[outcome.best]
    if run_dir is not None:
        for index, candidate in enumerate(outcome.candidates):
            (run_dir.root / "candidates").mkdir(exist_ok=True)
            candidate.save(run_dir.root / "candidates" / f"c{index:05d}.json")
        chosen.save(run_dir.root / "final.json")
        chosen.save(run_dir.root / "best.json")
    usages = outcome.usages
    return GepaTrainResult(
        method=method, final=chosen, best=chosen, best_val_accuracy=outcome.best_val_accuracy,
        final_eval=CandidateEval(outcome.best_val_accuracy, len(val_examples)),
        train_sim_seconds=outcome.sim_seconds, train_wall_seconds=wall,
        samples=sum(record.minibatch for record in outcome.iterations),
        calls=len(usages), tokens=sum(u.prompt_tokens + u.completion_tokens for u in usages),
        metric_calls=outcome.metric_calls, candidates=len(outcome.candidates),
        accepted=sum(record.outcome == "accepted" for record in outcome.iterations), ledger=tuple(ledger),
        rollouts=sum(row.rollouts for row in ledger), counts=_counts(ledger),
    )


def _counts(ledger: Sequence[LedgerRow]) -> CallCounts:
    """The run's calls, retries and failures, summed over its ledger rows."""
    total = CallCounts()
    for row in ledger:
        total.add_counts(CallCounts.of_row(row))
    return total


async def evaluate_candidate(
    task: Task, clients: RoleClients, candidate: Candidate, examples: Sequence[Example], *, seed: int,
    concurrency: int,
) -> tuple[float, int]:
    """``candidate``'s accuracy on ``examples`` (solves seeded as in the search) and its failed calls."""
    graded = await grade(GepaCalls(task, clients, seed=seed), candidate, examples, concurrency=concurrency)
    return graded.total / max(1, len(examples)), sum(e.error is not None for e in graded.evaluations)
