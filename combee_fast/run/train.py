"""Offline training, as in ACE's offline mode: epochs over a train split, batches planned by a
fixed size or the controller, validation every N steps with best-playbook tracking, a ledger row
per step."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from combee_fast.engine.rng import rng_at
from combee_fast.config import TrainConfig
from combee_fast.playbook import Playbook
from combee_fast.protocols import BatchPlan, Method
from combee_fast.roles.agents import Agents
from combee_fast.run.cost import GpuClock
from combee_fast.run.evaluate import EvalResult, evaluate
from combee_fast.run.ledger import CallCounts, LedgerRow, ledger_row, step_usages
from combee_fast.run.rundir import RunDir
from combee_fast.run.stops import FailureWatch, check_validation


class TrainResult(msgspec.Struct, frozen=True):
    """What a training run produced: final and best playbooks, time, calls, tokens, ledger.

    ``counts``: calls, retries and failures of the learning steps, per role and kind;
    ``val_counts``: the same for every validation call (generator role).
    """

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
    rollouts: int = 0  # generator calls of every step
    gpu_seconds: float | None = None  # None: no GPU clock (unknown)
    counts: CallCounts = msgspec.field(default_factory=CallCounts)
    val_counts: CallCounts = msgspec.field(default_factory=CallCounts)
    stopped_by: str | None = None  # why ``stop`` ended the run early (None: it ran every epoch)

    def artifact_summary(self) -> dict[str, Any]:
        """What the run summary says about the learned artifact."""
        return {"bullets": len(self.final)}


async def train(
    method: Method,
    agents: Agents,
    playbook: Playbook,
    train_items: Sequence[Any],
    val_examples: tuple,
    *,
    plan: BatchPlan,
    config: TrainConfig,
    seed: int,
    eval_concurrency: int,
    run_dir: RunDir | None = None,
    on_step: Callable[[LedgerRow], None] | None = None,
    gpu_clock: GpuClock | None = None,
    stop: Callable[[LedgerRow], str | None] | None = None,
) -> TrainResult:
    """Train ``playbook`` on ``train_items`` for ``config.epochs`` epochs.

    Each epoch visits the items in an order drawn from the seed tree ("order", epoch), the same for
    every method. Validation (when ``val_examples`` is non-empty) runs every ``eval_every`` steps
    and after the last one; its time is not counted as training time. Its accuracy is over the
    answered examples, and the best playbook is the one with the highest such accuracy. With
    ``gpu_clock`` each ledger row holds the GPU-seconds read across its step (validation not included).

    When the calls of the latest steps mostly fail, or a validation leaves most examples
    unanswered, the run stops after the ledger row is written (:mod:`combee_fast.run.stops`;
    ``final.json`` is saved).

    ``stop`` is asked after every step (with the step's ledger row, cumulative counts are the
    caller's to keep): a non-None answer ends the run there, cleanly: no further step starts,
    chains still carried are dropped, the last playbook is validated (when ``val_examples``) and
    saved, and the answer is the result's ``stopped_by``.
    """
    best, best_accuracy = playbook, None
    ledger: list[LedgerRow] = []
    sim_total = wall_total = gpu_total = 0.0
    calls = tokens = samples = rollouts = 0
    final_eval: EvalResult | None = None
    counts, val_counts = CallCounts(), CallCounts()
    watch = FailureWatch(max_failed_fraction=config.max_failed_fraction, min_judged_calls=config.min_judged_calls)
    stopped_by: str | None = None

    async def run_step(batch: list[Any], reason: str, epoch: int, is_last: Callable[[], bool]) -> None:
        nonlocal playbook, best, best_accuracy, sim_total, wall_total, gpu_total, calls, tokens, samples, final_eval
        nonlocal rollouts, stopped_by
        step_number = len(ledger)
        gpu_before = gpu_clock.read(wall_total) if gpu_clock is not None else 0.0
        started = time.perf_counter()
        result = await method.step(batch, playbook, epoch=epoch, step=step_number, shape=plan.step_shape())
        wall_total += time.perf_counter() - started
        step_gpu = gpu_clock.read(wall_total) - gpu_before if gpu_clock is not None else None
        if batch:
            await plan.observe(len(batch), result, len(train_items))
        sim_total += result.sim_seconds
        usages = step_usages(result)
        calls += len(usages)
        tokens += sum(u.prompt_tokens + u.completion_tokens for u in usages)
        samples += len(batch)
        if run_dir is not None and result.playbook.version != playbook.version:
            run_dir.save_version(result.playbook)
            run_dir.append_deltas(result.log)
        playbook = result.playbook
        row = ledger_row(method.name, epoch, step_number, reason, result, sim_total)
        rollouts += row.rollouts
        if step_gpu is not None:
            gpu_total += step_gpu
            row = msgspec.structs.replace(row, gpu_seconds=step_gpu)
        step_counts = CallCounts.of_row(row)
        counts.add_counts(step_counts)
        validation = None
        last = is_last()
        if val_examples and (last or (config.eval_every and (step_number + 1) % config.eval_every == 0)):
            validation = final_eval = await evaluate(agents, playbook, val_examples, concurrency=eval_concurrency)
            for rollout in validation.rollouts:
                val_counts.add(rollout.usage, rollout.error)
            row = msgspec.structs.replace(row, val_accuracy=validation.accuracy, val_answered=validation.answered,
                                          val_unanswered=validation.unanswered)
            if validation.answered and (best_accuracy is None or validation.accuracy > best_accuracy):
                best, best_accuracy = playbook, validation.accuracy
        ledger.append(row)
        if run_dir is not None:
            run_dir.append_ledger(row)
        if on_step is not None:
            on_step(row)
        watch.observe(row, step_counts, playbook, run_dir, last=last)
        if validation is not None:
            check_validation(row, validation, playbook, run_dir, max_failed_fraction=config.max_failed_fraction)
        if stop is not None:
            stopped_by = stop(row)

    for epoch in range(config.epochs):
        if stopped_by is not None:
            break
        last_epoch = epoch == config.epochs - 1
        order = rng_at(seed, "order", epoch).permutation(len(train_items))
        position = 0
        while position < len(order) and stopped_by is None:
            size, reason = plan.next_size(len(order) - position)
            batch = [train_items[i] for i in order[position : position + size]]
            position += len(batch)
            epoch_done = position >= len(order)
            await run_step(batch, reason, epoch, lambda done=last_epoch and epoch_done: done and not method.pending())
        while method.pending() and stopped_by is None:  # carried chains are curated before the epoch ends
            await run_step([], "drain", epoch, lambda done=last_epoch: done and not method.pending())
    if stopped_by is not None and val_examples and (not ledger or ledger[-1].val_accuracy is None):
        final_eval = await evaluate(agents, playbook, val_examples, concurrency=eval_concurrency)
        if final_eval.answered and (best_accuracy is None or final_eval.accuracy > best_accuracy):
            best, best_accuracy = playbook, final_eval.accuracy
    if best_accuracy is None:
        best = playbook
    if run_dir is not None:
        run_dir.save_playbook("final.json", playbook)
        run_dir.save_playbook("best.json", best)
    return TrainResult(
        method=method.name, final=playbook, best=best, best_val_accuracy=best_accuracy,
        final_eval=final_eval, train_sim_seconds=sim_total, train_wall_seconds=wall_total,
        samples=samples, calls=calls, tokens=tokens, ledger=tuple(ledger), rollouts=rollouts,
        gpu_seconds=gpu_total if gpu_clock is not None else None, counts=counts, val_counts=val_counts,
        stopped_by=stopped_by,
    )
