"""Offline training, as in ACE's offline mode: epochs over a train split, batches planned by a
fixed size or the controller, validation every N steps with best-playbook tracking, a ledger row
per step."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from combee_fast.engine.rng import rng_at
from combee_fast.config import HISTORY_KEPT, TrainConfig
from combee_fast.playbook import Playbook
from combee_fast.protocols import BatchPlan, Method
from combee_fast.roles.agents import Agents
from combee_fast.run.checkpoint import Checkpoint, save_checkpoint
from combee_fast.run.cost import GpuClock
from combee_fast.run.evaluate import EvalResult, evaluate
from combee_fast.run.interrupt import StopRequest
from combee_fast.run.ledger import CallCounts, LedgerRow, ledger_row, step_usages
from combee_fast.run.rundir import RunDir
from combee_fast.run.stops import FailureWatch, check_validation


class TrainResult(msgspec.Struct, frozen=True):
    """What a training run produced: final and best playbooks, time, calls, tokens, ledger.

    ``ledger``: the latest :data:`~combee_fast.config.HISTORY_KEPT` rows (``ledger.jsonl`` holds
    every row); ``steps``: how many steps the run made.

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
    steps: int = 0  # learning steps completed (over every session of a resumed run)
    interrupted: bool = False  # stopped by SIGINT/SIGTERM before the end; resumable from its checkpoint
    stopped_by: str | None = None  # why ``budget`` ended the run early (None: it ran every epoch)

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
    resume: Checkpoint | None = None,
    interrupt: StopRequest | None = None,
    budget: Callable[[LedgerRow], str | None] | None = None,
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

    With ``run_dir`` a :class:`~combee_fast.run.checkpoint.Checkpoint` is written before the first
    step and after every completed one; ``resume`` (a checkpoint, with ``run_dir`` reopened by
    :meth:`RunDir.reopen`) continues from it, and the run ends as it would have uninterrupted
    (``playbook`` is then ignored). When ``interrupt`` is requested (SIGINT, SIGTERM), the run
    stops after the step in flight, saves ``final.json`` and ``best.json`` and returns marked
    ``interrupted``.

    ``budget`` is asked after every step (with the step's ledger row; cumulative counts are the
    caller's to keep): a non-None answer ends the run there, cleanly: no further step starts,
    chains still carried are dropped, the last playbook is validated (when ``val_examples``) and
    saved, and the answer is the result's ``stopped_by``.
    """
    cp = resume or Checkpoint(steps=0, epoch=0, position=0, playbook=playbook, best=playbook)
    playbook, best, best_accuracy, final_eval = cp.playbook, cp.best, cp.best_accuracy, cp.final_eval
    sim_total, wall_total, gpu_total = cp.sim_total, cp.wall_total, cp.gpu_total
    calls, tokens, samples, rollouts = cp.calls, cp.tokens, cp.samples, cp.rollouts
    counts, val_counts = cp.counts, cp.val_counts
    watch = cp.watch or FailureWatch(max_failed_fraction=config.max_failed_fraction,
                                     min_judged_calls=config.min_judged_calls)
    ledger = (read_ledger(run_dir) if resume is not None and run_dir is not None  # the latest rows only:
              else collections.deque(maxlen=HISTORY_KEPT))                        # ledger.jsonl holds all
    steps, epoch, position = cp.steps, cp.epoch, cp.position
    if resume is not None:
        restore = getattr(plan, "restore", None)
        if restore is not None:
            restore(cp.plan_state)
        if cp.carried:
            by_id = {item.id: item for item in train_items}
            await method.resume_carried(  # type: ignore[attr-defined]
                [by_id[item_id] for item_id, _ in cp.carried], [offset for _, offset in cp.carried],
                cp.carried_snapshot, epoch=cp.carried_epoch,
            )
    carried_snapshot: tuple[Playbook | None, int] = (cp.carried_snapshot, cp.carried_epoch)

    def checkpoint() -> None:
        if run_dir is None:
            return
        plan_state = getattr(plan, "state", None)
        carried = getattr(method, "carried", None)
        save_checkpoint(run_dir.root, Checkpoint(
            steps=steps, epoch=epoch, position=position, playbook=playbook, best=best,
            best_accuracy=best_accuracy, final_eval=final_eval, sim_total=sim_total, wall_total=wall_total,
            gpu_total=gpu_total, calls=calls, tokens=tokens, samples=samples, rollouts=rollouts,
            counts=counts, val_counts=val_counts, watch=watch,
            plan_state=plan_state() if plan_state is not None else None,
            carried=carried() if carried is not None and method.pending() else (),
            carried_snapshot=carried_snapshot[0] if method.pending() else None,
            carried_epoch=carried_snapshot[1], files=run_dir.file_lengths(),
        ))

    async def run_step(batch: list[Any], reason: str, epoch: int, is_last: Callable[[], bool]) -> None:
        nonlocal playbook, best, best_accuracy, sim_total, wall_total, gpu_total, calls, tokens, samples, final_eval
        nonlocal rollouts, steps, carried_snapshot, stopped_by
        step_number = steps
        gpu_before = gpu_clock.read(wall_total) if gpu_clock is not None else 0.0
        started = time.perf_counter()
        snapshot = playbook
        result = await method.step(batch, playbook, epoch=epoch, step=step_number, shape=plan.step_shape())
        carried_snapshot = (snapshot, epoch)
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
        steps += 1
        if run_dir is not None:
            run_dir.append_ledger(row)
        if on_step is not None:
            on_step(row)
        watch.observe(row, step_counts, playbook, run_dir, last=last)
        if validation is not None:
            check_validation(row, validation, playbook, run_dir, max_failed_fraction=config.max_failed_fraction)
        if budget is not None:
            stopped_by = budget(row)

    stopped_by: str | None = None
    if resume is None:
        checkpoint()
    interrupted = False
    order_of: tuple[int, Any] = (-1, None)
    while epoch < config.epochs:
        if order_of[0] != epoch:
            order_of = (epoch, rng_at(seed, "order", epoch).permutation(len(train_items)))
        order, end, last_epoch = order_of[1], len(order_of[1]), epoch == config.epochs - 1
        if position >= end and not method.pending():
            epoch, position = epoch + 1, 0
            continue
        if position < end:
            size, reason = plan.next_size(end - position)
            batch = [train_items[i] for i in order[position : position + size]]
            position += len(batch)
        else:  # chains carried past the last batch are curated before the epoch ends
            batch, reason = [], "drain"
        await run_step(batch, reason, epoch, lambda: last_epoch and position >= end and not method.pending())
        if position >= end and not method.pending():
            epoch, position = epoch + 1, 0
        checkpoint()
        if interrupt is not None and interrupt.requested is not None:
            interrupted = epoch < config.epochs
            break
        if stopped_by is not None:
            break
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
        steps=steps, interrupted=interrupted, stopped_by=stopped_by,
    )


def read_ledger(run_dir: RunDir) -> collections.deque[LedgerRow]:
    """The latest :data:`~combee_fast.config.HISTORY_KEPT` rows of the run's ``ledger.jsonl`` (a
    resumed run's earlier steps), read a line at a time."""
    rows: collections.deque[LedgerRow] = collections.deque(maxlen=HISTORY_KEPT)
    path = run_dir.root / "ledger.jsonl"
    if path.exists():
        decoder = msgspec.json.Decoder(LedgerRow)
        with path.open("rb") as lines:
            rows.extend(decoder.decode(line) for line in lines if line.strip())
    return rows
