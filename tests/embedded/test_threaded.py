"""The threaded online learner over real HTTP: same batches and playbook as the in-loop learner,
tickets on the host's loop, bounded submissions, process settings restored."""

from __future__ import annotations

import asyncio
import gc
import sys
import threading

import msgspec
import pytest

from combee_fast.ace.calls import AceCalls
from combee_fast.config import OnlineConfig, SessionConfig, SimConfig, TaskConfig, EmbedConfig
from combee_fast.errors import ConfigError
from combee_fast.ace.playbook import Playbook
from combee_fast.embedded.online import OnlineLearner
from combee_fast.embedded.threaded import ThreadedLearner
from combee_fast.schema import Rollout
from combee_fast.session import Session, open_session

CONFIG = SessionConfig(task=TaskConfig(train_split="train", val_split="val[0:30]"), sim=SimConfig("flat", 1e-4))


async def _rollouts(session: Session, n: int) -> list[Rollout]:
    answers = [await AceCalls(session.calls).generate(e, "", epoch=0) for e in session.train_split.examples[:24]]
    return [msgspec.structs.replace(answers[i % 24], round=i // 24) for i in range(n)]


async def _learn(learner: OnlineLearner | ThreadedLearner, rollouts: list[Rollout]) -> list:
    async with learner:
        tickets = [await learner.submit(r) for r in rollouts]
        return await asyncio.gather(*tickets)


async def test_threaded_learner_applies_the_same_batches_and_playbook_as_the_online_learner() -> None:
    config = OnlineConfig(batch_size=16, max_wait_s=30.0)  # batches close full: timing cannot change them
    async with open_session(CONFIG) as session:
        rollouts = await _rollouts(session, 64)
        direct = OnlineLearner(session.calls, Playbook.empty(), config)
        await _learn(direct, rollouts)
        threaded = ThreadedLearner(session.calls, Playbook.empty(), config)
        applied = await _learn(threaded, rollouts)
    assert [b.rollout_ids for b in threaded.batches] == [b.rollout_ids for b in direct.batches]
    assert len(threaded.batches) == 4
    assert threaded.artifact.version == direct.artifact.version > 0
    assert threaded.artifact.render() == direct.artifact.render()
    assert threaded.text == direct.artifact.render()
    assert [b.number for b in applied] == [i // 16 for i in range(64)]
    assert sum(t.calls for t in threaded.usage_totals().values()) > 64


async def test_reads_are_whole_versions_and_tickets_resolve_on_the_host_loop() -> None:
    config = OnlineConfig(batch_size=32, max_wait_s=0.05, queue_size=32)
    published: list[tuple[int, str]] = []

    async def on_publish(playbook: Playbook, batch) -> None:
        published.append((playbook.version, threading.current_thread().name))

    async with open_session(CONFIG) as session:
        rollouts = await _rollouts(session, 200)
        learner = ThreadedLearner(session.calls, Playbook.empty(), config, on_publish=on_publish)
        with pytest.raises(RuntimeError, match="not started"):
            await learner.submit(rollouts[0])
        seen: list[int] = []
        async with learner:
            host = asyncio.get_running_loop()
            assert learner.artifact.version == 0 and learner.text == Playbook.empty().render()
            tickets = []
            for rollout in rollouts:
                tickets.append(await learner.submit(rollout))
                assert learner._unsettled <= config.queue_size + config.batch_size  # bounded
                snapshot = learner.snapshot
                assert snapshot.text == snapshot.artifact.render()  # text and playbook of one version
                seen.append(snapshot.artifact.version)
            assert all(t.get_loop() is host for t in tickets)
            applied = await asyncio.gather(*tickets)
    assert seen == sorted(seen)
    ids = [rid for batch in learner.batches for rid in batch.rollout_ids]
    assert sorted(ids) == sorted(r.id for r in rollouts) and len(set(ids)) == 200
    assert all(r.id in b.rollout_ids for r, b in zip(rollouts, applied))
    assert [v for v, _ in published] == [b.version for b in learner.batches]
    assert {name for _, name in published} == {"combee-learner"}
    with pytest.raises(RuntimeError, match="not started"):
        await learner.submit(rollouts[0])


async def test_process_settings_are_set_while_running_and_restored_at_stop() -> None:
    before_interval, before_thresholds = sys.getswitchinterval(), gc.get_threshold()
    settings = EmbedConfig(switch_interval_s=0.0007, gc_threshold0=12_345)
    async with open_session(CONFIG) as session:
        async with ThreadedLearner(session.calls, Playbook.empty(), embed=settings):
            assert sys.getswitchinterval() == pytest.approx(0.0007)
            assert gc.get_threshold()[0] == 12_345
    assert sys.getswitchinterval() == before_interval and gc.get_threshold() == before_thresholds
    with pytest.raises(ConfigError, match="switch_interval_s"):
        EmbedConfig(switch_interval_s=0.0)
