"""The GEPA search over real HTTP: the in-process simulated endpoint plays the task world."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import msgspec
import pytest

from combee_fast.combee.shuffle import augmented_groups
from combee_fast.config import (
    CacheConfig, FaultConfig, GepaConfig, SessionConfig, SimConfig, TaskConfig, TrainConfig, TransportConfig,
)
from combee_fast.engine.rng import rng_at
from combee_fast.gepa.calls import Evaluation, GepaCalls, Rewrite
from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.learner import GepaLearner
from combee_fast.gepa.reflection import CombeeReflection, Reflected, SerialReflection
from combee_fast.gepa.search import GepaSearch, SearchResult, minibatches
from combee_fast.session import open_session


def _config(**changes: object) -> SessionConfig:
    """Formula on a small slice, the flat preset at 1e-4 real seconds per simulated second."""
    base = SessionConfig(
        method="gepa", task=TaskConfig(train_split="train[0:60]", val_split="val[0:20]"), sim=SimConfig("flat", 1e-4),
        gepa=GepaConfig(max_metric_calls=150),
    )
    return msgspec.structs.replace(base, **changes)


async def _search(config: SessionConfig, reflection, minibatch: int, calls_type=GepaCalls):
    async with open_session(config) as session:
        calls = calls_type(session.task, session.clients, seed=config.seed)
        search = GepaSearch(
            calls, reflection, minibatch=minibatch, config=config.gepa, seed=config.seed,
            concurrency=config.transport.concurrency,
        )
        result = await search.run(session.train_split.examples, session.val_split.examples, Candidate.seed())
        return result, session.server.counters(), calls


def _expected_metric_calls(result: SearchResult, val: int) -> int:
    return val + sum(
        i.minibatch * (1 + (i.child_total is not None)) + val * (i.outcome == "accepted") for i in result.iterations
    )


async def test_metric_calls_are_counted_as_gepa_counts_them_and_the_budget_stops_the_search() -> None:
    result, counters, _ = await _search(_config(), SerialReflection(), 3)
    assert result.metric_calls == _expected_metric_calls(result, 20)
    assert result.metric_calls == counters.requests_by_role["gepa_solver"]  # one solve request per metric call
    assert result.metric_calls >= 150
    assert result.iterations[-2].metric_calls < 150  # no iteration starts once the budget is spent
    running = [i.metric_calls for i in result.iterations]
    assert running == sorted(running)
    reflecting = [i for i in result.iterations if i.outcome != "perfect"]
    assert counters.requests_by_role["gepa_proposer"] == len(reflecting)  # serial: one reflection call each
    assert all(i.minibatch == 3 for i in result.iterations)


async def test_a_child_is_accepted_exactly_when_it_beats_its_parent_on_the_minibatch() -> None:
    result, _, _ = await _search(_config(), SerialReflection(), 3)
    graded = [i for i in result.iterations if i.child_total is not None]
    assert any(i.outcome == "accepted" for i in graded) and any(i.outcome == "rejected" for i in graded)
    for record in graded:
        assert (record.outcome == "accepted") == (record.child_total > record.parent_total)
    accepted = [i for i in result.iterations if i.outcome == "accepted"]
    assert len(result.candidates) == 1 + len(accepted)
    for record in accepted:
        assert result.candidates[record.child].parents == (record.parent,)
        assert len(result.val_scores[record.child]) == 20
    assert result.best_val_accuracy >= sum(result.val_scores[0]) / 20


class _Unchanged:
    """A reflection that appends a line teaching nothing: the child can only tie its parent."""

    async def reflect(self, learner: GepaLearner, current: str, evaluations: Sequence[Evaluation], *, iteration: int):
        return Reflected(current + "\nBe careful.", (), 0.0)


async def test_a_child_that_only_ties_its_parent_is_rejected() -> None:
    result, counters, _ = await _search(_config(gepa=GepaConfig(max_metric_calls=80)), _Unchanged(), 3)
    assert {i.outcome for i in result.iterations} <= {"rejected", "perfect"}
    assert any(i.outcome == "rejected" for i in result.iterations)
    assert len(result.candidates) == 1 and result.best == 0
    assert counters.requests_by_role["gepa_solver"] == _expected_metric_calls(result, 20)


@pytest.mark.parametrize("method", ["gepa", "combee-gepa"])
async def test_the_same_seed_replayed_from_the_cache_gives_the_identical_final_candidate(tmp_path, method: str) -> None:
    cache = str(tmp_path / "cache.jsonl")
    config = _config(method=method, train=TrainConfig(batch_size=12))
    async with open_session(msgspec.structs.replace(config, cache=CacheConfig(cache, "record"))) as session:
        recorded = await session.train()
    async with open_session(msgspec.structs.replace(config, cache=CacheConfig(cache, "replay"))) as session:
        replayed = await session.train()
        assert session.server.counters().requests == 0  # every answer came from the cache
    async with open_session(msgspec.structs.replace(config, transport=TransportConfig(concurrency=3))) as session:
        reordered = await session.train()  # another completion order, the same draws
    assert recorded.final == replayed.final == reordered.final
    assert recorded.final.render() != Candidate.seed().render()
    assert recorded.metric_calls == replayed.metric_calls == reordered.metric_calls
    assert [r.batch_reason for r in recorded.ledger] == [r.batch_reason for r in replayed.ledger]
    assert recorded.train_sim_seconds == replayed.train_sim_seconds


class _CountingCalls(GepaCalls):
    """Records how many reflection calls are in flight at once."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.in_flight = 0
        self.peaks: list[int] = []

    async def propose(self, current, evaluations, *, seed_path) -> Rewrite:
        self.in_flight += 1
        self.peaks.append(self.in_flight)
        try:
            await asyncio.sleep(0)
            return await super().propose(current, evaluations, seed_path=seed_path)
        finally:
            self.in_flight -= 1


async def test_combee_gepa_reflects_once_per_shuffled_group_all_at_once_then_aggregates() -> None:
    config = _config(method="combee-gepa", gepa=GepaConfig(max_metric_calls=200))
    reflection = CombeeReflection(config.combee, seed=config.seed)
    result, counters, calls = await _search(config, reflection, 16, _CountingCalls)
    reflecting = [i for i in result.iterations if i.outcome != "perfect"]
    assert reflecting
    for record in reflecting:
        groups = augmented_groups(16, config.combee.duplicates, rng_at(config.seed, "gepa", "shuffle", record.iteration))
        proposers = [p for p in record.proposals if p.source.startswith("proposer")]
        assert len(groups) == 4 and len(proposers) == 4  # floor(sqrt(16)) groups, one call each
        aggregators = [p for p in record.proposals if p.source.startswith("aggregator")]
        assert len(aggregators) == (1 if sum(bool(p.ops) for p in proposers) > 1 else 0)
    assert max(calls.peaks) == 4  # every group's reflection in flight at once
    assert counters.requests_by_role["gepa_proposer"] == 4 * len(reflecting)
    assert result.metric_calls == _expected_metric_calls(result, 20) == counters.requests_by_role["gepa_solver"]


def test_minibatches_follow_the_engines_epoch_order_and_span_epochs() -> None:
    items = list(range(7))
    stream = minibatches(items, 3, seed=4)
    batches = [next(stream) for _ in range(5)]
    first_epoch = [items[i] for i in rng_at(4, "order", 0).permutation(7)]
    assert [x for _, b in batches[:2] for x in b] == first_epoch[:6]
    assert batches[2][0] == 0 and batches[2][1][0] == first_epoch[6]
    assert [e for e, _ in batches] == [0, 0, 0, 1, 1]


async def test_max_epochs_stops_the_search_after_whole_passes_over_the_train_split() -> None:
    config = _config(task=TaskConfig(train_split="train[0:30]", val_split="val[0:10]"),
                     gepa=GepaConfig(max_metric_calls=100_000, max_epochs=1))
    result, _, _ = await _search(config, SerialReflection(), 3)
    assert len(result.iterations) == 10 and {i.epoch for i in result.iterations} == {0}
    assert result.metric_calls == _expected_metric_calls(result, 10) < 100_000


async def test_injected_faults_are_retried_or_repaired_and_each_grading_counts_once() -> None:
    faults = FaultConfig(rate_500=0.1, rate_malformed=0.1)
    config = _config(method="combee-gepa", sim=SimConfig("flat", 1e-4, faults=faults), train=TrainConfig(batch_size=12))
    async with open_session(config) as session:
        result = await session.train()
        counters = session.server.counters()
    assert result.metric_calls >= 150 and result.candidates == 1 + result.accepted >= 2
    assert counters.faults_injected.get("500", 0) > 0 and counters.faults_injected.get("malformed", 0) > 0
    assert counters.requests_by_role["gepa_solver"] > result.metric_calls  # retries and repairs are no metric calls
