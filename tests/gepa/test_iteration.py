"""GEPA's iteration over real HTTP: the in-process simulated endpoint plays the task world.

The method is driven step by step here (its start, then one step per minibatch of the engine's
epoch order until GEPA's own stop rules answer), so each step's result can be read whole; the
run loop around it is tested through ``Session.train`` below and in ``tests/cli/test_gepa_cli.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import msgspec
import pytest

from combee_fast.combee.shuffle import augmented_groups
from combee_fast.config import (
    CacheConfig, FaultConfig, MapConfig, SessionConfig, SimConfig, TaskConfig, TransportConfig,
)
from combee_fast.engine.rng import rng_at
from combee_fast.engine.timing import finish_times
from combee_fast.gepa.calls import GepaCalls, Rewrite
from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.iteration import GepaIteration, grade, longest_first
from combee_fast.gepa.kind import GEPA
from combee_fast.gepa.learner import GepaProposer
from combee_fast.gepa.pool import GepaState
from combee_fast.gepa.reflection import CombeeReflection, Reflected, SerialReflection
from combee_fast.gepa.settings import GepaConfig
from combee_fast.gepa.settings import settings as gepa_settings
from combee_fast.methods.base import StepResult
from combee_fast.record.state import EpochOrder, TrainState
from combee_fast.schema import GradedAnswer
from combee_fast.session import open_session


def _config(**changes: object) -> SessionConfig:
    """Formula on a small slice, the flat preset at 1e-4 real seconds per simulated second."""
    base = SessionConfig(
        method="gepa", task=TaskConfig(train_split="train[0:60]", val_split="val[0:20]"), sim=SimConfig("flat", 1e-4),
        learners={"gepa": GepaConfig(max_metric_calls=150)},
    )
    return msgspec.structs.replace(base, **changes)


class Run(msgspec.Struct):
    start: StepResult[GepaState]
    steps: list[tuple[int, StepResult[GepaState]]]  # (epoch, result)
    counters: object
    calls: GepaCalls

    @property
    def final(self) -> GepaState:
        return self.steps[-1][1].artifact if self.steps else self.start.artifact


async def _iterate(config: SessionConfig, reflection=None, *, minibatch: int, calls_type=GepaCalls) -> Run:
    async with open_session(config) as session:
        calls = calls_type(session.task, session.calls)
        method = GepaIteration("gepa", calls, reflection or SerialReflection(), session.val_split.examples,
                               config=gepa_settings(config), seed=config.seed, workers=config.map.workers)
        train = session.train_split.examples
        state = TrainState.fresh(GEPA.initial(config))
        start = await method.start(state.artifact)
        assert start is not None
        state.artifact = start.artifact
        order, steps, rules = EpochOrder(config.seed, len(train)), [], GEPA.stop_rules(config)
        while not any(rule.check(state) for rule in rules):
            indices, epoch = order.take(state, minibatch, span=True)
            result = await method.step([train[i] for i in indices], state.artifact, epoch=epoch, step=len(steps))
            state.artifact = result.artifact
            if state.position >= len(train):
                state.epoch, state.position = state.epoch + 1, 0
            steps.append((epoch, result))
        return Run(start, steps, session.server.counters(), calls)


def _outcome(result: StepResult[GepaState]) -> str:
    return result.reports[0].outcome


def _graded(result: StepResult[GepaState], minibatch: int) -> tuple[float, float | None]:
    """The parent's and (when graded) the child's totals on the minibatch."""
    scores = [e.score for e in result.traces]
    return sum(scores[:minibatch]), (sum(scores[minibatch:2 * minibatch]) if len(scores) > minibatch else None)


async def test_metric_calls_are_counted_as_gepa_counts_them_and_the_budget_stops_the_search() -> None:
    run = await _iterate(_config(), minibatch=3)
    spent = [result.artifact.metric_calls for _, result in run.steps]
    assert run.final.metric_calls == 20 + sum(len(result.traces) for _, result in run.steps)
    assert run.final.metric_calls == run.counters.requests_by_role["gepa_solver"]  # one solve request each
    assert spent[-1] >= 150 > spent[-2]  # no iteration starts once the budget is spent
    assert spent == sorted(spent)
    reflecting = [r for _, r in run.steps if _outcome(r) != "perfect"]
    assert run.counters.requests_by_role["gepa_proposer"] == len(reflecting)  # serial: one reflection call each
    assert all(len(r.rewards) == 3 for _, r in run.steps)


async def test_a_child_is_accepted_exactly_when_it_beats_its_parent_on_the_minibatch() -> None:
    run = await _iterate(_config(), minibatch=3)
    graded = [(r, *_graded(r, 3)) for _, r in run.steps if _graded(r, 3)[1] is not None]
    pool = run.final
    assert [len(s) for s in pool.seconds] == [len(s) for s in pool.scores] and len(pool.seconds) == len(pool)
    assert any(_outcome(r) == "accepted" for r, _, _ in graded) and any(_outcome(r) == "rejected" for r, _, _ in graded)
    for result, parent, child in graded:
        assert (_outcome(result) == "accepted") == (child > parent)
    accepted = [r for _, r in run.steps if _outcome(r) == "accepted"]
    assert len(run.final.candidates) == 1 + len(accepted)
    for result in accepted:
        index = result.reports[0].added_ids[0]
        assert len(run.final.scores[index]) == 20 and run.final.candidates[index].parents
    assert run.final.validation().accuracy >= sum(run.final.scores[0]) / 20


class _Unchanged:
    """A reflection that appends a line teaching nothing: the child can only tie its parent."""

    async def reflect(self, learner: GepaProposer, current: str, evaluations: Sequence[GradedAnswer], *, iteration: int):
        return Reflected(current + "\nBe careful.", (), 0.0)


async def test_a_child_that_only_ties_its_parent_is_rejected() -> None:
    run = await _iterate(_config(learners={"gepa": GepaConfig(max_metric_calls=80)}), _Unchanged(), minibatch=3)
    assert {_outcome(r) for _, r in run.steps} <= {"rejected", "perfect"}
    assert any(_outcome(r) == "rejected" for _, r in run.steps)
    assert len(run.final.candidates) == 1 and run.final.best_index() == 0
    assert run.counters.requests_by_role["gepa_solver"] == run.final.metric_calls


@pytest.mark.parametrize("method", ["gepa", "combee-gepa"])
async def test_the_same_seed_replayed_from_the_cache_gives_the_identical_final_candidate(tmp_path, method: str) -> None:
    cache = str(tmp_path / "cache.jsonl")
    config = _config(method=method, learners={"gepa": GepaConfig(max_metric_calls=150, combee_minibatch=12)})
    async with open_session(msgspec.structs.replace(config, cache=CacheConfig(cache, "record"))) as session:
        recorded = await session.train()
    async with open_session(msgspec.structs.replace(config, cache=CacheConfig(cache, "replay"))) as session:
        replayed = await session.train()
        assert session.server.counters().requests == 0  # every answer came from the cache
    reordered_config = msgspec.structs.replace(config, transport=TransportConfig(concurrency=3), map=MapConfig(workers=3))
    async with open_session(reordered_config) as session:
        reordered = await session.train()  # another completion order, the same draws
    assert recorded.final == replayed.final == reordered.final == recorded.best
    assert recorded.final.render() != Candidate.seed().render()
    assert recorded.summary["metric_calls"] == replayed.summary["metric_calls"] == reordered.summary["metric_calls"]
    assert [(r.added, r.rejected) for r in recorded.ledger] == [(r.added, r.rejected) for r in replayed.ledger]
    assert recorded.train_sim_seconds == replayed.train_sim_seconds
    assert recorded.learner == "gepa" and recorded.method == method


class _CountingCalls(GepaCalls):
    """Records how many reflection calls are in flight at once."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.in_flight = 0
        self.peaks: list[int] = []

    async def propose(self, current, evaluations, *, seed_path, component) -> Rewrite:
        self.in_flight += 1
        self.peaks.append(self.in_flight)
        try:
            await asyncio.sleep(0)
            return await super().propose(current, evaluations, seed_path=seed_path, component=component)
        finally:
            self.in_flight -= 1


async def test_combee_gepa_reflects_once_per_shuffled_group_all_at_once_then_aggregates() -> None:
    config = _config(method="combee-gepa", learners={"gepa": GepaConfig(max_metric_calls=200)})
    reflection = CombeeReflection(config.combee, seed=config.seed)
    run = await _iterate(config, reflection, minibatch=16, calls_type=_CountingCalls)
    reflecting = [(i, r) for i, (_, r) in enumerate(run.steps) if _outcome(r) != "perfect"]
    assert reflecting
    for iteration, result in reflecting:
        groups = augmented_groups(16, config.combee.duplicates, rng_at(config.seed, "gepa", "shuffle", iteration))
        proposers = [p for p in result.proposals if p.source.startswith("proposer")]
        assert len(groups) == 4 and len(proposers) == 4  # floor(sqrt(16)) groups, one call each
        aggregators = [p for p in result.proposals if p.source.startswith("aggregator")]
        assert len(aggregators) == (1 if sum(bool(p.edits) for p in proposers) > 1 else 0)
    assert max(run.calls.peaks) == 4  # every group's reflection in flight at once
    assert run.counters.requests_by_role["gepa_proposer"] == 4 * len(reflecting)
    assert run.final.metric_calls == run.counters.requests_by_role["gepa_solver"]


def test_minibatches_follow_the_engines_epoch_order_and_span_epochs() -> None:
    order = EpochOrder(4, 7)
    state = TrainState.fresh(None)
    batches = [order.take(state, 3, span=True) for _ in range(5)]
    first_epoch = list(order.of(0))
    assert [x for b, _ in batches[:2] for x in b] == first_epoch[:6]
    assert batches[2][0][0] == first_epoch[6] and batches[2][0][1:] == list(order.of(1))[:2]
    assert [e for _, e in batches] == [0, 0, 0, 1, 1]
    assert order.take(TrainState.fresh(None), 10, span=False)[0] == first_epoch  # without span: the epoch's end


async def test_max_epochs_stops_the_search_after_whole_passes_over_the_train_split() -> None:
    config = _config(task=TaskConfig(train_split="train[0:30]", val_split="val[0:10]"),
                     learners={"gepa": GepaConfig(max_metric_calls=100_000, max_epochs=1)})
    run = await _iterate(config, minibatch=3)
    assert len(run.steps) == 10 and {epoch for epoch, _ in run.steps} == {0}
    assert run.final.metric_calls == 10 + sum(len(r.traces) for _, r in run.steps) < 100_000


async def test_injected_faults_are_retried_or_repaired_and_each_grading_counts_once() -> None:
    faults = FaultConfig(rate_500=0.1, rate_malformed=0.1)
    config = _config(method="combee-gepa", sim=SimConfig("flat", 1e-4, faults=faults),
                     learners={"gepa": GepaConfig(max_metric_calls=150, combee_minibatch=12)})
    async with open_session(config) as session:
        result = await session.train()
        counters = session.server.counters()
    summary = result.summary
    assert summary["metric_calls"] >= 150 and summary["candidates"] == 1 + summary["accepted"] >= 2
    assert counters.faults_injected.get("500", 0) > 0 and counters.faults_injected.get("malformed", 0) > 0
    assert counters.requests_by_role["gepa_solver"] > summary["metric_calls"]  # retries and repairs are no metric calls


async def test_a_validation_given_expected_seconds_starts_its_longest_solves_first() -> None:
    """Two workers grade the seed on 20 validation examples in example order, then again longest
    first by the seconds the first grading measured: the same evaluations in example order, and
    the path a list scheduler gives that order, shorter than the first one's."""
    config = _config()
    async with open_session(config) as session:
        calls, val = GepaCalls(session.task, session.calls), session.val_split.examples
        seed = GEPA.initial(config).seed
        first = await grade(calls, seed, val, workers=2)
        seconds = [e.usage.effective_latency_s for e in first.evaluations]
        assert len(set(seconds)) > 1  # the solves differ in length, so the order matters
        ordered = await grade(calls, seed, val, workers=2, expected=seconds)
    assert [(e.item_id, e.answer, e.score) for e in ordered.evaluations] == \
        [(e.item_id, e.answer, e.score) for e in first.evaluations]
    longest = sorted(seconds, reverse=True)
    assert ordered.sim_seconds == pytest.approx(max(finish_times(longest, 2)))
    assert first.sim_seconds == pytest.approx(max(finish_times(seconds, 2)))
    assert ordered.sim_seconds < first.sim_seconds
    assert longest_first([3.0, 5.0, 3.0, 9.0]) == [3, 1, 0, 2]
