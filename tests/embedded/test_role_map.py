"""The embedded learners rebuild the session's role clients from its role map: against two real
loopback replicas of one model both get calls, and each role's sampling travels with them."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from combee_fast.ace.calls import AceCalls
from combee_fast.config import EndpointSpec, OnlineConfig, SamplingConfig, SessionConfig, SimConfig, TaskConfig
from combee_fast.embedded.process import ProcessLearner
from combee_fast.embedded.threaded import ThreadedLearner
from combee_fast.learners import role_table
from combee_fast.ace.playbook import Playbook
from combee_fast.sim.world import TaskWorld
from combee_fast.sim.responders import SimRequest
from combee_fast.session import open_session
from combee_fast.tasks.registry import get_task


class _Recording:
    """The task world's answers; records the role and temperature of every request."""

    def __init__(self, world: TaskWorld) -> None:
        self.world = world
        self.seen: list[tuple[str, float]] = []

    def respond(self, request: SimRequest) -> str:
        self.seen.append((request.role, request.temperature))
        return self.world.respond(request)


@pytest.mark.parametrize("learner_type", [ThreadedLearner, ProcessLearner])
async def test_an_embedded_learner_calls_every_replica_with_each_roles_sampling(start_sim_server, learner_type) -> None:
    world = TaskWorld.for_task(get_task("formula"), roles=role_table())
    replicas = [_Recording(world), _Recording(world)]
    servers = [await start_sim_server(r, time_scale=1e-4) for r in replicas]
    config = SessionConfig(
        task=TaskConfig(train_split="train[0:24]", val_split="val[0:5]"), sim=SimConfig("flat", 1e-4),
        endpoints={"default": EndpointSpec(url=servers[0].url, model="sim", replicas=[servers[1].url])},
        sampling={"reflector": SamplingConfig(temperature=0.3)},
    )
    async with open_session(config) as session:
        answers = [await AceCalls(session.calls).generate(e, "", epoch=0) for e in session.train_split.examples]
        rollouts = [msgspec.structs.replace(answers[i % 24], round=i // 24) for i in range(48)]
        for replica in replicas:
            replica.seen.clear()
        async with learner_type(session.calls, Playbook.empty(), OnlineConfig(batch_size=16, max_wait_s=30.0)) as learner:
            tickets = [await learner.submit(r) for r in rollouts]
            await asyncio.gather(*tickets)
    assert learner.artifact.version > 0
    for replica in replicas:
        reflections = [temperature for role, temperature in replica.seen if role == "reflector"]
        assert reflections, "every replica answers some of the learner's calls"
        assert set(reflections) == {0.3}  # the reflector's own sampling, not the default 0
        assert {t for role, t in replica.seen if role in ("curator", "reducer")} <= {0.0}
    assert sum(role == "reflector" for r in replicas for role, _ in r.seen) == 48
