"""Embedded learners isolate bad input: a malformed rollout is refused at ``submit`` on the host
(the learner, its child and the rollouts batched around it untouched); a rollout that breaks a
step fails alone; every ticket settles, with the cause when the child died; ``stop`` is
idempotent and safe to call at once from several tasks. Real HTTP and a real child process."""

from __future__ import annotations

import asyncio
import math

import msgspec
import pytest

from combee_fast.ace.calls import AceCalls
from combee_fast.ace.kind import AceKind
from combee_fast.ace.online import AceOnline
from combee_fast.config import OnlineConfig, SessionConfig, SimConfig, TaskConfig
from combee_fast.embedded.online import AppliedBatch, OnlineLearner
from combee_fast.embedded.process import ProcessLearner
from combee_fast.embedded.threaded import ThreadedLearner
from combee_fast.errors import LearnerProcessError, RolloutError
from combee_fast.learners import LEARNERS
from combee_fast.ace.playbook import Playbook
from combee_fast.schema import Rollout
from combee_fast.session import Session, open_session

CONFIG = SessionConfig(task=TaskConfig(train_split="train", val_split="val[0:3]"), sim=SimConfig("flat", 1e-4))
LEARNER_CLASSES = {"in-loop": OnlineLearner, "threaded": ThreadedLearner, "process": ProcessLearner}


async def _rollouts(session: Session, n: int) -> list[Rollout]:
    return [await AceCalls(session.calls).generate(e, "", epoch=0) for e in session.train_split.examples[:n]]


def _malformed(good: Rollout) -> dict[str, object]:
    return {
        "None": None,
        "a string": "train:0#r0",
        "example=None": msgspec.structs.replace(good, example=None),
        "usage=a dict": msgspec.structs.replace(good, usage={"role": "generator"}),
        "round=-1": msgspec.structs.replace(good, round=-1),
        "score=nan": msgspec.structs.replace(good, score=math.nan),
        "score=5.0": msgspec.structs.replace(good, score=5.0),  # the docs say [0, 1]: it weighed as none can
        "score=-3.0": msgspec.structs.replace(good, score=-3.0),
        "score=1e308": msgspec.structs.replace(good, score=1e308),
    }


@pytest.mark.parametrize("kind", sorted(LEARNER_CLASSES))
async def test_a_malformed_rollout_is_refused_at_submit_and_the_good_ones_are_applied(kind: str) -> None:
    async with open_session(CONFIG) as session:
        good = await _rollouts(session, 4)
        learner = LEARNER_CLASSES[kind](session.calls, Playbook.empty(), OnlineConfig(batch_size=4, max_wait_s=2.0))
        async with learner:
            tickets = [await learner.submit(good[0]), await learner.submit(good[1])]
            for name, bad in _malformed(good[0]).items():
                with pytest.raises(RolloutError) as refused:
                    await learner.submit(bad)  # type: ignore[arg-type]
                assert "\n" not in str(refused.value), name
            tickets += [await learner.submit(good[2]), await learner.submit(good[3])]
            applied = await asyncio.gather(*tickets)
    assert all(isinstance(batch, AppliedBatch) for batch in applied)
    assert sorted(rid for batch in {b.number: b for b in applied}.values() for rid in batch.rollout_ids) == \
        sorted(r.id for r in good)


async def test_the_refusal_names_the_rollout_and_the_field() -> None:
    async with open_session(CONFIG) as session:
        good = (await _rollouts(session, 1))[0]
        async with OnlineLearner(session.calls, Playbook.empty()) as learner:
            messages = {}
            for name, bad in _malformed(good).items():
                with pytest.raises(RolloutError) as refused:
                    await learner.submit(bad)  # type: ignore[arg-type]
                messages[name] = str(refused.value)
    assert messages["None"] == "submit() takes a Rollout, got NoneType None"
    assert "$.example" in messages["example=None"]
    assert messages["round=-1"].startswith(f"rollout {good.id.replace('#r0', '#r-1')!r} is malformed: round -1")
    assert "score" in messages["score=nan"] and "nan" in messages["score=nan"]
    for score in ("5.0", "-3.0", "1e+308"):
        assert messages[f"score={score.replace('+', '')}"].endswith(f"is malformed: score {score} is not in [0, 1]")
    assert messages["usage=a dict"].endswith("is malformed: $.usage is a dict, not a Usage")


class _Fragile(AceOnline):
    """ACE's online learner, except that a rollout whose feedback is ``explode`` breaks the step."""

    async def run_item(self, item, artifact, text, *, epoch, rounds):  # type: ignore[no-untyped-def]
        if item.feedback == "explode":
            raise RuntimeError("this rollout breaks the learner")
        return await super().run_item(item, artifact, text, epoch=epoch, rounds=rounds)


class _FragileKind(AceKind):
    name = "fragile"

    def online_learner(self, calls):  # type: ignore[no-untyped-def]
        return _Fragile(calls)


@pytest.mark.parametrize("kind", ["in-loop", "threaded"])
async def test_a_rollout_that_breaks_its_batch_fails_alone(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(LEARNERS, "fragile", _FragileKind())
    async with open_session(CONFIG) as session:
        good = await _rollouts(session, 3)
        bad = msgspec.structs.replace(good[1], feedback="explode")
        config = OnlineConfig(learner="fragile", batch_size=3, max_wait_s=5.0)  # the three in one batch
        async with LEARNER_CLASSES[kind](session.calls, Playbook.empty(), config) as learner:
            tickets = [await learner.submit(r) for r in (good[0], bad, good[2])]
            outcomes = await asyncio.gather(*tickets, return_exceptions=True)
    assert isinstance(outcomes[0], AppliedBatch) and isinstance(outcomes[2], AppliedBatch)
    assert isinstance(outcomes[1], Exception) and "breaks the learner" in repr(outcomes[1])
    assert outcomes[0].rollout_ids == (good[0].id,) and outcomes[2].rollout_ids == (good[2].id,)


SLOW = SessionConfig(task=TaskConfig(train_split="train", val_split="val[0:3]"), sim=SimConfig("flat", 0.5))
"""Reflections of seconds: the learner is still busy with its first batch when its child is killed."""


async def test_every_ticket_settles_when_the_child_dies_and_submit_says_why() -> None:
    async with open_session(SLOW) as session:
        rollouts = await _rollouts(session, 4)
        learner = ProcessLearner(session.calls, Playbook.empty(),
                                 OnlineConfig(batch_size=1, queue_size=1, max_wait_s=60.0, max_publish_s=120.0))
        await learner.start()
        tickets = [await learner.submit(r) for r in rollouts[:2]]  # the room: queue_size + batch_size
        waiting = asyncio.ensure_future(learner.submit(rollouts[2]))  # waits for room
        await asyncio.sleep(0.3)
        assert not waiting.done() and not any(t.done() for t in tickets)
        learner._child.kill()  # type: ignore[union-attr]
        with pytest.raises(LearnerProcessError, match="the learner's process was killed by signal 9"):
            await asyncio.wait_for(waiting, 30)
        for ticket in tickets:
            with pytest.raises(LearnerProcessError, match="killed by signal 9, with tickets unsettled"):
                await asyncio.wait_for(ticket, 30)
        with pytest.raises(LearnerProcessError, match="killed by signal 9; start a new ProcessLearner"):
            await learner.submit(rollouts[3])
        await asyncio.wait_for(asyncio.gather(learner.stop(), learner.stop()), 30)
        await learner.stop()
        with pytest.raises(RuntimeError, match="not started"):
            await learner.submit(rollouts[3])


async def test_a_child_that_fails_says_its_last_error_line() -> None:
    async with open_session(CONFIG) as session:
        rollouts = await _rollouts(session, 1)
        learner = ProcessLearner(session.calls, Playbook.empty(), OnlineConfig(batch_size=8, max_wait_s=30.0))
        await learner.start()
        ticket = await learner.submit(rollouts[0])
        learner._child.process.stdin.write(b"\x00\x00\x00\x07garbage")  # type: ignore[union-attr]  # not a frame
        with pytest.raises(LearnerProcessError) as failed:
            await asyncio.wait_for(ticket, 30)
        await learner.stop()
    message = str(failed.value)
    assert message.startswith("the learner's process exited with code 1: ") and "\n" not in message
    assert "DecodeError" in message or "MsgspecError" in message or "ValidationError" in message


@pytest.mark.parametrize("kind", sorted(LEARNER_CLASSES))
async def test_stop_is_idempotent_and_safe_to_call_at_once(kind: str) -> None:
    async with open_session(CONFIG) as session:
        rollouts = await _rollouts(session, 2)
        learner = LEARNER_CLASSES[kind](session.calls, Playbook.empty(), OnlineConfig(batch_size=2, max_wait_s=0.2))
        await learner.start()
        tickets = [await learner.submit(r) for r in rollouts]
        await asyncio.wait_for(asyncio.gather(learner.stop(), learner.stop(), learner.stop()), 60)
        await learner.stop()
        assert all(t.done() and t.exception() is None for t in tickets)


@pytest.mark.parametrize("kind", sorted(LEARNER_CLASSES))
@pytest.mark.parametrize("version", [10 ** 30, 2 ** 63, -1])
async def test_a_version_stamped_at_submit_is_checked_as_the_rollout_is(kind: str, version: int) -> None:
    async with open_session(CONFIG) as session:
        good = await _rollouts(session, 2)
        learner = LEARNER_CLASSES[kind](session.calls, Playbook.empty(), OnlineConfig(batch_size=1, max_wait_s=2.0))
        async with learner:
            with pytest.raises(RolloutError, match=f"is malformed: .*{version}"):
                await learner.submit(good[0], version=version)
            applied = await (await learner.submit(good[1], version=0))  # the learner lives on
    assert applied.rollout_ids == (good[1].id,)
