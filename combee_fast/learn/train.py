"""Offline training, as in ACE's offline mode: epochs over a train split, batches planned by a
fixed size or the controller, validation every N steps with best-playbook tracking, a ledger row
per step."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import msgspec

from combee_fast.engine.rng import rng_at
from combee_fast.errors import EndpointUnreachable
from combee_fast.learn.agents import Agents
from combee_fast.learn.evaluate import EvalResult, evaluate
from combee_fast.learn.methods import Method, StepResult
from combee_fast.learn.rundir import RunDir
from combee_fast.playbook import Playbook
from combee_fast.schema import Usage


class TrainConfig(msgspec.Struct, frozen=True):
    epochs: int = 1
    eval_every: int = 0  # validate every N steps (0: only after the last step)
    seed: int = 0
    eval_concurrency: int = 256


class BatchPlan(Protocol):
    """Chooses each step's batch size and learns from what the step cost."""

    def next_size(self) -> tuple[int, str]:
        """The next batch size and the reason for it."""
        ...

    async def observe(self, batch_size: int, result: StepResult, samples_in_epoch: int) -> None: ...


class FixedBatch:
    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"batch size must be >= 1, got {size}")
        self.size = size

    def next_size(self) -> tuple[int, str]:
        return self.size, "fixed"

    async def observe(self, batch_size: int, result: StepResult, samples_in_epoch: int) -> None:
        return None


class ErrorRecord(msgspec.Struct, frozen=True):
    item: str
    kind: str
    message: str


class LedgerRow(msgspec.Struct, frozen=True):
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


class TrainResult(msgspec.Struct, frozen=True):
    method: str
    final: Playbook
    best: Playbook
    best_val_accuracy: float | None
    final_eval: EvalResult | None
    train_sim_seconds: float
    train_wall_seconds: float
    samples: int
    calls: int
    tokens: int
    ledger: tuple[LedgerRow, ...]


def _usages(result: StepResult) -> list[Usage]:
    return [u for t in result.traces for u in t.call_usages()] + [
        p.usage for p in result.proposals
    ]


def _ledger_row(
    method: str, epoch: int, step: int, reason: str, result: StepResult, cumulative: float
) -> LedgerRow:
    calls: Counter[str] = Counter()
    prompt: Counter[str] = Counter()
    completion: Counter[str] = Counter()
    models: dict[str, str] = {}
    for usage in _usages(result):
        calls[usage.role] += 1
        models.setdefault(usage.role, f"{usage.model} @ {usage.endpoint}")
        prompt[usage.role] += usage.prompt_tokens
        completion[usage.role] += usage.completion_tokens
    errors = [ErrorRecord(item, e.kind, e.message) for t in result.traces for item, e in t.errors()]
    errors += [ErrorRecord(p.source, p.error.kind, p.error.message) for p in result.proposals if p.error]
    fresh = [t for t in result.traces if t.rollouts and t.rollouts[0].round == 0]
    return LedgerRow(
        method=method, epoch=epoch, step=step, batch_size=len(fresh), batch_reason=reason,
        first_try_accuracy=sum(t.first_correct for t in fresh) / max(1, len(fresh)),
        calls=dict(calls), models=models, prompt_tokens=dict(prompt), completion_tokens=dict(completion),
        sim_seconds=result.sim_seconds, wall_seconds=result.wall_seconds,
        cumulative_sim_seconds=cumulative, playbook_version=result.playbook.version,
        bullets=len(result.playbook), added=sum(len(r.added_ids) for r in result.reports),
        rejected=sum(len(r.rejected) for r in result.reports),
        evicted=sum(len(r.evicted) for r in result.reports), errors=tuple(errors),
    )


UNREACHABLE_KINDS = frozenset({"connection", "timeout"})


def _stop_if_unreachable(row: LedgerRow, playbook: Playbook, run_dir: RunDir | None) -> None:
    """Stop a run whose step could not reach its endpoints at all: every call failed in transport
    (after its retries). What was learned so far is saved first, as final.json."""
    calls = sum(row.calls.values())
    lost = [e for e in row.errors if e.kind in UNREACHABLE_KINDS]
    if calls == 0 or len(lost) < calls:
        return
    where = ""
    if run_dir is not None:
        run_dir.save_playbook("final.json", playbook)
        where = f"; {run_dir.root / 'final.json'} holds playbook version {playbook.version}"
    raise EndpointUnreachable(
        f"every call of step {row.step + 1} failed to reach its endpoint ({lost[0].message}){where}"
    )


async def train(
    method: Method,
    agents: Agents,
    playbook: Playbook,
    train_items: Sequence[Any],
    val_examples: tuple,
    *,
    plan: BatchPlan,
    config: TrainConfig,
    run_dir: RunDir | None = None,
    on_step: Callable[[LedgerRow], None] | None = None,
) -> TrainResult:
    """Train ``playbook`` on ``train_items`` for ``config.epochs`` epochs.

    Each epoch visits the items in an order drawn from the seed tree ("order", epoch), the same for
    every method. Validation (when ``val_examples`` is non-empty) runs every ``eval_every`` steps
    and after the last one; its time is not counted as training time.
    """
    best, best_accuracy = playbook, None
    ledger: list[LedgerRow] = []
    sim_total = wall_total = 0.0
    calls = tokens = samples = 0
    final_eval: EvalResult | None = None

    async def run_step(batch: list[Any], reason: str, epoch: int, is_last: Callable[[], bool]) -> None:
        nonlocal playbook, best, best_accuracy, sim_total, wall_total, calls, tokens, samples, final_eval
        step_number = len(ledger)
        started = time.perf_counter()
        result = await method.step(batch, playbook, epoch=epoch, step=step_number)
        wall_total += time.perf_counter() - started
        if batch:
            await plan.observe(len(batch), result, len(train_items))
        sim_total += result.sim_seconds
        usages = _usages(result)
        calls += len(usages)
        tokens += sum(u.prompt_tokens + u.completion_tokens for u in usages)
        samples += len(batch)
        if run_dir is not None and result.playbook.version != playbook.version:
            run_dir.save_version(result.playbook)
            run_dir.append_deltas(result.log)
        playbook = result.playbook
        row = _ledger_row(method.name, epoch, step_number, reason, result, sim_total)
        if val_examples and (is_last() or (config.eval_every and (step_number + 1) % config.eval_every == 0)):
            final_eval = await evaluate(agents, playbook, val_examples, concurrency=config.eval_concurrency)
            row = msgspec.structs.replace(row, val_accuracy=final_eval.accuracy)
            if best_accuracy is None or final_eval.accuracy > best_accuracy:
                best, best_accuracy = playbook, final_eval.accuracy
        ledger.append(row)
        if run_dir is not None:
            run_dir.append_ledger(row)
        if on_step is not None:
            on_step(row)
        _stop_if_unreachable(row, playbook, run_dir)

    for epoch in range(config.epochs):
        last_epoch = epoch == config.epochs - 1
        order = rng_at(config.seed, "order", epoch).permutation(len(train_items))
        position = 0
        while position < len(order):
            size, reason = plan.next_size()
            batch = [train_items[i] for i in order[position : position + size]]
            position += len(batch)
            epoch_done = position >= len(order)
            await run_step(batch, reason, epoch, lambda done=last_epoch and epoch_done: done and not method.pending())
        while method.pending():  # chains carried past the last batch are curated before the epoch ends
            await run_step([], "drain", epoch, lambda done=last_epoch: done and not method.pending())
    if best_accuracy is None:
        best = playbook
    if run_dir is not None:
        run_dir.save_playbook("final.json", playbook)
        run_dir.save_playbook("best.json", best)
    return TrainResult(
        method=method.name, final=playbook, best=best, best_val_accuracy=best_accuracy,
        final_eval=final_eval, train_sim_seconds=sim_total, train_wall_seconds=wall_total,
        samples=samples, calls=calls, tokens=tokens, ledger=tuple(ledger),
    )
