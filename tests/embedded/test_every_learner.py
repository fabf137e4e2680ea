"""Every learner embedded: GEPA's and TextGrad's online learners in the loop, in a thread and in a
child process, against the session's simulated endpoint on loopback (real HTTP). The same
submissions give the same release decisions in all three; a candidate that loses is rolled back,
one that wins is promoted, one held is approved by hand; version numbers are never reused
(a version learned on the incumbent after a rollback is renumbered). The session's calls must
serve the online learner's roles; shadow re-runs go through the online learner's own attempt."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from combee_fast.config import OnlineConfig, ReleaseConfig, SessionConfig, SimConfig, TaskConfig
from combee_fast.embedded.events import ReleaseDecision, ReleaseStatus
from combee_fast.embedded.online import OnlineLearner, online_learning
from combee_fast.embedded.process import ProcessLearner
from combee_fast.embedded.threaded import ThreadedLearner
from combee_fast.errors import ConfigError, ReleaseError
from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.online import OnlineCandidate
from combee_fast.learners import role_table
from combee_fast.run.events import Event, Events
from combee_fast.schema import Rollout, Usage
from combee_fast.session import Session, open_session
from combee_fast.sim.responders import SimRequest
from combee_fast.sim.world import TaskWorld
from combee_fast.textgrad.variable import PromptVariable

BATCH = 48
LEARNER_CLASSES = {"in-loop": OnlineLearner, "threaded": ThreadedLearner, "process": ProcessLearner}
STARTS = {"gepa": OnlineCandidate.seed, "textgrad": PromptVariable.seed}


def _config(learner: str, **changes: object) -> SessionConfig:
    config = SessionConfig(learner=learner, task=TaskConfig(train_split="train", val_split="val[0:10]"),
                           sim=SimConfig("flat", 1e-4))
    return msgspec.structs.replace(config, **changes)


async def _rollouts(session: Session, learner: str, n: int) -> list[Rollout]:
    """``n`` rollouts made by the online learner's own attempt under its start, 24 distinct ones."""
    attempts = online_learning(learner, session.calls).attempts
    start = STARTS[learner]().render()
    made = [await attempts.attempt(e, start, version=0, epoch=0) for e in session.train_split.examples[:24]]
    return [msgspec.structs.replace(made[i % 24], round=i) for i in range(n)]


async def _candidate(learner, version: int) -> None:
    """Wait until the host sees candidate ``version`` (the learner works meanwhile)."""
    for _ in range(3_000):
        candidate = learner.release.candidate
        if candidate is not None and candidate.version == version:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"candidate {version} never came; release is {learner.release}")


async def _drive(learner, rollouts: list[Rollout]) -> None:
    """Four batches: the first learns v1, which then loses every reward against the incumbent
    (rolled back); the second learns v2 on the incumbent, which wins every reward (promoted); the
    third learns v3 on v2, approved by hand; the fourth goes in while v3 serves."""
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


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STARTS))
async def test_gepa_and_textgrad_release_the_same_way_in_the_loop_a_thread_and_a_process(name: str) -> None:
    online = OnlineConfig(learner=name, batch_size=BATCH, max_wait_s=30.0,  # batches close full: no timing
                          release=ReleaseConfig(policy="staged", stages=(0.5, 1.0), margin=0.1))
    decided: dict[str, list[ReleaseDecision]] = {}
    async with open_session(_config(name)) as session:
        rollouts = await _rollouts(session, name, 4 * BATCH)
        start = STARTS[name]()
        for kind, make in LEARNER_CLASSES.items():
            seen: list[Event] = []
            learner = make(session.calls, start, online, events=Events(seen.append))
            await _drive(learner, rollouts)
            decided[kind] = [e for e in seen if isinstance(e, ReleaseDecision)]
            artifact = learner.artifact
            assert type(artifact) is type(start) and artifact.version == 3
            assert learner.text == artifact.render() != start.render()
            assert learner.release.incumbent.version == 3
            assert learner.release.candidate.version == 4 and learner.release.share == 0.5
            assert {learner.context_for(f"user-{k}").version for k in range(100)} == {3, 4}
    inloop = decided["in-loop"]
    assert [(d.decision, d.candidate, d.incumbent) for d in inloop] == [
        ("candidate", 1, 0), ("rollback", 1, 0), ("candidate", 2, 0), ("promote", 2, 0), ("candidate", 3, 2),
        ("approve", 3, 2), ("candidate", 4, 3)]
    assert inloop[1].evidence["upper"] < 0 and inloop[3].evidence["lower"] > -0.1
    assert decided["threaded"] == inloop and decided["process"] == inloop  # evidence and all, float for float


@pytest.mark.parametrize("kind", sorted(LEARNER_CLASSES))
async def test_calls_of_a_session_opened_for_another_learner_are_refused_in_one_line(kind: str) -> None:
    async with open_session(_config("ace")) as session:
        with pytest.raises(ConfigError) as refused:
            LEARNER_CLASSES[kind](session.calls, OnlineCandidate.seed(), OnlineConfig(learner="gepa"))
    message = str(refused.value)
    assert "\n" not in message and message.startswith("online.learner 'gepa' calls roles gepa_solver, gepa_proposer")
    assert "SessionConfig(learner='gepa')" in message


async def test_a_learner_that_cannot_learn_online_or_an_unknown_one_is_refused() -> None:
    async with open_session(_config("gepa")) as session:
        with pytest.raises(ConfigError, match="unknown learner 'nope'"):
            OnlineLearner(session.calls, OnlineCandidate.seed(), OnlineConfig(learner="nope"))


class _Recording:
    """The task world's answers; records the role of every request."""

    def __init__(self, world: TaskWorld) -> None:
        self.world = world
        self.roles: list[str] = []

    def respond(self, request: SimRequest) -> str:
        self.roles.append(request.role)
        return self.world.respond(request)


@pytest.mark.slow
async def test_gepa_shadow_re_runs_are_its_own_solves_and_decide_a_release(start_sim_server) -> None:
    """Under ``shadow`` the candidate serves nothing; the re-runs are GEPA solver calls (no ACE
    generator call anywhere), counted apart, and their paired rewards promote the candidate."""
    from combee_fast.config import EndpointSpec
    from combee_fast.gepa.online import GepaOnline
    from combee_fast.tasks.registry import get_task

    recording = _Recording(TaskWorld.for_task(get_task("formula"), variant="noisy", roles=role_table()))
    server = await start_sim_server(recording, time_scale=1e-5)
    config = _config("gepa", endpoints={"default": EndpointSpec(url=server.url, model="sim")},
                     sim=SimConfig("flat", 1e-5, world="noisy"))
    online = OnlineConfig(learner="gepa", batch_size=64, max_wait_s=0.05,
                          release=ReleaseConfig(policy="shadow", shadow_share=0.5, margin=0.05, status_every=50))
    async with open_session(config) as session:
        traffic = session.train_split.examples[:40]
        attempts = GepaOnline(session.calls).attempts
        seen: list[Event] = []
        async with OnlineLearner(session.calls, OnlineCandidate.seed(), online, events=Events(seen.append)) as learner:
            for i in range(3_000):
                context = learner.context_for(f"user-{i}")
                assert context.version == learner.release.incumbent.version  # a shadow candidate serves nothing
                rollout = await attempts.attempt(traffic[i % len(traffic)], context.text, version=context.version,
                                                 epoch=0, round_=i)
                await learner.submit(rollout, version=context.version)
                if any(isinstance(e, ReleaseDecision) and e.decision == "promote" for e in seen):
                    break
        promoted = next(e for e in seen if isinstance(e, ReleaseDecision) and e.decision == "promote")
        assert promoted.evidence["method"] == "paired" and promoted.evidence["lower"] > -0.05
        status = [e for e in seen if isinstance(e, ReleaseStatus)][-1]
        assert status.shadow_calls >= promoted.evidence["pairs"] > 0 and status.shadow_tokens > 0
    assert "generator" not in recording.roles and "reflector" not in recording.roles
    solves = recording.roles.count("gepa_solver")
    assert solves >= i + 1 + promoted.evidence["pairs"]  # the host's requests and the shadow re-runs
    assert recording.roles.count("gepa_proposer") > 0


def test_online_artifacts_renumber_up_only_and_travel_as_bytes() -> None:
    from combee_fast.gepa.calls import ROLES as GEPA_ROLES
    from combee_fast.gepa.online import GepaOnline
    from combee_fast.roles.calls import RoleCalls
    from combee_fast.roles.clients import RoleClients

    gepa, textgrad, _ = _offline_learners()
    for start, learning in ((OnlineCandidate(Candidate({"system_prompt": "Answer.\n- a rule"}), 2), gepa),
                            (PromptVariable({"system_prompt": "Answer.\n- a rule"}, 2), textgrad)):
        renumbered = start.renumbered(7)
        assert renumbered.version == 7 and renumbered.render() == start.render() and start.version == 2
        assert start.renumbered(2) is start
        with pytest.raises(ValueError, match="renumbered down"):
            start.renumbered(1)
        assert learning.decode_artifact(learning.encode_artifact(renumbered)) == renumbered
        with pytest.raises(ValueError):
            learning.decode_artifact(b"not an artifact")
        assert len(start) == 2
    with pytest.raises(ConfigError, match="need a task"):
        GepaOnline(RoleCalls(None, RoleClients({}), GEPA_ROLES, seed=0))


def _offline_learners():
    from combee_fast.gepa.calls import ROLES as GEPA_ROLES
    from combee_fast.gepa.online import GepaOnline
    from combee_fast.roles.calls import RoleCalls
    from combee_fast.roles.clients import RoleClients
    from combee_fast.tasks.registry import get_task
    from combee_fast.textgrad.calls import ROLES as TEXTGRAD_ROLES
    from combee_fast.textgrad.online import TextGradOnline

    task = get_task("formula")  # no client: whatever these learners do here makes no call
    return (GepaOnline(RoleCalls(task, RoleClients({}), GEPA_ROLES, seed=0)),
            TextGradOnline(RoleCalls(task, RoleClients({}), TEXTGRAD_ROLES, seed=0)), task)


async def test_gepa_merges_every_rewrite_left_and_neither_learns_from_an_unscored_rollout() -> None:
    from combee_fast.gepa.learner import ComponentText

    gepa, textgrad, task = _offline_learners()
    start = OnlineCandidate(Candidate({"system_prompt": "Answer.\n- rule a"}), 4)
    edits = [ComponentText("system_prompt", "Answer.\n- rule a\n- rule b"),
             ComponentText("system_prompt", "Answer.\n- rule c")]  # drops rule a, adds rule c
    applied = await gepa.apply(start, [], edits, "test")
    assert applied.artifact.version == 5 and applied.artifact.render() == "Answer.\n- rule b\n- rule c"
    assert applied.report.added_ids == ("- rule b", "- rule c") and applied.report.evicted == ("- rule a",)
    assert applied.artifact.candidate.parents == (4,)
    same = await gepa.apply(start, [], [ComponentText("system_prompt", "Answer.\n- rule a")], "test")
    assert same.artifact is start and same.kept == ()

    example = task.load("train").examples[0]
    scored = Rollout(example, 3, (), "1.0", "", (), 1.0, "right", Usage(role="gepa_solver"))
    unscored = msgspec.structs.replace(scored, score=None)
    assert gepa.record(await gepa.run_item(scored, start, "Answer.", epoch=0, rounds=0)).score == 1.0
    assert gepa.record(await gepa.run_item(unscored, start, "Answer.", epoch=0, rounds=0)) is None
    variable = PromptVariable.seed()
    trace = await textgrad.run_item(unscored, variable, variable.render(), epoch=0, rounds=0)
    assert textgrad.record(trace) is None and trace.call_outcomes() == [] and trace.item_id == unscored.id


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STARTS))
async def test_a_harmful_instruction_is_rolled_back_and_the_incumbent_serves_again(name: str) -> None:
    """In the harmful world, an instruction handed in from outside states a wrong lesson about
    every formula of the traffic: the solver (GEPA) or forward call (TextGrad) reading it is
    mostly wrong, the staged release rolls it back, and every request runs with the incumbent."""
    from combee_fast.sim.world import harmful_lesson, specific_lesson

    config = _config(name, sim=SimConfig("flat", 1e-5, world="noisy+harmful"))
    online = OnlineConfig(learner=name, batch_size=1024, max_wait_s=0.05,
                          release=ReleaseConfig(policy="staged", stages=(0.2, 0.5, 1.0), margin=0.05))
    async with open_session(config) as session:
        traffic = session.train_split.examples[:60]
        units = sorted({e.meta["formula"] for e in traffic})
        good = "\n".join(["Answer the question.", *(f"- {specific_lesson(unit, 0)}" for unit in units)])
        bad = "\n".join([good, *(f"- {harmful_lesson(unit, 0, 40)}" for unit in units)])
        if name == "gepa":
            incumbent, harmful = OnlineCandidate(Candidate({"system_prompt": good})), \
                OnlineCandidate(Candidate({"system_prompt": bad}))
        else:
            incumbent, harmful = PromptVariable({"system_prompt": good}), PromptVariable({"system_prompt": bad})
        attempts = online_learning(name, session.calls).attempts
        seen: list[Event] = []
        async with OnlineLearner(session.calls, incumbent, online, events=Events(seen.append)) as learner:
            number = await learner.propose(harmful)
            assert learner.release.candidate.version == number == 1
            served: list[int] = []
            for i in range(3_000):
                context = learner.context_for(f"user-{i % 400}")
                served.append(context.version)
                rollout = await attempts.attempt(traffic[i % len(traffic)], context.text, version=context.version,
                                                 epoch=0, round_=i)
                await learner.submit(rollout, version=context.version)
                if learner.release.candidate is None or learner.release.candidate.version != number:
                    break
            decision = [e for e in seen if isinstance(e, ReleaseDecision) and e.candidate == number][-1]
            assert decision.decision == "rollback" and decision.evidence["upper"] < 0
            assert learner.release.incumbent.version == 0 and learner.artifact == incumbent
            assert all(learner.context_for(f"user-{k}").version != number for k in range(400))
            assert 0 < served.count(number) < 0.5 * len(served)
