"""Stage-decoupled GEPA (method ``async-gepa``): proposals flow through the stages of
:mod:`.stages` with no barrier between them, as a :class:`~combee_fast.protocols.Method` of the
run loop.

Up to ``gepa.pipeline.proposals`` proposals are in flight at once. Each is started against the
pool as it is at that moment (its parent drawn as the synchronous loop draws it, seed path
``("gepa", "parent", iteration)``), and goes grade -> reflect -> aggregate -> screen -> validate;
every stage has its own in-flight limit and a queue that never holds more than the proposals in
flight. A child ready to be screened after the pool moved on is *stale*: the staleness policy
(:mod:`.staleness`) decides how it is screened. An accepted child joins the pool when its
validation ends. With ``gepa.pipeline.merge``, if other candidates joined after the base it was
made from was taken (a sibling proposed against the same pool joined first), it is *merged*: its
changes made to the best of those are validated too and join as one more candidate of the same
proposal, and so on while candidates keep joining meanwhile, each validation reserved from the
budget when it is decided. With one proposal in flight nothing joins meanwhile.

**The closing merge.** With ``gepa.pipeline.merge``, once the search drains (no proposal may
start any more and the last one in flight has ended), the candidates tied at the best mean
validation score, which validation cannot tell apart, are merged into one: each one's changes
against the seed (the lines it added and dropped, :func:`~combee_fast.gepa.revisions.rebase`)
made to the first of them. Lineages that grew side by side and never met each hold lessons the
others lack, and a validation set of a few dozen pass/fail examples ties them; which of them
would be deployed was otherwise the accident of which joined first. The merge is validated
(reserved from the budget, skipped when it cannot pay) and joins only when it scores at least
as well as they do; it is then the pool's best on ties (:attr:`~.pool.GepaState.closing`).

**Time.** The search runs in simulated time (:class:`~combee_fast.engine.virtual.StageSchedule`):
each stage task starts when its stage has a free slot and lasts its own critical path; events are
taken in simulated-time order once every started task's duration is known, so every decision
(which pool a parent is drawn from, how stale a child is, in which order children join the pool,
what the budget can still pay for) depends on the calls' results and latencies alone, never on
the order in which requests complete. From the replay cache a run is the same whatever that
order, and so is a live run on an endpoint whose latencies do not follow its load (the ``flat``
and ``hosted-api`` presets); on one whose latencies do (``h200-70b``, a real server) a live run
follows what it measured. The real work runs ahead of that schedule wherever it can: a stage whose inputs
exist and whose running is certain (a parent graded and not perfect is reflected on; a reflection
is merged; an accepted child is validated) starts at once, under the stage's limit as a real
in-flight limit too, so stages of different proposals overlap on the endpoint as they do in the
schedule. Only the parent's grading (the draw depends on the pool) and the screening (the policy
depends on it) wait for the schedule to reach them; because of those waits, on an endpoint whose
latency grows with load the stages that overlap in the schedule did not all overlap on it, and
the schedule's time is then a lower estimate.

On a task solved by acting, a grading's episodes also spend real seconds in their environments;
those differ from run to run, so the schedule leaves them out of its durations (a replayed run
takes the same decisions). They lengthen the search's reported time instead, carried along what
each task waited for (:mod:`.delays`): its proposal's previous stage, the pool when its start
read it, the slot it took.

**Budget.** A proposal is started only once the budget can pay for every metric call it may make
(:mod:`.budget`); once the proposals in flight have ended and a proposal on the minibatch asked
for does not fit in what is left, nothing more starts and the pool's ``budget_closed`` is set.
The budget is never overshot, whatever the faults.

**The seed.** The seed's validation is the search's first task (key :data:`SEEDING`, in the
validate stage, its metric calls reserved first), not a barrier before it: the first
proposals start beside it, all on the seed (the one candidate there is to draw, so the draw
needs no validation score). An accepted child's validation waits for the seed's to end, so the
seed always joins the pool first, as candidate 0; the seed's validation is not a proposal (it
takes none of the ``proposals`` in flight). The run loop's opening step therefore does nothing
(:meth:`AsyncGepa.start`), and the seed joins in the step during which its validation ends.

**Validation order.** A child's validation starts its solves longest first, by the model
seconds the candidate it was made from took on each instance (:func:`~.iteration.grade`; the
seed's own in example order).

**Speculation.** With ``gepa.pipeline.speculate``, a child whose minibatch lies in the
validation set and is screened against its parent is graded on the whole validation set at
once, its minibatch first (:meth:`~.stages.StageWork.run`): the screening task lasts until those
solves end and decides as a screening does (they are the solves a screening makes: each is
seeded by its example); an accepted child's validation task is the rest of that grading, from
the screening's end. Its metric calls are spent when the screening is dispatched (the
validation's, its minibatch not solved twice); a rejected child's other solves were spent for
nothing. A merge's validation is never speculated.

**A step.** ``step(items)`` starts one proposal on the minibatch ``items`` (the batch plan sizes
it, the epoch order picks it) as soon as it can start (at once, unless the plan lowered the
proposals in flight or the budget must first get back what proposals in flight reserved and
will not need), then advances the schedule until another proposal can start (a slot free and the
budget able to pay for one of that size). A step with no items, or past ``gepa.max_epochs``,
starts nothing and advances until a proposal ended and another could start, or nothing is left.
Each step's result holds the proposals that ended in it (their :class:`~.pool.PoolChange`, with
what they measured), the calls of the stage tasks that ended in it, and the simulated time the
schedule advanced. A step ends as soon as another proposal may start, without waiting for the
stage work it just started (the decision reads no duration: :meth:`AsyncGepa._advance`), so the
proposals in flight run on the endpoint side by side. A checkpoint holds the whole schedule
(:meth:`AsyncGepa.carried`), its started tasks whose duration is not known yet among it; their
work, and the work started ahead of the schedule and still running, is run again after a resume,
as the carried chains of ACE are (same calls, so the same answers and durations from a
deterministic endpoint or the replay cache).

With ``proposals = 1`` the pipeline decides as the synchronous loop does: one iteration after
the other, the same seeds, the same pool (its budget differs: an iteration the budget cannot
pay for in full does not start; and its time: the first iteration runs beside the seed's
validation).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from combee_fast.gepa.settings import GepaConfig
from combee_fast.engine.rng import rng_at
from combee_fast.engine.virtual import Ended, ScheduleState, StageSchedule
from combee_fast.gepa.budget import MetricBudget
from combee_fast.gepa.calls import GepaCalls
from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.delays import EnvDelays
from combee_fast.gepa.iteration import Graded
from combee_fast.gepa.measure import ProposalMeasure, added_lines, line_retention
from combee_fast.gepa.pool import GepaState, PoolChange, model_seconds
from combee_fast.gepa.revisions import rebase
from combee_fast.gepa.stages import GRADING_STAGES, STAGES, Proposal, StageWork, duration, env_delay
from combee_fast.gepa.staleness import staleness_policy
from combee_fast.methods.base import StepResult, StepShape
from combee_fast.schema import Example, GradedAnswer, Proposal as Call

SEEDING = -1
"""The key of the seed's validation among the search's tasks in flight (module docstring)."""


class PipelineState(msgspec.Struct, kw_only=True):
    """What a checkpoint keeps of the search in flight: the simulated-time ``schedule``, every
    proposal in flight by iteration, the ``budget``, how many proposals were ``started``, the
    metric calls of the grading tasks in flight in simulated time (``load``), the minibatch
    size last asked for (``wanted``), the environment delays on the search's time (``delays``,
    :mod:`.delays`) and whether the closing merge was decided (``closed``)."""

    schedule: Any
    proposals: dict[int, Proposal]
    budget: MetricBudget
    started: int
    load: int = 0
    wanted: int = 1
    delays: EnvDelays = msgspec.field(default_factory=EnvDelays)
    closed: bool = False


class KeptPipeline(msgspec.Struct, kw_only=True):
    """A :class:`PipelineState` as a checkpoint keeps it: the schedule as its
    :class:`~combee_fast.engine.virtual.ScheduleState`, the rest as it is."""

    schedule: ScheduleState
    proposals: dict[int, Proposal]
    budget: MetricBudget
    started: int
    load: int
    wanted: int
    delays: EnvDelays = msgspec.field(default_factory=EnvDelays)
    closed: bool = False

    @classmethod
    def of(cls, state: PipelineState) -> KeptPipeline:
        return cls(schedule=state.schedule.state(), proposals=state.proposals, budget=state.budget,
                   started=state.started, load=state.load, wanted=state.wanted, delays=state.delays,
                   closed=state.closed)

    def pipeline(self) -> PipelineState:
        """The search state to go on from."""
        return PipelineState(schedule=StageSchedule.restored(self.schedule), proposals=dict(self.proposals),
                             budget=self.budget, started=self.started, load=self.load, wanted=self.wanted,
                             delays=self.delays, closed=self.closed)


class _Slice:
    """What one step saw end: proposals, stage tasks' traces and calls, parents' minibatch scores."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.reports: list[PoolChange] = []
        self.traces: list[GradedAnswer] = []
        self.calls: list[Call[Any]] = []
        self.rewards: list[float] = []


class AsyncGepa:
    """The stage-decoupled search (module docstring), named ``name`` in ledgers and summaries."""

    batches_span_epochs = True

    def __init__(self, name: str, calls: GepaCalls, work: StageWork, *, config: GepaConfig, seed: int) -> None:
        if not work.val:
            raise ValueError("GEPA needs at least one validation example")
        self.name = name
        self.calls = calls
        self.work = work
        self.config = config
        self.seed = seed
        self.policy = staleness_policy(config.pipeline.staleness, bound=config.pipeline.max_staleness)
        self._limits = config.pipeline.limits()
        self._real_limits = {stage: asyncio.Semaphore(limit) for stage, limit in self._limits.items()}
        self._state: PipelineState | None = None
        self._running: dict[tuple[int, str], asyncio.Task[Any]] = {}
        self._revive = False
        self._pool: GepaState | None = None
        self._slice = _Slice(0)
        self._in_flight = config.pipeline.proposals

    # -- the Method protocol ---------------------------------------------------------------------

    async def start(self, artifact: GepaState) -> None:
        """Nothing: the seed's validation is the search's first task (module docstring)."""
        return None

    def pending(self) -> int:
        """Proposals in flight, and the seed's validation while it runs."""
        return len(self._state.proposals) if self._state is not None else 0

    def carried(self) -> KeptPipeline | None:
        """The search in flight (None: nothing is; the pool then says everything)."""
        return KeptPipeline.of(self._state) if self._state is not None and self.pending() else None

    def carried_type(self, artifact_type: Any) -> Any:
        return KeptPipeline | None

    async def resume(self, carried: KeptPipeline | None, items: Mapping[str, Any]) -> None:
        """Take up the search a checkpoint kept; the work of its started stages still without a
        result is run again at the next step."""
        self._state = carried.pipeline() if carried is not None else None
        self._revive = carried is not None

    async def step(
        self, items: Sequence[Any], artifact: GepaState, *, epoch: int, step: int, shape: StepShape | None = None
    ) -> StepResult[GepaState]:
        """Start one proposal on ``items`` and advance to the next point where another can start
        (module docstring); ``shape`` is the proposal's reflection groups' shape. A step that
        raises (a grading that raised, the run cancelled) ends the search: the stage work still
        running is cancelled and waited for first, so none of it outlives the run."""
        try:
            return await self._step(items, artifact, epoch=epoch, shape=shape)
        except BaseException:
            running = list(self._running.values())
            self._running.clear()
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise

    async def _step(self, items: Sequence[Any], artifact: GepaState, *, epoch: int,
                    shape: StepShape | None) -> StepResult[GepaState]:
        started = time.perf_counter()
        state = self._begin(artifact)
        self._slice = _Slice(artifact.version)
        began = state.delays.time(state.schedule.clock)  # the search's time, environment delays included
        past = self.config.max_epochs is not None and epoch >= self.config.max_epochs
        planned = shape.in_flight if shape is not None else None
        self._in_flight = min(self.config.pipeline.proposals, planned or self.config.pipeline.proposals)
        if items and not past:
            state.wanted = len(items)
            await self._advance(self._admissible)  # a slot, and the budget for this size (at once, but after a
            if self._admissible():                 # lowered limit or near the budget's end)
                self._admit(tuple(items), shape)
                await self._advance(self._admissible)
        else:
            ended = len(self._slice.reports)
            await self._advance(lambda: len(self._slice.reports) > ended and self._admissible())
            if self.config.pipeline.merge and not state.proposals and not state.closed:
                state.closed = True
                if self._close():
                    await self._advance(lambda: False)
        pool = self._pool
        assert pool is not None
        if not state.proposals and not self._fits(state.wanted):
            pool = msgspec.structs.replace(pool, budget_closed=True)
        if pool.version - self._slice.version > 1:
            pool = msgspec.structs.replace(pool, step_from=self._slice.version)
        elif pool.step_from is not None:
            pool = msgspec.structs.replace(pool, step_from=None)
        self._pool = pool
        done = self._slice
        advanced = state.delays.time(state.schedule.clock) - began
        return StepResult(
            pool, tuple(done.reports), tuple(done.traces), tuple(done.calls), advanced, time.perf_counter() - started,
            (), (), rewards=tuple(done.rewards), validation=pool.validation() if pool.candidates else None,
        )

    # -- starting proposals ----------------------------------------------------------------------

    def _begin(self, artifact: GepaState) -> PipelineState:
        """The search state at a step's start: created from the pool on the first step (and after
        a resume with nothing in flight); work a resume left without result started again."""
        self._pool = msgspec.structs.replace(artifact, step_from=None)
        if self._state is None:
            self._state = PipelineState(schedule=StageSchedule(self._limits), proposals={},
                                        budget=MetricBudget(self.config.max_metric_calls, spent=artifact.metric_calls),
                                        started=artifact.iterations)
            if not artifact.candidates:
                self._seed()
        if self._revive:
            self._revive = False
            for proposal in self._state.proposals.values():
                for stage in proposal.dispatched:
                    if proposal.result(stage) is None:
                        self._start_work(proposal, stage)
        return self._state

    def _fits(self, minibatch: int) -> bool:
        """Whether the budget can pay for a proposal on ``minibatch`` examples."""
        assert self._state is not None
        return self.work.worst_case(minibatch, rescreens=self.policy.rescreens) <= self._state.budget.free

    def _admissible(self) -> bool:
        """Another proposal can start: fewer than the limit in flight, and the budget can pay for
        one on a minibatch of the size last asked for."""
        assert self._state is not None
        proposing = len(self._state.proposals) - (SEEDING in self._state.proposals)
        return proposing < self._in_flight and self._fits(self._state.wanted)

    def _seed(self) -> None:
        """Queue the seed's validation, the search's first task (its calls reserved first: the
        configuration checked that the budget pays for them, :func:`~.kind.check_budget_pays_one_step`)."""
        state, pool = self._state, self._pool
        assert state is not None and pool is not None
        calls = len(self.work.val)
        state.budget.reserve(calls)
        proposal = Proposal(iteration=SEEDING, items=(), proposed_at=0, parent=0, component=pool.seed.names()[0],
                            shape=None, reserved=calls, started_at=state.schedule.clock, child=pool.seed)
        state.proposals[SEEDING] = proposal
        self._queue(proposal, "validate", start=True)

    def _admit(self, items: tuple[Example, ...], shape: StepShape | None) -> None:
        """Start iteration ``started`` on ``items`` against the pool as it is now: draw its parent,
        reserve its calls, queue its parent's grading."""
        state, pool = self._state, self._pool
        assert state is not None and pool is not None
        iteration = state.started
        draw = rng_at(self.seed, "gepa", "parent", iteration)
        parent = pool.pool().sample_parent(draw) if pool.candidates else 0  # the seed, still validating
        names = pool.candidate(parent).names()
        need = self.work.worst_case(len(items), rescreens=self.policy.rescreens)
        state.budget.reserve(need)
        version = _version(pool)
        proposal = Proposal(iteration=iteration, items=items, proposed_at=version, parent=parent,
                            component=names[iteration % len(names)], shape=shape, reserved=need,
                            started_at=state.schedule.clock, based_at=version, chain=state.delays.admitted())
        state.proposals[iteration] = proposal
        state.started += 1
        self._queue(proposal, "grade", start=True)

    # -- running the schedule --------------------------------------------------------------------

    async def _advance(self, until: Callable[[], bool]) -> None:
        """Take events in simulated-time order until ``until()`` holds between two of them, or
        nothing is in flight. ``until()`` is asked before the durations of the tasks just started
        are waited for: it reads what events and starts changed (proposals in flight, the budget,
        what ended), never a duration, and every task without one started at the clock, so it
        ends no earlier than the decision. A step can thus end, and the next proposal start,
        while the stage work just started runs on the endpoint (the decisions, and so a replayed
        run, are those of waiting first)."""
        state = self._state
        assert state is not None
        schedule: StageSchedule[int] = state.schedule
        while True:
            for task in schedule.start_ready():
                proposal = state.proposals[task.key]
                queued = proposal.spans[task.stage][0]
                proposal.waited += task.at - queued
                proposal.spans[task.stage] = (task.at, task.at)
                proposal.delays[task.stage] = state.delays.start(proposal.chain, task.stage, queued=task.at > queued)
                if task.stage in GRADING_STAGES:
                    state.load += self.work.metric_calls(task.stage, proposal)
                    proposal.loads[task.stage] = state.load
                self._start_work(proposal, task.stage)
            if until():
                return
            for task in schedule.unfinished():
                schedule.finish(task, duration(await self._result(state.proposals[task.key], task.stage)))
            ended = schedule.next_end()
            if ended is None:
                return
            self._ended(ended)

    def _queue(self, proposal: Proposal, stage: str, *, start: bool = False) -> None:
        """Queue ``stage`` of ``proposal`` for a slot; ``start``: its work may begin now."""
        assert self._state is not None
        self._state.schedule.enqueue(stage, proposal.iteration)
        proposal.spans[stage] = (self._state.schedule.clock, self._state.schedule.clock)
        if start:
            self._start_work(proposal, stage)

    def _start_work(self, proposal: Proposal, stage: str) -> None:
        """Begin ``stage``'s real work for ``proposal`` unless it began already (its metric calls
        are spent from the proposal's reservation when it first begins)."""
        key = (proposal.iteration, stage)
        if key in self._running or proposal.result(stage) is not None:
            return
        if stage not in proposal.dispatched:
            assert self._state is not None
            calls = self.work.metric_calls(stage, proposal)
            self._state.budget.spend(calls)
            proposal.reserved -= calls
            proposal.dispatched.append(stage)
        self._running[key] = asyncio.create_task(self._work(proposal, stage), name=f"gepa[{key[0]}].{stage}")

    async def _work(self, proposal: Proposal, stage: str) -> Any:
        """``stage``'s work for ``proposal`` under the stage's real in-flight limit; once it is done,
        the next stage whose running is certain begins."""
        assert self._pool is not None
        ordered = (stage == "validate" and not proposal.speculated) or (stage == "screen" and proposal.speculated)
        expected = await self._expected(proposal) if ordered else None
        async with self._real_limits[stage]:
            result = await self.work.run(stage, proposal, self._pool, expected)
        proposal.keep(stage, result)
        if stage == "grade" and not self.work.perfect(proposal):
            self._start_work(proposal, "reflect")
        elif stage == "reflect":
            self._start_work(proposal, "aggregate")
        elif stage == "screen" and self.work.accepted(proposal):
            self._start_work(proposal, "validate")
        return result

    async def _expected(self, proposal: Proposal) -> tuple[float, ...] | None:
        """The model seconds, per validation instance, of the candidate ``proposal``'s child was
        made from (its validation starts longest first by them; None: the seed's own validation,
        or a pool that does not keep them). The seed's come from its validation, waited for when
        it is still running (before the stage's slot is taken: it may need one)."""
        assert self._state is not None and self._pool is not None and proposal.child is not None
        if proposal.iteration == SEEDING:
            return None
        base = proposal.child.parents[0]
        if base < len(self._pool.candidates):
            return self._pool.seconds_of(base)
        seeding = await self._result(self._state.proposals[SEEDING], "validate")
        return model_seconds(seeding.evaluations)

    async def _result(self, proposal: Proposal, stage: str) -> Any:
        """``stage``'s result for ``proposal``, waiting for its work when it is still running."""
        result = proposal.result(stage)
        if result is None:
            self._start_work(proposal, stage)
            result = await self._running[(proposal.iteration, stage)]
        return result

    def _ended(self, ended: Ended[int]) -> None:
        """What the end of one stage task means for its proposal (in simulated-time order)."""
        state, pool = self._state, self._pool
        assert state is not None and pool is not None
        proposal, stage = state.proposals[ended.key], ended.stage
        start, _ = proposal.spans[stage]
        proposal.spans[stage] = (start, ended.at)
        self._running.pop((proposal.iteration, stage), None)
        result = proposal.result(stage)
        proposal.chain = proposal.delays.pop(stage, proposal.chain) + env_delay(result)
        state.delays.ended(stage, ended.at, proposal.chain)
        if stage in GRADING_STAGES:
            evaluations = self.work.counted(stage, proposal, result)
            self._slice.traces.extend(evaluations)
            self._pool = pool = pool.spent(0, len(evaluations))
            state.load -= len(evaluations)
        if stage == "grade":
            self._slice.rewards.extend(result.scores)
            if self.work.perfect(proposal):
                return self._finish(proposal, PoolChange("perfect"))
            return self._queue(proposal, "reflect")
        if stage == "reflect":
            self._slice.calls.extend(result.calls)
            return self._queue(proposal, "aggregate")
        if stage == "aggregate":
            self._slice.calls.extend(result.calls)
            return self._screen(proposal, result.text)
        if stage == "screen":
            if self.work.accepted(proposal):
                if SEEDING in state.proposals:
                    proposal.held = True
                    return None
                return self._queue(proposal, "validate")
            self._release(proposal, self.work.metric_calls("validate", proposal))
            return self._finish(proposal, PoolChange("rejected", rejected=(len(pool.candidates),)))
        assert proposal.child is not None
        if proposal.iteration == SEEDING:
            return self._seeded(proposal, result)
        if proposal.closing:
            return self._closed(proposal, result)
        sibling = pool.best_since(proposal.based_at) if self.config.pipeline.merge else None
        self._pool = pool.with_candidate(proposal.child, result.evaluations)
        state.delays.joined(proposal.chain)
        proposal.joined.append(len(self._pool.candidates) - 1)
        if sibling is None or not self._merge(proposal, sibling):
            self._finish(proposal, PoolChange("accepted", added_ids=tuple(proposal.joined)))

    def _merge(self, proposal: Proposal, sibling: int) -> bool:
        """Queue the validation of the child that just joined merged onto ``sibling`` (the best of
        the candidates that joined after the child's base was taken, so it lacks the child's
        changes and the child its lessons): the child's changes against its base made to the
        sibling (:func:`rebase`). False: nothing to merge (a merge that changes neither), or the
        budget cannot pay for another validation (it is reserved now: never overshot)."""
        state, pool, child = self._state, self._pool, proposal.child
        assert state is not None and pool is not None and child is not None
        component, base = proposal.component, child.parents[0]
        onto = pool.candidates[sibling].components[component]
        text = rebase(pool.candidates[base].components[component], child.components[component], onto)
        proposal.speculated = False  # the merge is validated on its own
        calls = self.work.metric_calls("validate", proposal)
        if text in (onto, child.components[component]) or calls > state.budget.free:
            return False
        state.budget.reserve(calls)
        proposal.reserved += calls
        proposal.child = pool.candidates[sibling].replaced(component, text, parent=sibling)
        proposal.based_at = pool.version
        proposal.chain = state.delays.after_pool(proposal.chain)  # the merge was decided on it
        proposal.validated = None
        proposal.dispatched.remove("validate")
        self._queue(proposal, "validate", start=True)
        return True

    def _close(self) -> bool:
        """Queue the validation of the closing merge (module docstring): the changes against the
        seed of every candidate tied with the first best made to it. False: nothing to merge (one
        candidate tied, or the merge is the best's text), or the budget cannot pay for the
        validation (it is reserved now)."""
        state, pool = self._state, self._pool
        assert state is not None and pool is not None
        first, *others = pool.tied_best()
        seed, best = pool.candidates[0], pool.candidates[first]
        merged = dict(best.components)
        for other in others:
            for name, text in pool.candidates[other].components.items():
                merged[name] = rebase(seed.components[name], text, merged[name])
        calls = len(self.work.val)
        if merged == best.components or calls > state.budget.free:
            return False
        state.budget.reserve(calls)
        proposal = Proposal(iteration=state.started, items=(), proposed_at=pool.version, parent=first,
                            component=best.names()[0], shape=None, reserved=calls, started_at=state.schedule.clock,
                            based_at=pool.version, closing=True, child=Candidate(merged, (first, *others)),
                            chain=state.delays.admitted())
        state.proposals[proposal.iteration] = proposal
        state.started += 1
        self._queue(proposal, "validate", start=True)
        return True

    def _seeded(self, proposal: Proposal, validated: Graded) -> None:
        """The seed validated: it joins as candidate 0, and the children held for it queue their
        validations (in the order they were started)."""
        state, pool = self._state, self._pool
        assert state is not None and pool is not None and proposal.child is not None
        self._pool = pool.with_candidate(proposal.child, validated.evaluations)
        state.delays.joined(proposal.chain)
        del state.proposals[SEEDING]
        self._slice.reports.append(PoolChange("seeded", added_ids=(0,)))
        for held in sorted((p for p in state.proposals.values() if p.held), key=lambda p: p.iteration):
            held.held = False
            held.chain = state.delays.after_pool(held.chain)
            self._queue(held, "validate")

    def _closed(self, proposal: Proposal, validated: Graded) -> None:
        """The closing merge validated: it joins, as the best on ties, when it scores at least as
        well as the best; else it is turned down."""
        pool = self._pool
        assert pool is not None and proposal.child is not None
        index = len(pool.candidates)
        grown = msgspec.structs.replace(pool.with_candidate(proposal.child, validated.evaluations), closing=index)
        if grown.best_index() != index:
            return self._finish(proposal, PoolChange("rejected", rejected=(index,)))
        self._pool = grown
        assert self._state is not None
        self._state.delays.joined(proposal.chain)
        proposal.joined.append(index)
        self._finish(proposal, PoolChange("accepted", added_ids=(index,)))

    def _screen(self, proposal: Proposal, text: str | None) -> None:
        """The child of a merged ``text``, screened as the staleness policy says (or dropped)."""
        pool = self._pool
        assert pool is not None
        if text is None:
            return self._finish(proposal, PoolChange("no-proposal"))
        parent = pool.candidate(proposal.parent)
        version = _version(pool)
        screening = self.policy.screening(proposed_at=proposal.proposed_at, version=version, parent=proposal.parent,
                                          best=pool.best_index() if pool.candidates else 0)
        assert self._state is not None
        proposal.chain = self._state.delays.after_pool(proposal.chain)  # the policy read the pool
        proposal.staleness = version - proposal.proposed_at
        if screening.drop:
            return self._finish(proposal, PoolChange("stale"))
        proposal.rival = screening.rival
        if proposal.rival is None:
            proposal.child = parent.replaced(proposal.component, text, parent=proposal.parent)
            proposal.speculated = self.config.pipeline.speculate and self.work.covers(proposal.items)
            if self.policy.rescreens:
                self._release(proposal, len(proposal.items))
        else:
            rival = pool.candidates[proposal.rival]
            rebased = rebase(parent.components[proposal.component], text, rival.components[proposal.component])
            if rebased == rival.components[proposal.component]:
                return self._finish(proposal, PoolChange("stale"))
            proposal.child = rival.replaced(proposal.component, rebased, parent=proposal.rival)
            proposal.based_at = pool.version
        self._queue(proposal, "screen", start=True)

    def _release(self, proposal: Proposal, calls: int) -> None:
        assert self._state is not None
        self._state.budget.release(calls)
        proposal.reserved -= calls

    def _finish(self, proposal: Proposal, change: PoolChange) -> None:
        """``proposal`` ended as ``change`` says: what it still had reserved goes back."""
        state, pool = self._state, self._pool
        assert state is not None and pool is not None
        self._release(proposal, proposal.reserved)
        state.delays.done(proposal.chain)
        del state.proposals[proposal.iteration]
        self._pool = pool.spent(1, 0)
        self._slice.reports.append(msgspec.structs.replace(change, measure=self._measure(proposal, change.outcome)))


    def _measure(self, proposal: Proposal, outcome: str) -> ProposalMeasure:
        """What ``proposal`` measured, from its own records."""
        assert self._state is not None and self._pool is not None
        mapped, screened = proposal.mapped, proposal.screened
        proposed = kept = 0
        if mapped is not None:
            base = self._pool.candidate(proposal.parent).components[proposal.component]
            child = proposal.child.components[proposal.component] if proposal.child is not None else None
            proposed, kept = line_retention(base, [e.text for call in mapped.calls for e in call.edits], child)
        records = mapped.records if mapped is not None else ()
        added: tuple[str, ...] = ()
        if outcome == "accepted" and proposal.child is not None:
            made_from = self._pool.candidates[proposal.child.parents[0]]
            added = added_lines(made_from.components[proposal.component], proposal.child.components[proposal.component])
        gain = None
        if screened is not None and proposal.graded is not None:
            gain = screened.child.total - proposal.graded.total
        spans = {stage: proposal.spans[stage] for stage in STAGES if stage in proposal.spans}
        return ProposalMeasure(
            iteration=proposal.iteration, minibatch=len(proposal.items), outcome=outcome, groups=len(records),
            group_records=max(records, default=0), proposed=proposed, kept=kept, spans=spans,
            waited=proposal.waited, latency=self._state.schedule.clock - proposal.started_at,
            staleness=proposal.staleness, gain=gain, loads=dict(proposal.loads), added=added, drawn=proposal.parent,
            parent=proposal.parent if proposal.rival is None else proposal.rival, rebased=proposal.rival is not None,
        )


def _version(pool: GepaState) -> int:
    """The pool's version as the search counts it: the seed is in it from the start (module
    docstring), so a proposal drawn while the seed's validation runs is not stale once it joins."""
    return max(pool.version, 1)
