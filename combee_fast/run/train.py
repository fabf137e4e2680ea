"""Offline training for every learner: one loop over a :class:`~combee_fast.record.state.TrainState`.

    start       the method's work before the first batch (GEPA grades its seed), once
    plan        the next batch: its size from the batch plan, its items from the epoch order
    step        the method's step on that batch, from the current artifact
    record      totals, ledger row, version files, stop rules, validation, checkpoint
    finish      final.json and best.json; the result

Each epoch visits the items in an order drawn from the seed tree (``("order", epoch)``), the same
for every method. Validation (when there are validation examples) runs every
``train.eval_every`` steps and after the last one, or inside the step for a method that
validates there (GEPA); its time is not training time. Its accuracy is over the answered
examples, and the best artifact is the one with the highest such accuracy.

The stop rules (:mod:`combee_fast.run.stops`) are asked after every step and once before the
first: the first that answers ends the run there, cleanly (a failure rule raises instead; the
artifact learned so far is saved as ``final.json`` first). When the rule says the work is done
or a limit was reached (``ends`` ``"done"`` or ``"limit"``: a budget, the wall clock, no
improvement) and the method still carries work (Combee's chains still retrying, an asynchronous
method's proposals in flight: calls already made), steps without items drain it first, so a
stop never discards work already paid for; no new item is started. A run stopped by a signal
(``interrupt``) ends without validating and is marked ``interrupted``; one stopped by a limit
says so in ``stopped_by``. With a run directory a checkpoint is written before the first step and
after every completed one; a run resumed from one ends as it would have uninterrupted. A run
replacing a previous one in its directory swaps in after its first checkpointed step with most of
its calls succeeding, or at its clean end (:meth:`~combee_fast.record.rundir.RunDir.replace_previous`).
With a tracer configured, the run, its opening work and each step are spans (:mod:`combee_fast.tracing`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

import msgspec

from combee_fast import tracing
from combee_fast.endpoint.batching import BatchingCurve
from combee_fast.endpoint.server_work import ServerWork
from combee_fast.errors import CallsFailed, EndpointUnreachable
from combee_fast.methods.base import EvalResult, StepResult
from combee_fast.money.cost import GpuClock
from combee_fast.money.dollars import Prices, dollar_summary, role_dollars, validation_summary
from combee_fast.money.improvements import improvement_summary
from combee_fast.protocols.learning import Artifact, CompleteKind
from combee_fast.protocols.running import BatchPlan, Budget, Method, StopRule
from combee_fast.record.concurrency import Gauges, below_cap_lines, concurrency_summary
from combee_fast.record.ledger import CallCounts, LedgerRow, ledger_row
from combee_fast.record.rundir import RunDir
from combee_fast.record.state import CallsRecord, EpochOrder, TrainState
from combee_fast.run.events import Events, RunStopped, StepDone, VersionApplied
from combee_fast.run.recorder import RunRecord

A = TypeVar("A", bound=Artifact)


class TrainResult(msgspec.Struct, frozen=True):
    """What a training run produced. ``final`` and ``best`` are the deployable forms of the last
    and the best artifact (what ``final.json`` and ``best.json`` hold; ACE: playbooks; GEPA: the
    pool's best candidate); ``artifact`` the last artifact itself (GEPA: the whole pool).

    ``ledger``: the latest :data:`~combee_fast.config.HISTORY_KEPT` rows (``ledger.jsonl`` holds
    every row); ``steps``: how many steps the run made (over every session of a resumed run).
    ``counts``: calls, tokens, retries and failures of the learning steps, per role and kind;
    ``val_counts``: the same for the loop's own validation calls. ``interrupted``: stopped by
    SIGINT/SIGTERM before the end, resumable from its checkpoint; ``stopped_by``: the limit that
    ended the run early (None: its work was done); ``summary``: what the learner says of its
    artifact (:meth:`~combee_fast.protocols.CompleteKind.summary`) and what it cost per improvement
    (:func:`~combee_fast.money.improvements.improvement_summary`), in dollars too
    (:func:`~combee_fast.money.dollars.dollar_summary`), and the tokens and dollars of the loop's
    validation calls (:func:`~combee_fast.money.dollars.validation_summary`). ``concurrency``: its calls in flight per
    role, requested and achieved, and ``concurrency_notes`` a line per role held below its cap
    (:mod:`~combee_fast.record.concurrency`; measured, like the wall seconds, so two runs of one seed
    may differ in them). ``episodes``, ``episodes_failed``
    and ``env_seconds``: the agent episodes of the learning steps and their environment seconds.
    ``batching``: the start-up probe's batching curve of the rollout role's endpoint
    (:mod:`combee_fast.endpoint.batching`), which the summary and the page show; ``server_work``:
    the llama.cpp servers' own count of their work during the training, summed (reading prompts,
    generating: :mod:`combee_fast.endpoint.server_work`; None when no endpoint is a llama.cpp
    server serving its counters).
    ``resent``: requests the session's endpoint clients sent once more during the training, on a
    new connection, after a reused one closed unanswered (not retries; set by the session).
    """

    learner: str
    method: str
    final: Any
    best: Any
    artifact: Any
    best_val_accuracy: float | None
    final_eval: EvalResult | None
    train_sim_seconds: float
    train_wall_seconds: float
    samples: int
    calls: int
    tokens: int
    ledger: tuple[LedgerRow, ...]
    rollouts: int = 0
    gpu_seconds: float | None = None  # None: no GPU clock (unknown)
    counts: CallCounts = msgspec.field(default_factory=CallCounts)
    val_counts: CallCounts = msgspec.field(default_factory=CallCounts)
    steps: int = 0
    interrupted: bool = False
    stopped_by: str | None = None
    summary: dict[str, Any] = msgspec.field(default_factory=dict)
    episodes: int = 0
    episodes_failed: int = 0
    env_seconds: float = 0.0
    concurrency: dict[str, dict[str, float]] = msgspec.field(default_factory=dict)
    concurrency_notes: tuple[str, ...] = ()
    batching: BatchingCurve | None = None  # the start-up probe's curve (set by the session; None: not told)
    server_work: ServerWork | None = None  # the llama.cpp servers' work while training (set by the session)
    resent: int = 0  # requests sent once more after a reused connection closed unanswered (set by the session)


class Batch(msgspec.Struct, frozen=True):
    """The items of one step, why its size, the epoch it starts in, and the clocks at its start."""

    items: tuple[Any, ...]
    reason: str
    epoch: int
    started: float
    gpu_before: float


async def train(run: Training[Any]) -> TrainResult:
    """Run ``run`` to its end (module docstring): the whole loop, on one screen. What the tasks of
    a step (or of a validation) raise alike is raised as itself (:func:`_alike`)."""
    state = run.state
    try:
        with tracing.run_span(run.kind.name, run.method.name, run.prices):
            await run.begin()
            if state.steps == 0 and state.stopping is None:
                with tracing.step_span(state.steps, opening=True):
                    opening = run.clock_in((), "start", state.epoch)
                    if (started := await run.method.start(state.artifact)) is not None:
                        await run.record(opening, started)
            while (batch := run.next_batch()) is not None:
                with tracing.step_span(state.steps, epoch=batch.epoch, items=len(batch.items)):
                    result = await run.method.step(
                        batch.items, state.artifact, epoch=batch.epoch, step=state.steps, shape=run.plan.step_shape()
                    )
                    await run.record(batch, result)
            return await run.finish()
    except BaseExceptionGroup as group:  # e.g. a record that cannot be written, from the calls in flight
        alike = _alike(group)
        raise alike from alike.__cause__  # what it was raised from stays said (None: nothing)


def _alike(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first of ``group``'s exceptions when all of them (nested groups opened) are of one
    type, so the run fails as that one failure (e.g. one :class:`~combee_fast.errors.StorageError`
    naming the file), else ``group`` itself."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            pending[:0] = exc.exceptions
        else:
            leaves.append(exc)
    return leaves[0] if leaves and all(type(leaf) is type(leaves[0]) for leaf in leaves) else group


Validate = Callable[[Any], Awaitable[EvalResult]]
"""Scores an artifact on the validation examples."""



DRAINED_ENDS = ("done", "limit")
"""The ends of a run that first finish its carried work (a drain step: no new items). An
interrupted run keeps it in its checkpoint instead, and a resume takes it up."""

CURVE_POINTS = 4
"""Validations a run makes with ``train.eval_every`` unset (None): one each time it has spent
another quarter of its budget, the last after its last step."""

class Training(Generic[A]):
    """One run's parts and its :class:`TrainState`; :func:`train` drives it.

    ``items``: the train items; ``rules``: the stop rules, asked in order (failure rules after the
    others); ``validate``: scores an artifact on the validation examples (None: there are none);
    ``eval_every``: validate every that many steps (0: only after the last; None: each time the
    run has spent another 1/:data:`CURVE_POINTS` of ``budget``, what its stop rules spend, the
    last after the last step); ``gpu_clock``: the
    GPU-seconds of each step (None: unknown); ``events``: where the run's
    :mod:`~combee_fast.run.events` go (the run directory's record, :class:`~combee_fast.run.recorder.RunRecord`:
    ledger, errors, trajectories, is a critical consumer of them);
    ``calls_now``: ``calls.json`` as of now, kept in each checkpoint; ``prices``: each role's
    price (:mod:`~combee_fast.money.dollars`; a role missing: unknown); ``gauges``: each role's
    calls in flight (:mod:`~combee_fast.record.concurrency`; None: not measured).
    """

    def __init__(
        self, kind: CompleteKind[A, Any], method: Method[A], plan: BatchPlan, items: Sequence[Any],
        state: TrainState[A], *, seed: int, rules: Sequence[StopRule], validate: Validate | None,
        eval_every: int | None = 0, run_dir: RunDir | None = None, gpu_clock: GpuClock | None = None,
        events: Events | None = None, resumed: bool = False, calls_now: Callable[[], CallsRecord] | None = None,
        budget: Budget | None = None, prices: Prices | None = None, gauges: Gauges | None = None,
    ) -> None:
        self.kind, self.method, self.plan, self.items, self.state = kind, method, plan, items, state
        self.prices, self.gauges = prices or {}, gauges
        self.seed, self.calls_now = seed, calls_now
        self.rules = [rule for rule in rules if rule.ends != "failure"]
        self.failure_rules = [rule for rule in rules if rule.ends == "failure"]
        self.validate, self.eval_every = validate, eval_every
        self.budget = budget if eval_every is None else None
        self._spent = sum(self.budget.spent(row) for row in state.ledger) if self.budget is not None else 0.0
        self.run_dir, self.gpu_clock, self.resumed = run_dir, gpu_clock, resumed
        self.events = events or Events()
        if run_dir is not None:
            self.events.subscribe(RunRecord(run_dir, steps=state.steps), critical=True)
        self.order = EpochOrder(seed, len(items))

    async def begin(self) -> None:
        """A fresh run: its first checkpoint. A resumed one: the plan's state and the carried work
        back. Then the stop rules, once (a resumed run may have been done already)."""
        if self.resumed:
            self.plan.restore(self.state.plan_state)
            await self.method.resume(self.state.carried, {item.id: item for item in self.items})
        else:
            self._checkpoint()
        self._judge()

    def clock_in(self, items: tuple[Any, ...], reason: str, epoch: int) -> Batch:
        """A step of ``items`` begins now."""
        gpu = self.gpu_clock.read(self.state.wall_seconds) if self.gpu_clock is not None else 0.0
        if self.gauges is not None:
            self.gauges.open_window()
        return Batch(items, reason, epoch, time.perf_counter(), gpu)

    def next_batch(self) -> Batch | None:
        """The next step's batch; None once a stop rule ended the run (after its carried work is
        drained, when the rule says the work is done or a limit, a budget included, was reached:
        work in flight was paid for, and is folded in, never dropped)."""
        state = self.state
        if state.stopping is not None:
            if state.stop_ends in DRAINED_ENDS and self.method.pending():
                return self.clock_in((), "drain", state.epoch)  # work in flight finishes before a clean stop
            return None
        if state.position >= self.order.n and not self.method.batches_span_epochs:
            return self.clock_in((), "drain", state.epoch)  # chains carried past the epoch's last batch
        size, reason = self.plan.next_size(self.order.n - state.position)
        indices, epoch = self.order.take(state, size, span=self.method.batches_span_epochs)
        return self.clock_in(tuple(self.items[i] for i in indices), reason, epoch)

    async def record(self, batch: Batch, result: StepResult[A]) -> None:
        """Everything a completed step leaves: totals, row, files, stop, validation, checkpoint."""
        state, previous = self.state, self.state.artifact
        wall = time.perf_counter() - batch.started
        predicted = self.plan.predicted_seconds() if batch.items else None  # of this step: asked before observe
        if batch.items:
            await self.plan.observe(len(batch.items), result, len(self.items))
        row = ledger_row(self.method.name, batch.epoch, state.steps, batch.reason, len(batch.items), result,
                         state.sim_seconds + result.sim_seconds, rollout_role=self.kind.rollout_role,
                         predicted_seconds=predicted)
        if self.gpu_clock is not None:
            row = msgspec.structs.replace(row, gpu_seconds=self.gpu_clock.read(state.wall_seconds + wall) - batch.gpu_before)
        row = msgspec.structs.replace(
            row, dollars=role_dollars(self.prices, row.prompt_tokens, row.completion_tokens),
            concurrency=self.gauges.read() if self.gauges is not None else {})
        state.add_step(row, batch_size=len(batch.items), wall_seconds=wall)
        state.add_improvements(self.kind.improvements(report) for report in result.reports)
        state.artifact, state.validated = result.artifact, None
        if state.position >= self.order.n and (self.method.batches_span_epochs or not self.method.pending()):
            state.epoch, state.position = state.epoch + 1, 0  # a spanning method's pass ends with its last batch
        if result.artifact.version != previous.version:
            if self.run_dir is not None:
                self.run_dir.save_version(self.kind.version_files(result.artifact))
                self.run_dir.append_deltas(result.log)
            self.events.emit(VersionApplied(result.artifact.version, len(result.artifact), row.step))
        self._judge()
        row = await self._validated(row, result)
        state.ledger.append(row)
        self.events.emit(StepDone(row))
        self._judge_failures()
        self._checkpoint()
        if self.run_dir is not None and _mostly_succeeded(row):
            self.run_dir.replace_previous()

    async def finish(self) -> TrainResult:
        """Save ``final.json`` and ``best.json``; the run's result."""
        state = self.state
        if state.best_score is None:
            state.best = state.artifact
        final, best = self.kind.deployable(state.artifact), self.kind.deployable(state.best)
        if self.run_dir is not None:
            self.run_dir.save_artifact("final.json", final)
            self.run_dir.save_artifact("best.json", best)
            if state.stop_ends != "interrupt":
                self.run_dir.replace_previous()
        self.events.emit(RunStopped(state.stopping or "", state.stop_ends or "done", state.steps))
        return TrainResult(
            learner=self.kind.name, method=self.method.name, final=final, best=best, artifact=state.artifact,
            best_val_accuracy=state.best_score, final_eval=state.final_eval, train_sim_seconds=state.sim_seconds,
            train_wall_seconds=state.wall_seconds, samples=state.samples, calls=state.calls, tokens=state.tokens,
            ledger=tuple(state.ledger), rollouts=state.rollouts,
            gpu_seconds=state.gpu_seconds if self.gpu_clock is not None else None, counts=state.counts,
            val_counts=state.val_counts, steps=state.steps, interrupted=state.stop_ends == "interrupt",
            stopped_by=state.stopping if state.stop_ends == "limit" else None,
            summary={**self.kind.summary(state.artifact),
                     **improvement_summary(state.tokens, state.explored, state.accepted),
                     **dollar_summary(state.dollars, state.accepted),
                     **validation_summary(self.prices, state.val_counts.prompt_tokens,
                                          state.val_counts.completion_tokens)},
            concurrency=concurrency_summary(state.concurrency),
            concurrency_notes=tuple(below_cap_lines(state.concurrency, self.gauges)),
            episodes=state.episodes, episodes_failed=state.episodes_failed, env_seconds=state.env_seconds,
        )

    async def _validated(self, row: LedgerRow, result: StepResult[A]) -> LedgerRow:
        """``row`` with the step's validation, when the method made one or one is due."""
        state = self.state
        validation = result.validation
        due = self._curve_point(row) if self.eval_every is None else \
            bool(self.eval_every) and state.steps % self.eval_every == 0
        if validation is None and self.validate is not None and (due or state.stop_ends in ("done", "limit")):
            validation = await self.validate(state.artifact)
        if validation is None:
            return row
        state.add_validation(validation, state.artifact)
        if self.run_dir is not None and validation.predictions:
            self.run_dir.append_predictions(state.steps, validation.predictions)
        return msgspec.structs.replace(row, val_accuracy=validation.accuracy, val_answered=validation.answered,
                                       val_unanswered=validation.unanswered)

    def _curve_point(self, row: LedgerRow) -> bool:
        """With ``eval_every`` None: whether the step of ``row`` took the run past another
        1/:data:`CURVE_POINTS` of its budget (so a run validates that many times in all, the
        last after its last step, and draws a curve); never without a budget."""
        if self.budget is None or not self.budget.total:
            return False
        before, self._spent = self._spent, self._spent + self.budget.spent(row)
        share = CURVE_POINTS / self.budget.total
        return int(before * share) < int(self._spent * share) and self._spent < self.budget.total

    def _judge(self) -> None:
        """The first clean stop rule that answers sets why the run ends."""
        for rule in self.rules:
            if (reason := rule.check(self.state)) is not None:
                self.state.stopping, self.state.stop_ends = reason, rule.ends
                return

    def _judge_failures(self) -> None:
        """Ask the failure rules; on a failure save what was learned, and say where, then raise."""
        try:
            for rule in self.failure_rules:
                rule.check(self.state)
        except (CallsFailed, EndpointUnreachable) as exc:
            failed = type(exc)(f"{exc}{self._saved()}")
            self.events.emit(RunStopped(str(failed), "failure", self.state.steps))
            raise failed from None

    def _saved(self) -> str:
        """Save the artifact as the run's ``final.json``; the clause saying where it is."""
        version = self.state.artifact.version
        if self.run_dir is None:
            return f"; run stopped at artifact version {version} (no run directory)"
        run_dir = self.run_dir
        run_dir.save_artifact("final.json", self.kind.deployable(self.state.artifact))
        kept = (f" (the previous run in {run_dir.target} is kept: no step of this one had most of its calls succeed)"
                if run_dir.replacing else "")
        return f"; run stopped; {run_dir.location / 'final.json'} holds what was learned so far (version {version}){kept}"

    def _checkpoint(self) -> None:
        """The state as it is now, with the plan's and the method's own and the calls so far, into the checkpoint."""
        if self.run_dir is not None:
            self.state.plan_state, self.state.carried = self.plan.state(), self.method.carried()
            if self.calls_now is not None:
                self.state.calls_record = self.calls_now()
            self.run_dir.save_checkpoint(self.state, self.kind, method=self.method.name, seed=self.seed)


def _mostly_succeeded(row: LedgerRow) -> bool:
    """The step made calls and most of them succeeded."""
    counts = CallCounts.of_row(row)
    return counts.total_calls > 0 and 2 * counts.total_errors < counts.total_calls
