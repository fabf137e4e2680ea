"""The stage-decoupled GEPA search (``async-gepa``) over real HTTP: the in-process simulated
endpoint plays the task world, the run loop drives the method (``Session.train``)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence

import msgspec
import pytest

from combee_fast.config import (CacheConfig, FaultConfig, MapConfig, SessionConfig,
                                SimConfig, TaskConfig, TransportConfig)
from combee_fast.engine.timing import finish_times
from combee_fast.gepa.calls import GepaCalls, Rewrite
from combee_fast.gepa.candidate import SYSTEM_PROMPT, Candidate
from combee_fast.gepa.pipeline import AsyncGepa
from combee_fast.gepa.pool import GepaState, PoolChange
from combee_fast.gepa.reflection import CombeeReflection, SerialReflection
from combee_fast.gepa.settings import GepaConfig, PipelineConfig
from combee_fast.gepa.settings import settings as gepa_settings
from combee_fast.gepa.stages import StageWork
from combee_fast.run.train import TrainResult
from combee_fast.schema import Example, GradedAnswer
from combee_fast.session import Session, open_session

pytestmark = pytest.mark.slow  # each trains (a few seconds) against the simulated endpoint


def _config(*, pipeline: PipelineConfig = PipelineConfig(), **gepa: object) -> SessionConfig:
    """Formula on a small slice, the flat preset at 1e-4 real seconds per simulated second."""
    settings = {"combee_minibatch": 12, "max_metric_calls": 10**9, "max_epochs": 1, **gepa}
    return SessionConfig(method="async-gepa", task=TaskConfig(train_split="train[0:96]", val_split="val[0:20]"),
                         sim=SimConfig("flat", 1e-4),
                         learners={"gepa": GepaConfig(pipeline=pipeline, **settings)})  # type: ignore[arg-type]


class _Counting(GepaCalls):
    """Counts every solve (one metric call each), the most solves of training examples in flight
    at once, and the reflection maps in flight at once."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.solves = 0
        self.training_solves = 0
        self.peak_training_solves = 0
        self.reflecting: dict[int | str, int] = {}
        self.peak_maps = 0

    async def solve(self, example: Example, system_prompt: str) -> GradedAnswer:
        self.solves += 1
        training = example.split.startswith("train")
        self.training_solves += training
        self.peak_training_solves = max(self.peak_training_solves, self.training_solves)
        try:
            return await super().solve(example, system_prompt)
        finally:
            self.training_solves -= training

    async def propose(self, current, evaluations, *, seed_path, component) -> Rewrite:
        iteration = seed_path[0]
        self.reflecting[iteration] = self.reflecting.get(iteration, 0) + 1
        self.peak_maps = max(self.peak_maps, len(self.reflecting))
        try:
            await asyncio.sleep(0)
            return await super().propose(current, evaluations, seed_path=seed_path, component=component)
        finally:
            self.reflecting[iteration] -= 1
            if not self.reflecting[iteration]:
                del self.reflecting[iteration]


def _method(session: Session, config: SessionConfig, *, serial: bool = False) -> tuple[AsyncGepa, _Counting]:
    calls = _Counting(session.task, session.calls)
    reflection = SerialReflection() if serial else CombeeReflection(config.combee, seed=config.seed)
    work = StageWork(calls, reflection, session.val_split.examples, workers=config.map.workers,
                     skip_perfect=gepa_settings(config).skip_perfect)
    return AsyncGepa("async-gepa", calls, work, config=gepa_settings(config), seed=config.seed), calls


class _Watched:
    """``method`` with every step's pool changes kept (the ledger holds only their counts): the
    proposals' in ``changes``, the seed's joining in ``seeded``."""

    def __init__(self, method: AsyncGepa) -> None:
        self.method = method
        self.name, self.batches_span_epochs = method.name, method.batches_span_epochs
        self.changes: list[PoolChange] = []
        self.seeded: list[PoolChange] = []

    async def start(self, artifact):
        return await self.method.start(artifact)

    async def step(self, items, artifact, *, epoch, step, shape=None):
        result = await self.method.step(items, artifact, epoch=epoch, step=step, shape=shape)
        self.changes.extend(r for r in result.reports if r.outcome != "seeded")
        self.seeded.extend(r for r in result.reports if r.outcome == "seeded")
        return result

    def pending(self) -> int:
        return self.method.pending()

    def carried(self):
        return self.method.carried()

    async def resume(self, carried, items) -> None:
        await self.method.resume(carried, items)


async def _train(config: SessionConfig, **options: object) -> tuple[TrainResult, list[PoolChange], _Counting]:
    async with open_session(config) as session:
        method, calls = _method(session, config, **options)  # type: ignore[arg-type]
        watched = _Watched(method)
        result = await session.train(method=watched)
    assert [change.added_ids for change in watched.seeded] == [(0,)]  # the seed joined first, once
    return result, watched.changes, calls


def _overlap(spans: Sequence[tuple[float, float]]) -> int:
    """Most spans open at one instant (ends before starts at the same time)."""
    events = sorted([(start, 1) for start, end in spans if end > start] + [(end, -1) for start, end in spans if end > start],
                    key=lambda e: (e[0], e[1]))
    return max(itertools.accumulate(delta for _, delta in events), default=0)


@pytest.mark.parametrize("serial", [False, True])
async def test_one_proposal_in_flight_is_the_synchronous_loop(serial: bool) -> None:
    config = _config(pipeline=PipelineConfig(proposals=1))
    synchronous = msgspec.structs.replace(config, method="gepa" if serial else "combee-gepa")
    if serial:
        serial_settings = msgspec.structs.replace(gepa_settings(synchronous), minibatch=12)
        synchronous = msgspec.structs.replace(synchronous, learners={"gepa": serial_settings})
    async with open_session(synchronous) as session:
        expected = await session.train()
    result, changes, _ = await _train(config, serial=serial)
    assert result.final == expected.final and result.best == expected.best
    assert result.artifact.candidates == expected.artifact.candidates
    assert result.artifact.scores == expected.artifact.scores
    assert result.summary == expected.summary
    # No opening step: the seed's validation is the pipeline's first task, and the first iteration
    # runs beside it, so the search is shorter by at most that validation.
    opening, *steps = expected.ledger
    assert opening.batch_reason == "start" and result.steps == expected.steps - 1
    assert [(row.rejected, row.rollouts) for row in result.ledger[1:]] == \
        [(row.rejected, row.rollouts) for row in steps[1:]]
    assert sum(row.added for row in result.ledger) == sum(row.added for row in expected.ledger)
    assert sum(row.rollouts for row in result.ledger) == sum(row.rollouts for row in expected.ledger)
    assert len(changes) == result.artifact.iterations and {c.outcome for c in changes} >= {"accepted"}
    saved = expected.train_sim_seconds - result.train_sim_seconds
    assert 0 < saved <= opening.sim_seconds + 1e-9


@pytest.mark.parametrize(("budget", "staleness"), [(260, "full"), (333, "guarded"), (497, "full")])
async def test_under_injected_faults_the_metric_calls_never_exceed_the_budget(budget: int, staleness: str) -> None:
    faults = FaultConfig(rate_500=0.1, rate_malformed=0.05, rate_drop=0.05, rate_truncated=0.05)
    config = msgspec.structs.replace(
        _config(pipeline=PipelineConfig(proposals=4, staleness=staleness), max_metric_calls=budget, max_epochs=None),
        sim=SimConfig("flat", 1e-4, faults=faults), task=TaskConfig(train_split="train[0:300]", val_split="val[0:20]"))
    result, changes, calls = await _train(config)
    spent = result.summary["metric_calls"]
    assert calls.solves == spent <= budget  # every metric call made was paid for, none past the budget
    assert sum(row.rollouts for row in result.ledger) == spent == result.rollouts
    need = 12 * (3 if staleness == "full" else 2) + 20
    assert budget - spent < need  # it stopped because no further proposal fitted
    assert result.artifact.budget_closed and result.stopped_by is None  # the work is done: a clean stop
    assert len(changes) == result.artifact.iterations  # every proposal started ended
    assert sum(result.counts.retries.get("gepa_solver", {}).values()) > 0  # the faults were there, and retried
    async with open_session(msgspec.structs.replace(config, method="combee-gepa")) as session:
        synchronous = await session.train()
    assert synchronous.summary["metric_calls"] >= budget  # the synchronous loop runs its last iteration in full


@pytest.mark.parametrize("speculate", [False, True])
async def test_a_run_is_the_same_whatever_order_its_requests_complete_in(tmp_path, speculate: bool) -> None:
    """Recorded, replayed and with three requests at a time, three proposals in flight; with
    ``speculate``, minibatches drawn from the validation set, so screenings begin validations."""
    cache = str(tmp_path / "cache.jsonl")
    config = _config(pipeline=PipelineConfig(proposals=3, speculate=speculate))
    if speculate:
        config = msgspec.structs.replace(config, task=TaskConfig(train_split="val[0:40]", val_split="val[0:40]"))
    async with open_session(msgspec.structs.replace(config, cache=CacheConfig(cache, "record"))) as session:
        recorded = await session.train()
    async with open_session(msgspec.structs.replace(config, cache=CacheConfig(cache, "replay"))) as session:
        replayed = await session.train()
        assert session.server.counters().requests == 0  # every answer came from the cache
    reordered = msgspec.structs.replace(config, transport=TransportConfig(concurrency=3))
    async with open_session(reordered) as session:
        queued = await session.train()  # three requests at a time: another completion order
    assert recorded.final == replayed.final == queued.final
    assert recorded.artifact.candidates == replayed.artifact.candidates == queued.artifact.candidates
    assert len(recorded.artifact.candidates) >= 3
    for other in (replayed, queued):
        assert [(r.added, r.rejected, r.rollouts) for r in other.ledger] == \
            [(r.added, r.rejected, r.rollouts) for r in recorded.ledger]
        assert other.train_sim_seconds == recorded.train_sim_seconds


async def test_stages_overlap_across_proposals_within_their_in_flight_limits() -> None:
    pipeline = PipelineConfig(proposals=4, grade=2, reflect=1, aggregate=2, screen=2, validate=1)
    result, changes, calls = await _train(_config(pipeline=pipeline))
    measures = [c.measure for c in changes]
    assert all(m is not None for m in measures)
    for stage, limit in pipeline.limits().items():
        spans = [m.spans[stage] for m in measures if stage in m.spans]
        assert spans and _overlap(spans) <= limit, stage  # in simulated time
    assert 1 <= calls.peak_maps <= pipeline.reflect  # in real time: reflection maps at once
    grading = [m.spans["grade"] for m in measures]
    reflecting = [m.spans["reflect"] for m in measures if "reflect" in m.spans]
    assert any(g[0] < r[1] and r[0] < g[1] for g in grading for r in reflecting)  # no barrier between stages
    assert any(m.waited > 0 for m in measures)  # the reflect stage's one slot made some wait
    sequential, _, _ = await _train(_config(pipeline=PipelineConfig(proposals=1)))
    assert result.train_sim_seconds < 0.7 * sequential.train_sim_seconds


async def test_the_proposals_in_flight_grade_side_by_side_on_the_endpoint() -> None:
    """A step ends once another proposal may start, without waiting for the grading it just
    started: the four proposals' minibatches (of 12 training examples each, all on the seed) are
    solved at once on the endpoint, not one proposal's after the other's."""
    result, changes, calls = await _train(_config(pipeline=PipelineConfig(proposals=4, grade=4)))
    assert len(changes) == result.artifact.iterations >= 4
    assert calls.peak_training_solves > 2 * 12, calls.peak_training_solves  # waiting first: 24 at most


async def test_guarded_drops_children_staler_than_its_bound_unscreened() -> None:
    result, changes, _ = await _train(_config(pipeline=PipelineConfig(proposals=4, staleness="guarded",
                                                                      max_staleness=0)))
    outcomes = {c.outcome for c in changes}
    assert "stale" in outcomes and "accepted" in outcomes
    for change in changes:
        measure = change.measure
        assert measure is not None
        if change.outcome == "stale":
            assert measure.staleness > 0 and "screen" not in measure.spans  # no metric call made for it
        elif change.outcome in ("accepted", "rejected"):
            assert measure.staleness == 0


async def test_full_rebases_a_stale_child_onto_the_pools_best_and_screens_it_against_that() -> None:
    config = _config(pipeline=PipelineConfig(proposals=4), combee_minibatch=8)
    config = msgspec.structs.replace(config, task=TaskConfig(train_split="train[0:160]", val_split="val[0:20]"))
    result, changes, _ = await _train(config)
    pool = result.artifact
    rebased = [c for c in changes if c.measure is not None and c.measure.rebased]
    assert rebased, [(c.outcome, c.measure and c.measure.staleness) for c in changes]
    for change in rebased:
        measure = change.measure
        assert measure.staleness > 0 and measure.parent != measure.drawn
        if change.outcome == "accepted":
            child = pool.candidates[change.added_ids[0]]
            made_from = pool.candidates[measure.parent]
            assert child.parents == (measure.parent,)
            assert set(made_from.render().split("\n")) <= set(child.render().split("\n"))


@pytest.mark.parametrize("merge", [True, False])
async def test_siblings_screened_before_any_joined_meet_in_one_merged_candidate(merge: bool) -> None:
    # four proposals start from the seed, each child is screened against it before any sibling has
    # joined (a child joins after its validation): none is stale, so only a merge at the join brings
    # one sibling's lessons into another's
    config = _config(pipeline=PipelineConfig(proposals=4, merge=merge))
    result, changes, _ = await _train(config)
    pool = result.artifact
    accepted = [c for c in changes if c.outcome == "accepted"]
    lines = [set(candidate.render().split("\n")) for candidate in pool.candidates]
    seed = lines[0]
    children = [c.added_ids[0] for c in accepted if pool.candidates[c.added_ids[0]].parents == (0,)]
    assert len(children) >= 2  # siblings of the seed
    merged = [i for c in accepted for i in c.added_ids[1:]]
    if not merge:
        assert not merged and all(len(c.added_ids) == 1 for c in accepted)
        return
    assert merged
    for index in merged:  # each merge holds its sibling-made base's lessons and the proposal's own
        candidate = pool.candidates[index]
        assert lines[candidate.parents[0]] - seed and lines[candidate.parents[0]] <= lines[index]
    sibling_lessons = [lines[i] - seed for i in children]
    assert any(all(lessons <= held for lessons in sibling_lessons) for held in lines)  # all of them in one
    assert result.summary["metric_calls"] == sum(row.rollouts for row in result.ledger)


async def test_a_pass_limit_drains_the_proposals_in_flight_before_the_run_ends() -> None:
    result, changes, calls = await _train(_config(pipeline=PipelineConfig(proposals=4)))
    assert result.stopped_by is None and result.summary["metric_calls"] == calls.solves
    assert len(changes) == result.artifact.iterations == -(-96 // 12)  # every minibatch of the pass, ended
    assert [row.batch_reason for row in result.ledger][-1] == "drain"
    assert result.samples == 96  # no minibatch of the next pass was started


async def test_the_live_plan_sizes_minibatches_and_proposals_in_flight(tmp_path) -> None:
    from combee_fast.record.rundir import RunDir

    config = _config(combee_minibatch="auto", pipeline=PipelineConfig(proposals=3))
    config = msgspec.structs.replace(config, task=TaskConfig(train_split="train[0:300]", val_split="val[0:20]"))
    run_dir = RunDir(tmp_path / "run")
    try:
        async with open_session(config) as session:
            result = await session.train(run_dir=run_dir)
    finally:
        run_dir.close()
    decisions = [msgspec.json.decode(line) for line in (tmp_path / "run" / "controller.jsonl").read_bytes().splitlines()]
    assert decisions and {d["batch_size"] for d in decisions} == {80}  # the tree bound: 8 groups, one merge
    assert all(1 <= d["in_flight"] <= 3 for d in decisions) and decisions[0]["in_flight"] == 2
    assert decisions[0]["reason"].startswith("start: nothing measured yet")
    assert any("merge_retention" in d["inputs"] for d in decisions)
    assert {row.batch_size for row in result.ledger[1:] if row.batch_reason != "drain"} == {80}


def _tied(seed: Candidate, lines: Sequence[str], score: float, examples: int) -> GepaState:
    """A pool of the seed and one child per line (the seed's text with that line added), every
    candidate scoring ``score`` on each of ``examples`` validation instances."""
    text = seed.components[SYSTEM_PROMPT]
    children = tuple(seed.replaced(SYSTEM_PROMPT, f"{text}\n{line}", parent=0) for line in lines)
    n = 1 + len(children)
    return GepaState(seed=seed, candidates=(seed, *children), scores=((score,) * examples,) * n,
                     failures=({},) * n, iterations=len(children), metric_calls=examples * n)


async def test_when_the_search_drains_the_candidates_tied_at_the_best_are_merged_into_the_deployed_one() -> None:
    # two lineages, each with a lesson the other lacks, tie on validation with the seed: the first of
    # them alone (the seed) would be deployed; the closing merge holds both lessons, is validated,
    # and is the best on ties
    config = _config(pipeline=PipelineConfig(proposals=4, merge=True))
    async with open_session(config) as session:
        method, calls = _method(session, config)
        val = len(session.val_split.examples)
        pool = _tied(Candidate.seed(), ["Lesson A: carry the tens.", "Lesson B: check the units."], 0.0, val)
        result = await method.step((), pool, epoch=1, step=3)
    grown = result.artifact
    assert calls.solves == val and grown.metric_calls == pool.metric_calls + val  # one validation, nothing else
    assert [c.outcome for c in result.reports] == ["accepted"] and result.reports[0].added_ids == (3,)
    closing = grown.candidates[3]
    assert grown.closing == 3 and grown.best_index() == 3 and closing.parents == (0, 1, 2)
    assert closing.render().split("\n")[-2:] == ["Lesson A: carry the tens.", "Lesson B: check the units."]
    assert method.pending() == 0 and method.carried() is None


async def test_no_closing_merge_without_a_tie_or_without_the_budget_for_its_validation() -> None:
    config = _config(pipeline=PipelineConfig(proposals=4, merge=True))
    async with open_session(config) as session:
        method, calls = _method(session, config)
        val = len(session.val_split.examples)
        alone = _tied(Candidate.seed(), ["Lesson A: carry the tens."], 0.0, val)
        alone = msgspec.structs.replace(alone, scores=(alone.scores[0], (1.0,) * val))  # the child is best, untied
        untied = await method.step((), alone, epoch=1, step=2)
    assert calls.solves == 0 and not untied.reports and untied.artifact.closing is None
    short = _config(pipeline=PipelineConfig(proposals=4, merge=True), max_metric_calls=3 * 20 + 19)
    async with open_session(short) as session:
        method, calls = _method(session, short)
        tied = _tied(Candidate.seed(), ["Lesson A: carry the tens.", "Lesson B: check the units."], 0.0, 20)
        unpaid = await method.step((), tied, epoch=1, step=3)
    assert calls.solves == 0 and not unpaid.reports and unpaid.artifact.best_index() == 0


def test_the_closing_merge_is_the_best_only_while_it_scores_as_well_as_the_best() -> None:
    pool = _tied(Candidate.seed(), ["a", "b", "c"], 0.5, 4)
    assert pool.tied_best() == (0, 1, 2, 3) and pool.best_index() == 0
    assert msgspec.structs.replace(pool, closing=2).best_index() == 2
    lower = msgspec.structs.replace(pool, scores=(*pool.scores[:3], (0.25,) * 4), closing=3)
    assert lower.best_index() == 0 and lower.tied_best() == (0, 1, 2)


async def test_the_first_proposals_run_beside_the_seeds_validation_and_their_children_join_after_it() -> None:
    """Two workers make the seed's validation on 20 instances ten waves long and a minibatch of
    two one wave: the first proposals are drawn on the seed at time 0, and a child accepted
    before the seed's validation ends is held until it ends (the seed joins first: ``_train``)."""
    config = msgspec.structs.replace(_config(pipeline=PipelineConfig(proposals=4), combee_minibatch=2),
                                     map=MapConfig(workers=2))
    result, changes, _ = await _train(config)
    seed_ends = max(finish_times(result.artifact.seconds[0], 2))
    measures = [c.measure for c in changes if c.measure is not None]
    first = [m for m in measures if m.iteration < 4]
    assert len(first) == 4 and all(m.spans["grade"][0] == 0.0 and m.drawn == 0 for m in first)
    held = [m for m in measures if "validate" in m.spans and m.spans["screen"][1] < seed_ends]
    assert held and all(m.spans["validate"][0] == pytest.approx(seed_ends) for m in held)
    assert all(m.spans["validate"][0] >= seed_ends - 1e-9 for m in measures if "validate" in m.spans)


async def test_a_speculated_screening_decides_as_a_screening_does_and_begins_the_validation() -> None:
    """Minibatches drawn from the validation set itself, one proposal in flight: with speculate
    on, the search decides as with it off (the same candidates and scores), each accepted child's
    minibatch is not solved twice, each rejected child's other validation solves were spent, and
    the search is shorter (an accepted child's validation ran with its screening)."""
    task = TaskConfig(train_split="val[0:40]", val_split="val[0:40]")
    plain_config = msgspec.structs.replace(_config(pipeline=PipelineConfig(proposals=1), combee_minibatch=4), task=task)
    plain, plain_changes, plain_calls = await _train(plain_config)
    config = msgspec.structs.replace(_config(pipeline=PipelineConfig(proposals=1, speculate=True), combee_minibatch=4),
                                     task=task)
    result, changes, calls = await _train(config)
    assert result.final == plain.final and result.artifact.candidates == plain.artifact.candidates
    assert result.artifact.scores == plain.artifact.scores
    assert [c.outcome for c in changes] == [c.outcome for c in plain_changes]
    measures = [c.measure for c in changes if c.measure is not None]
    accepted = [m.minibatch for m in measures if m.outcome == "accepted"]
    rejected = [m.minibatch for m in measures if m.outcome == "rejected"]
    assert accepted and rejected
    assert calls.solves == plain_calls.solves - sum(accepted) + sum(40 - size for size in rejected)
    assert result.summary["metric_calls"] == calls.solves
    assert result.train_sim_seconds < plain.train_sim_seconds
