"""The release gate inside the three embedded learners over real HTTP: the same submissions give
the same decisions (with the same evidence) on the host's loop, in a thread and in a child
process; a held candidate serves nothing until approved; a harmful candidate learned in the
harmful world is rolled back and the incumbent serves again."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from combee_fast.ace.calls import AceCalls
from combee_fast.config import EmbedConfig, OnlineConfig, ReleaseConfig, SessionConfig, SimConfig, TaskConfig
from combee_fast.embedded.events import ReleaseDecision, ReleaseStatus
from combee_fast.embedded.online import OnlineLearner
from combee_fast.embedded.process import ProcessLearner
from combee_fast.embedded.threaded import ThreadedLearner
from combee_fast.errors import ReleaseError
from combee_fast.ace.playbook import Playbook
from combee_fast.run.events import Event, Events
from combee_fast.schema import Rollout
from combee_fast.ace.records import Delta, Op, OpKind
from combee_fast.session import Session, open_session
from combee_fast.sim.world import HARMFUL_FACETS, harmful_lesson, specific_lesson

CONFIG = SessionConfig(task=TaskConfig(train_split="train", val_split="val[0:10]"), sim=SimConfig("flat", 1e-4))
BATCH = 48


async def _rollouts(session: Session, n: int) -> list[Rollout]:
    answers = [await AceCalls(session.calls).generate(e, "", epoch=0) for e in session.train_split.examples[:24]]
    return [msgspec.structs.replace(answers[i % 24], round=i) for i in range(n)]


async def _candidate(learner, version: int) -> None:
    """Wait until the host sees candidate ``version`` (the learner works meanwhile)."""
    for _ in range(3_000):
        candidate = learner.release.candidate
        if candidate is not None and candidate.version == version:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"candidate {version} never came; release is {learner.release}")


async def _drive(learner, rollouts: list[Rollout]) -> None:
    """Four batches: the first learns v1; v1 then loses every reward against the incumbent
    (rolled back), the second batch learns v2 on the incumbent, v2 wins every reward (promoted),
    the third learns v3 on v2, approved by hand; the fourth goes in while v3 serves."""
    async with learner:
        tickets = [await learner.submit(r, version=0) for r in rollouts[:BATCH]]
        await _candidate(learner, 1)
        for i, rollout in enumerate(rollouts[BATCH:2 * BATCH]):
            version = 1 if i % 2 == 0 else 0
            tickets.append(await learner.submit(msgspec.structs.replace(rollout, score=float(version == 0)),
                                                version=version))
        await _candidate(learner, 2)
        for i, rollout in enumerate(rollouts[2 * BATCH:3 * BATCH]):
            version = 2 if i % 2 == 0 else 0
            tickets.append(await learner.submit(msgspec.structs.replace(rollout, score=float(version == 2)),
                                                version=version))
        await _candidate(learner, 3)
        with pytest.raises(ReleaseError, match="version 1 was rolled back"):
            await learner.approve(1)
        await learner.approve(3)
        for rollout in rollouts[3 * BATCH:]:
            tickets.append(await learner.submit(rollout, version=3))
        await asyncio.gather(*tickets)


def _staged() -> OnlineConfig:
    return OnlineConfig(batch_size=BATCH, max_wait_s=30.0,  # batches close full: timing cannot change them
                        release=ReleaseConfig(policy="staged", stages=(0.5, 1.0), margin=0.1))


@pytest.mark.slow
async def test_the_same_submissions_give_the_same_decisions_in_the_loop_a_thread_and_a_process() -> None:
    decided: dict[str, list[ReleaseDecision]] = {}
    async with open_session(CONFIG) as session:
        rollouts = await _rollouts(session, 4 * BATCH)
        for name, make in (("inloop", OnlineLearner), ("threaded", ThreadedLearner), ("process", ProcessLearner)):
            seen: list[Event] = []
            learner = make(session.calls, Playbook.empty(), _staged(), events=Events(seen.append))
            await _drive(learner, rollouts)
            decided[name] = [e for e in seen if isinstance(e, ReleaseDecision)]
            assert learner.release.incumbent.version == 3 and learner.text == learner.artifact.render()
            assert learner.release.candidate.version == 4 and learner.release.share == 0.5
            assert {learner.context_for(f"user-{k}").version for k in range(100)} == {3, 4}
    inloop = decided["inloop"]
    assert [(d.decision, d.candidate, d.incumbent) for d in inloop] == [
        ("candidate", 1, 0), ("rollback", 1, 0), ("candidate", 2, 0), ("promote", 2, 0), ("candidate", 3, 2),
        ("approve", 3, 2), ("candidate", 4, 3)]
    rollback = inloop[1].evidence
    assert rollback["upper"] < 0 and rollback["candidate_rewards"] + rollback["incumbent_rewards"] < BATCH
    assert decided["threaded"] == inloop and decided["process"] == inloop  # evidence and all, float for float


async def test_hold_publishes_nothing_until_approved() -> None:
    config = OnlineConfig(batch_size=16, max_wait_s=30.0, release=ReleaseConfig(policy="hold"))
    async with open_session(CONFIG) as session:
        rollouts = await _rollouts(session, 48)
        async with ThreadedLearner(session.calls, Playbook.empty(), config) as learner:
            tickets = [await learner.submit(r, version=0) for r in rollouts[:32]]
            await asyncio.gather(*tickets)
            await _candidate(learner, 1)
            assert learner.release.share == 0.0 and learner.artifact.version == 0 and learner.text == ""
            assert {learner.context_for(f"user-{k}").version for k in range(500)} == {0}
            assert [b.version for b in learner.batches] == [1, 2]  # learning went on behind the held candidate
            await learner.approve(1)
            await _candidate(learner, 2)
            assert learner.artifact.version == 1 and learner.context_for("user-1").version == 1
            await learner.reject(2)
            await asyncio.gather(*[await learner.submit(r, version=1) for r in rollouts[32:]])
            await _candidate(learner, 3)  # learned on the incumbent, a new number
        assert learner.release.incumbent.version == 1


def _lessons(*texts: str) -> Playbook:
    delta = Delta(tuple(Op(OpKind.ADD, section="formulas_and_calculations", content=text) for text in texts))
    return Playbook.empty().apply(delta)[0]


@pytest.mark.slow
async def test_a_harmful_candidate_is_rolled_back_and_the_incumbent_serves_again() -> None:
    """In the harmful world, a playbook handed in from outside states a wrong lesson about every
    formula of the traffic: requests served with it are mostly wrong, the staged release rolls it
    back, and every request runs with the incumbent again."""
    config = msgspec.structs.replace(CONFIG, sim=SimConfig("flat", 1e-5, world="noisy+harmful"))
    online = OnlineConfig(batch_size=1024, max_wait_s=0.05,
                          release=ReleaseConfig(policy="staged", stages=(0.2, 0.5, 1.0), margin=0.05))
    async with open_session(config) as session:
        traffic = session.train_split.examples[:60]
        units = sorted({e.meta["formula"] for e in traffic})
        incumbent = _lessons(*(specific_lesson(unit, 0) for unit in units))
        harmful = _lessons(*(specific_lesson(unit, 0) for unit in units),
                           *(harmful_lesson(unit, 0, 40) for unit in units))
        assert HARMFUL_FACETS[0] in harmful.render()
        seen: list[Event] = []
        async with OnlineLearner(session.calls, incumbent, online, events=Events(seen.append)) as learner:
            number = await learner.propose(harmful)
            assert learner.release.candidate.version == number
            served: list[int] = []
            for i in range(3_000):
                context = learner.context_for(f"user-{i % 400}")
                served.append(context.version)
                rollout = await AceCalls(session.calls).generate(traffic[i % len(traffic)], context.text, epoch=0, round_=i)
                await learner.submit(rollout, version=context.version)
                if learner.release.candidate is None or learner.release.candidate.version != number:
                    break
            decision = [e for e in seen if isinstance(e, ReleaseDecision) and e.candidate == number][-1]
            assert decision.decision == "rollback" and decision.evidence["upper"] < 0
            assert learner.release.incumbent.version == incumbent.version
            assert all(learner.context_for(f"user-{k}").version != number for k in range(400))
            assert 0 < served.count(number) < 0.5 * len(served)


@pytest.mark.slow
async def test_shadow_re_runs_in_the_child_process_roll_a_harmful_candidate_back_serving_it_nowhere() -> None:
    config = msgspec.structs.replace(CONFIG, sim=SimConfig("flat", 1e-5, world="noisy+harmful"))
    online = OnlineConfig(batch_size=1024, max_wait_s=0.05,
                          release=ReleaseConfig(policy="shadow", shadow_share=0.5, margin=0.05, status_every=50))
    async with open_session(config) as session:
        traffic = session.train_split.examples[:60]
        units = sorted({e.meta["formula"] for e in traffic})
        incumbent = _lessons(*(specific_lesson(unit, 0) for unit in units))
        harmful = _lessons(*(specific_lesson(unit, 0) for unit in units),
                           *(harmful_lesson(unit, 1, 40) for unit in units))
        seen: list[Event] = []
        # a normal-priority child: the host here generates without pause, so an idle-priority one would wait
        embed = EmbedConfig(child_sched_idle=False, child_nice=None)
        async with ProcessLearner(session.calls, incumbent, online, embed=embed, events=Events(seen.append)) as learner:
            number = await learner.propose(harmful)
            await _candidate(learner, number)
            for i in range(1_500):
                context = learner.context_for(f"user-{i}")
                assert context.version == incumbent.version  # a shadow candidate serves nothing
                rollout = await AceCalls(session.calls).generate(traffic[i % len(traffic)], context.text, epoch=0, round_=i)
                await learner.submit(rollout, version=context.version)
                if any(isinstance(e, ReleaseDecision) and e.decision == "rollback" for e in seen):
                    break
        decision = [e for e in seen if isinstance(e, ReleaseDecision) and e.candidate == number][-1]
        assert decision.decision == "rollback"
        assert decision.evidence["method"] == "paired" and decision.evidence["upper"] < 0
        status = [e for e in seen if isinstance(e, ReleaseStatus)][-1]
        assert status.shadow_calls >= decision.evidence["pairs"] > 0 and status.shadow_tokens > 0
        assert learner.release.incumbent.version == incumbent.version  # learned versions wait their turn
