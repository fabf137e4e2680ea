"""The process learner over real HTTP: same batches and playbook as the in-loop learner, tickets
on the host's loop, a dead child fails its tickets."""

from __future__ import annotations

import asyncio
import gc
import os

import msgspec
import pytest

from combee_fast.ace.calls import AceCalls
from combee_fast.config import EmbedConfig, OnlineConfig, SessionConfig, SimConfig, TaskConfig
from combee_fast.ace.playbook import Playbook
from combee_fast.embedded.online import OnlineLearner
from combee_fast.embedded.process import LearnerProcessError, ProcessLearner
from combee_fast.schema import Rollout
from combee_fast.session import Session, open_session

CONFIG = SessionConfig(task=TaskConfig(train_split="train", val_split="val[0:30]"), sim=SimConfig("flat", 1e-4))


async def _rollouts(session: Session, n: int) -> list[Rollout]:
    answers = [await AceCalls(session.calls).generate(e, "", epoch=0) for e in session.train_split.examples[:24]]
    return [msgspec.structs.replace(answers[i % 24], round=i // 24) for i in range(n)]


async def test_process_learner_applies_the_same_batches_and_playbook_as_the_online_learner() -> None:
    config = OnlineConfig(batch_size=16, max_wait_s=30.0)  # batches close full: timing cannot change them
    async with open_session(CONFIG) as session:
        rollouts = await _rollouts(session, 64)
        direct = OnlineLearner(session.calls, Playbook.empty(), config)
        async with direct:
            await asyncio.gather(*[await direct.submit(r) for r in rollouts])
        learner = ProcessLearner(session.calls, Playbook.empty(), config, embed=EmbedConfig(gc_threshold0=12_345))
        thresholds = gc.get_threshold()
        with pytest.raises(RuntimeError, match="not started"):
            await learner.submit(rollouts[0])
        seen: list[int] = []
        async with learner:
            host = asyncio.get_running_loop()
            tickets = []
            for rollout in rollouts:
                tickets.append(await learner.submit(rollout))
                seen.append(learner.snapshot.batch.version if learner.snapshot.batch else 0)
            assert all(t.get_loop() is host for t in tickets)
            assert gc.get_threshold()[0] == 12_345
            applied = await asyncio.gather(*tickets)
        assert gc.get_threshold() == thresholds
    assert [b.rollout_ids for b in learner.batches] == [b.rollout_ids for b in direct.batches]
    assert learner.artifact.version == direct.artifact.version > 0
    assert learner.artifact.render() == learner.text == direct.artifact.render()
    assert [b.number for b in applied] == [i // 16 for i in range(64)]
    assert seen == sorted(seen)
    assert sum(t.calls for t in learner.usage_totals().values()) > 64


async def test_a_dead_child_fails_its_unsettled_tickets() -> None:
    async with open_session(CONFIG) as session:
        rollouts = await _rollouts(session, 4)
        learner = ProcessLearner(session.calls, Playbook.empty(), OnlineConfig(batch_size=64, max_wait_s=30.0))
        await learner.start()
        tickets = [await learner.submit(r) for r in rollouts]
        learner._child.kill()  # type: ignore[union-attr]
        for ticket in tickets:
            with pytest.raises(LearnerProcessError):
                await ticket
        await learner.stop()


def _thread_stats(pid: int) -> list[list[str]]:
    """``/proc/<pid>/task/*/stat`` fields after the command name, per thread."""
    stats = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            stats.append(f.read().rsplit(")", 1)[1].split())
    return stats


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux-only")
@pytest.mark.parametrize("embed, policy, nice", [(EmbedConfig(), os.SCHED_IDLE if hasattr(os, "SCHED_IDLE") else 5, 0),
                                                 (EmbedConfig(child_sched_idle=False, child_nice=7), 0, 7)])
async def test_the_child_runs_at_the_configured_cpu_priority(embed: EmbedConfig, policy: int, nice: int) -> None:
    async with open_session(CONFIG) as session:
        async with ProcessLearner(session.calls, Playbook.empty(), OnlineConfig(batch_size=4), embed=embed) as learner:
            stats = _thread_stats(learner._child.pid)  # type: ignore[union-attr]
    # after the command: field 19 of stat is nice, field 41 the scheduling policy (3rd = index 0)
    assert stats and {int(s[41 - 3]) for s in stats} == {policy}
    assert int(stats[0][19 - 3]) == nice
