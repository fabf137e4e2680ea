"""Learning runs end to end over real HTTP against the simulated endpoint playing the task world."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from combee_fast.ace.calls import AceCalls
from combee_fast.config import (
    CacheConfig,
    CombeeConfig,
    FaultConfig,
    MapConfig,
    OnlineConfig,
    SessionConfig,
    SimConfig,
    TaskConfig,
    TrainConfig,
    TransportConfig,
)
from combee_fast.embedded.online import OnlineLearner
from combee_fast.ace.playbook import Playbook
from combee_fast.record.rundir import RunDir
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.session import open_session


def _config(train_split: str = "train[0:48]", **changes: object) -> SessionConfig:
    """Formula on a small slice, the flat preset at 1e-4 real seconds per simulated second."""
    base = SessionConfig(task=TaskConfig(train_split=train_split, val_split="val[0:30]"), sim=SimConfig("flat", 1e-4))
    return msgspec.structs.replace(base, **changes)


async def _learn(config: SessionConfig, run_dir: RunDir | None = None, batch: int = 12):
    async with open_session(config) as session:
        result = await session.train(plan=FixedBatch(batch), run_dir=run_dir)
        return result, session.server.counters() if session.server else None


@pytest.mark.parametrize("method", ["sequential", "naive", "combee"])
async def test_every_method_learns_a_playbook_that_beats_the_empty_one(method: str) -> None:
    result, _ = await _learn(_config(method=method))
    assert len(result.final) > 0
    assert result.samples == 48
    assert result.final_eval is not None and result.final_eval.examples == 30
    async with open_session(_config()) as session:
        empty = await session.evaluate(Playbook.empty(), session.val_split.examples)
    assert result.final_eval.accuracy > empty.accuracy


async def test_combee_step_runs_sqrt_n_curators_and_one_reducer() -> None:
    async with open_session(_config("train[0:25]")) as session:
        step = await session.method("combee").step(
            session.train_split.examples, Playbook.empty(), epoch=0, step=0
        )
    roles = [p.usage.role for p in step.proposals]
    assert roles.count("curator") == 5  # floor(sqrt(25))
    assert roles.count("reducer") == 1
    assert step.artifact.version == 1  # tags and ops applied once


async def test_combee_reduce_tree_respects_the_fan_in() -> None:
    async with open_session(_config("train[0:100]", combee=CombeeConfig(max_fan_in=4, max_reduce_ops=None))) as session:
        step = await session.method("combee").step(
            session.train_split.examples, Playbook.empty(), epoch=0, step=0
        )
    reducers = [p for p in step.proposals if p.usage.role == "reducer"]
    # 10 curator proposals -> 3 reducer calls (4+4+2) -> 1 call over 3
    assert len(reducers) == 4
    assert {p.source.split(".")[0] for p in reducers} == {"reducer[0", "reducer[1"}


async def test_same_seed_and_replay_cache_give_a_byte_identical_playbook(tmp_path) -> None:
    cache = str(tmp_path / "replay.jsonl")
    files = []
    for index, (mode, jitter) in enumerate([("record", 0.6), ("replay", 0.0), ("off", 0.9)]):
        run_dir = RunDir(tmp_path / f"run{index}")
        config = _config(cache=CacheConfig(str(cache), mode), sim=SimConfig("flat", 2e-4, latency_jitter=jitter))
        result, counters = await _learn(config, run_dir)
        run_dir.close()
        files.append((tmp_path / f"run{index}" / "final.json").read_bytes())
        if mode == "replay":
            assert counters is not None and counters.requests == 0  # nothing was sent
    assert files[0] == files[1] == files[2]


async def test_injected_faults_are_recorded_and_the_run_completes(tmp_path) -> None:
    faults = FaultConfig(rate_429=0.05, rate_500=0.05, rate_malformed=0.3, retry_after_s=0.1)
    run_dir = RunDir(tmp_path / "run")
    config = _config(sim=SimConfig("flat", 1e-4, faults=faults), transport=TransportConfig(max_retries=6))
    result, counters = await _learn(config, run_dir)
    run_dir.close()
    assert result.samples == 48
    assert counters is not None and sum(counters.faults_injected.values()) > 0
    errors = [e for row in result.ledger for e in row.errors]
    assert errors, "with 30% malformed responses some calls fail even after the repair request"
    assert {e.kind for e in errors} <= {"malformed_json", "schema_mismatch", "http_status", "connection", "truncated"}
    versions = [0] + [row.version for row in result.ledger]
    assert all(b - a in (0, 1) for a, b in zip(versions, versions[1:])), "one apply per step"
    ledger = [msgspec.json.decode(line) for line in (tmp_path / "run" / "ledger.jsonl").read_bytes().splitlines()]
    assert sum(len(row["errors"]) for row in ledger) == len(errors)


async def test_a_run_with_injected_faults_learns_the_same_playbook_whatever_the_completion_order(tmp_path) -> None:
    faults = FaultConfig(rate_429=0.1, rate_500=0.1, rate_drop=0.1, rate_malformed=0.1, rate_truncated=0.1,
                         retry_after_s=0.1)
    files = []
    for index, jitter in enumerate((0.0, 0.9)):
        run_dir = RunDir(tmp_path / f"run{index}")
        config = _config(sim=SimConfig("flat", 2e-4, faults=faults, latency_jitter=jitter),
                         transport=TransportConfig(max_retries=6))
        result, counters = await _learn(config, run_dir)
        run_dir.close()
        assert counters is not None and sum(counters.faults_injected.values()) > 0
        files.append((tmp_path / f"run{index}" / "final.json").read_bytes())
    assert files[0] == files[1]


async def test_online_mode_accounts_for_every_rollout_in_exactly_one_batch() -> None:
    async with open_session(_config("train")) as session:
        examples = session.train_split.examples
        answers = [await AceCalls(session.calls).generate(e, "", epoch=0) for e in examples[:50]]
        rollouts = [
            msgspec.structs.replace(answers[i % 50], round=i // 50) for i in range(1000)
        ]
        config = OnlineConfig(batch_size=64, max_wait_s=0.05, queue_size=256)
        published: list[int] = []

        async def on_publish(playbook: Playbook, batch) -> None:
            published.append(playbook.version)

        async with OnlineLearner(session.calls, Playbook.empty(), config, on_publish=on_publish) as learner:
            versions_seen: list[int] = []

            async def reader() -> None:
                while len(learner.batches) < 3:
                    versions_seen.append(learner.artifact.version)
                    await asyncio.sleep(0)

            reading = asyncio.create_task(reader())
            tickets = await asyncio.gather(*(learner.submit(r) for r in rollouts))
            applied = await asyncio.gather(*tickets)
            await reading
    ids = [rid for batch in learner.batches for rid in batch.rollout_ids]
    assert sorted(ids) == sorted(r.id for r in rollouts)
    assert len(ids) == len(set(ids)) == 1000
    for rollout, batch in zip(rollouts, applied):
        assert rollout.id in batch.rollout_ids
    assert all(len(b.rollout_ids) <= 64 for b in learner.batches)
    assert learner.artifact.version > 0 and versions_seen == sorted(versions_seen)
    assert published == [b.version for b in learner.batches]


async def test_chains_still_retrying_are_carried_and_curated_in_the_next_step() -> None:
    config = _config("train[0:60]", map=MapConfig(sync_rounds=0))  # every retry leaves its step
    async with open_session(config) as session:
        method = session.method("combee")
        items = session.train_split.examples
        first = await method.step(items[:30], Playbook.empty(), epoch=0, step=0)
        carried = method.pending()
        assert carried == sum(not t.rollouts[-1].correct and t.rollouts[-1].error is None for t in first.traces)
        assert carried > 0 and all(len(t.rollouts) == 1 for t in first.traces)
        second = await method.step(items[30:], first.artifact, epoch=0, step=1)
        continued = [t for t in second.traces if t.rollouts and t.rollouts[0].round > 0]
        assert len(continued) == carried
        drained = await method.step([], second.artifact, epoch=0, step=2)
        assert method.pending() == 0 and drained.artifact.version >= second.artifact.version


async def test_training_drains_every_carried_chain() -> None:
    result, _ = await _learn(_config(map=MapConfig(sync_rounds=0)))
    assert result.ledger[-1].batch_reason == "drain" or all(row.batch_reason == "fixed" for row in result.ledger)
    retried = sum(row.calls.get("generator", 0) for row in result.ledger)
    assert retried > result.samples  # the carried retries did run


async def test_roles_on_one_endpoint_share_one_concurrency_cap() -> None:
    async with open_session(_config("train[0:60]", transport=TransportConfig(concurrency=8))) as session:
        assert len(session.clients.distinct()) == 1
        await session.train(plan=FixedBatch(60))
        assert session.server is not None and session.server.counters().peak_in_flight <= 8


async def test_a_run_whose_endpoint_stops_answering_stops_with_what_it_learned(tmp_path) -> None:
    from combee_fast.errors import EndpointUnreachable

    dead = SimConfig("flat", 1e-4, faults=FaultConfig(rate_drop=1.0))
    run_dir = RunDir(tmp_path)
    with pytest.raises(EndpointUnreachable, match="step 1 failed to reach its endpoint"):
        await _learn(_config(sim=dead, transport=TransportConfig(max_retries=1)), run_dir)
    run_dir.close()
    assert Playbook.load(tmp_path / "final.json").version == 0
    assert len((tmp_path / "ledger.jsonl").read_text().splitlines()) == 1


async def test_a_large_reduce_is_split_by_topic_so_no_reducer_reads_more_than_its_bound() -> None:
    async with open_session(_config("train[0:100]", combee=CombeeConfig(max_reduce_ops=6))) as session:
        step = await session.method("combee").step(session.train_split.examples, Playbook.empty(), epoch=0, step=0)
    curated = sum(len(p.edits) for p in step.proposals if p.usage.role == "curator")
    reducers = [p for p in step.proposals if p.usage.role == "reducer"]
    assert curated > 6 and len({p.source for p in reducers}) == len(reducers) > 1
    assert step.artifact.version == 1 and len(step.artifact) > 0


async def test_validation_every_step_keeps_the_best_playbook(tmp_path) -> None:
    run_dir = RunDir(tmp_path)
    result, _ = await _learn(_config(train=TrainConfig(eval_every=1)), run_dir, batch=8)
    run_dir.close()
    scored = [(row.val_accuracy, row.version) for row in result.ledger if row.val_accuracy is not None]
    assert len(scored) == len(result.ledger)
    best_accuracy = max(accuracy for accuracy, _ in scored)
    first_best_version = next(version for accuracy, version in scored if accuracy == best_accuracy)
    assert result.best_val_accuracy == best_accuracy
    assert Playbook.load(tmp_path / "best.json").version == result.best.version == first_best_version


async def test_a_stop_answer_ends_the_run_cleanly_after_that_step(tmp_path) -> None:
    from combee_fast.verify.budget import BudgetGuard
    from combee_fast.verify.card import Budget

    guard = BudgetGuard(Budget(rollouts=10, tokens=10**9, gpu_seconds=10**9, wall_clock_s=10**6, binding="rollouts"))
    async with open_session(_config(method="sequential")) as session:
        result = await session.train(plan=FixedBatch(1), run_dir=RunDir(tmp_path), stops=(guard,))
    assert result.stopped_by is not None and result.stopped_by.startswith("budget rollouts spent: ")
    assert guard.bound == "rollouts" and 10 <= result.rollouts < 14 and result.samples < 48
    assert result.final_eval is not None and result.final_eval.examples == 30
    assert Playbook.load(tmp_path / "final.json").render() == result.final.render()
