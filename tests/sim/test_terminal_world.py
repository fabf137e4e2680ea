"""The terminal world plays the agent whatever role serves the learned context (ACE's generator,
GEPA's solver, TextGrad's forward pass, a plug-in learner's serving role), reads the context from
the ``<learned_context>`` block of a citable one (ACE's playbook) or the plain ``<instructions>``
block and finds a family's lessons in it by their text, and finishes with the agent's own finish
tool's arguments; GEPA's proposer and TextGrad's loss and gradient judge chores by the checks'
outcome and name the family's own lessons. Requests are built from the agent's and the learners'
own prompt templates."""

from __future__ import annotations

import msgspec
import orjson
import pytest

from combee_fast.gepa.calls import AGGREGATOR_ROLE, PROPOSER_ROLE, SOLVER_ROLE, proposer_messages
from combee_fast.ace.playbook import Playbook
from combee_fast.roles.base import fill
from combee_fast.rollouts.episode import CITED_ARGUMENT
from combee_fast.rollouts.react import (FINISH, FINISH_PLAIN, SYSTEM, SYSTEM_PLAIN, TASK, TOOLS_FORMAT,
                                     tool_definitions)
from combee_fast.schema import GradedAnswer, Message, Step, ToolCall, Trajectory, Usage
from combee_fast.ace.records import Delta, Op, OpKind
from combee_fast.sim.responders import SimReply, SimRequest
from combee_fast.learners import LEARNERS, role_table
from combee_fast.sim.terminal import GENERIC_TERMINAL_LESSONS, INSPECT, TERMINAL_LESSONS, TERMINAL_PARAMS
from combee_fast.sim.worlds import task_world
from combee_fast.tasks.registry import get_task
from combee_fast.tasks.terminal.environment import RUN_TOOL
from combee_fast.tasks.terminal.families import BY_KEY
from combee_fast.textgrad.calls import (GRADIENT_ROLE, LOSS_ROLE, Loss, gradient_agent_messages,
                                        loss_agent_messages)

NOTES = "tests.plugins.combee_notes.kind:NOTES"
TERMINAL = get_task("terminal")
WORLD = task_world(TERMINAL, role_table())
EXAMPLES = TERMINAL.load("train").examples
SERVING_ROLES = tuple(kind.rollout_role for kind in LEARNERS.values())
TOOLS = tool_definitions([RUN_TOOL])


def _family(example):
    return BY_KEY[example.meta["family"]]


def _playbook(lessons: list[str]) -> str:
    playbook = Playbook.empty()
    for lesson in lessons:
        playbook, _ = playbook.apply(Delta((Op(OpKind.ADD, section="strategies_and_hard_rules", content=lesson),)))
    return playbook.render()


def _turn(role: str, system: str, example, seed: int, issued: tuple[str, ...] = (), world=WORLD) -> SimReply:
    """The ``world``'s reply to an agent turn after ``issued`` commands, the conversation as the
    ReAct agent builds it (tool calls)."""
    messages = [Message("system", system),
                Message("user", fill(TASK, task=example.input, retry_block="", observation="You are in /work."))]
    for n, command in enumerate(issued):
        call = ToolCall("run", msgspec.json.encode({"command": command}).decode(), f"call_{n}")
        messages += [Message("assistant", "", (call,)), Message("tool", "exit status 0\n", tool_call_id=call.id)]
    reply = world.respond(SimRequest(role, "sim", tuple(messages), 1024, 0.0, seed, None, TOOLS))
    assert isinstance(reply, SimReply)
    return reply


def _action(reply: SimReply) -> tuple[str, dict]:
    call, = reply.tool_calls
    return call.name, orjson.loads(call.arguments)


def _contexts(lessons: list[str]) -> dict[str, str]:
    """The same lessons as each learner's context reaches the agent's system prompt."""
    plain = "You carry out chores in a shell.\n" + "\n".join(f"- {lesson}" for lesson in lessons)
    return {"learned_context": fill(SYSTEM, context=_playbook(lessons), format=TOOLS_FORMAT),
            "instructions": fill(SYSTEM_PLAIN, context=plain, format=TOOLS_FORMAT)}


def _first_command(role: str, system: str, example, seed: int) -> str:
    name, arguments = _action(_turn(role, system, example, seed, (INSPECT,)))
    assert name == "run"
    return arguments["command"]


def test_the_agent_is_played_alike_whatever_role_serves_it_and_however_its_context_holds_the_lessons() -> None:
    for seed, example in enumerate(EXAMPLES[:60]):
        family = _family(example)
        named = TERMINAL_LESSONS.about(family.name, 0)
        text_only = f"Remember: {family.lessons[1]}"  # the lesson's text, without the family's name
        chosen = set()
        for role in SERVING_ROLES:
            assert _action(_turn(role, _contexts([named])["instructions"], example, seed)) == (
                "run", {"command": INSPECT})
            for lessons in ([named], [text_only]):
                for system in _contexts(lessons).values():
                    chosen.add(_first_command(role, system, example, seed))
        assert len(chosen) == 1, (example.id, chosen)  # one draw per seed and chore: the same decision


def test_the_agent_plays_a_plug_in_learners_serving_role_as_it_plays_the_built_in_learners() -> None:
    """The notes learner's ``notes_answer`` (pool ``serve``), in the table with the built-in
    learners' roles: its agent turns are the world's agent's, no responder of the learner's."""
    world = task_world(TERMINAL, role_table([NOTES]))
    assert "notes_answer" in world.serving
    for seed, example in enumerate(EXAMPLES[:20]):
        system = _contexts([TERMINAL_LESSONS.about(_family(example).name, 0)])["instructions"]
        for issued in ((), (INSPECT,)):
            assert _turn("notes_answer", system, example, seed, issued, world) == _turn(
                SERVING_ROLES[0], system, example, seed, issued)


@pytest.mark.parametrize("form", ["learned_context", "instructions"])
def test_a_lesson_about_the_family_raises_the_agents_success_from_the_base_rate(form: str) -> None:
    def oracle_share(lessons_of) -> float:
        hits = 0
        for seed, example in enumerate(EXAMPLES):
            system = _contexts(lessons_of(example))[form]
            role = SERVING_ROLES[seed % len(SERVING_ROLES)]
            hits += _first_command(role, system, example, seed) == TERMINAL.chore(example).oracle[0]
        return hits / len(EXAMPLES)

    unrelated = "Tabs — lesson 1: nothing about this chore."
    known = oracle_share(lambda e: [TERMINAL_LESSONS.about(_family(e).name, 1)])
    base = oracle_share(lambda e: [unrelated])
    assert abs(known - TERMINAL_PARAMS.known_accuracy) < 0.07
    assert abs(base - TERMINAL_PARAMS.base_accuracy) < 0.08


def test_a_citable_contexts_finish_cites_the_familys_entries_and_a_plain_one_cites_nothing() -> None:
    """The finishing call names the agent's own finish arguments (``CITED_ARGUMENT``, the ids)."""
    example = EXAMPLES[0]
    family = _family(example)
    lessons = [TERMINAL_LESSONS.about(family.name, 0), TERMINAL_LESSONS.general(2)]
    path = TERMINAL.chore(example).oracle  # the commands issued say which path the episode is on: it ends
    replies = {form: _turn("generator", system, example, 0, (INSPECT, *path))
               for form, system in _contexts(lessons).items()}
    assert _action(replies["instructions"]) == (FINISH_PLAIN.name, {"answer": "done"})
    name, arguments = _action(replies["learned_context"])
    ids = [line.split("]")[0].lstrip("[") for line in _playbook(lessons).splitlines() if line.startswith("[")]
    assert name == FINISH.name and arguments[CITED_ARGUMENT] == ids  # the family's entry, then the generic one
    assert set(arguments) == set(FINISH.parameters["properties"])  # what the agent's finish tool takes


def _trajectory(example, reward: float) -> Trajectory:
    step = Step(0, "a look first", ToolCall("run", orjson.dumps({"command": INSPECT}).decode()), "exit status 0\n",
                1.0, 0.01, Usage(role=SOLVER_ROLE))
    return Trajectory(f"solve:{example.id}", example.id, 0, 0, "sha", 1, (step,), "done", reward,
                      "every check passed" if reward else "not done: out.txt does not exist", finished=True)


def _graded(example, reward: float) -> GradedAnswer:
    trajectory = _trajectory(example, reward)
    return GradedAnswer(example, "done", reward, trajectory.feedback, Usage(role=SOLVER_ROLE), None, trajectory)


def test_gepas_proposer_judges_chores_by_their_score_and_names_the_familys_own_lessons() -> None:
    current = "You carry out chores in a shell."
    for reward, naming in ((0.0, TERMINAL_PARAMS.name_unit_after_wrong), (1.0, TERMINAL_PARAMS.name_unit_after_right)):
        named = total = 0
        for seed, example in enumerate(EXAMPLES):
            messages = proposer_messages(current, [_graded(example, reward)], None, 8192)
            reply = orjson.loads(WORLD.respond(SimRequest(PROPOSER_ROLE, "sim", messages, 8192, 1.0, seed, None)))
            added, = reply["instruction"].removeprefix(current + "\n").splitlines()  # one example read: kept whole
            family = _family(example)
            own = {f"- {TERMINAL_LESSONS.about(family.name, k)}" for k in range(2)}
            generic = {f"- {TERMINAL_LESSONS.general(k)}" for k in range(len(GENERIC_TERMINAL_LESSONS))}
            assert added in own | generic
            named += added in own
            total += 1
        assert abs(named / total - naming) < 0.07


def test_textgrads_loss_follows_the_checks_and_its_gradient_names_the_familys_lessons() -> None:
    prompt = "You carry out chores in a shell."
    for seed, example in enumerate(EXAMPLES[:40]):
        family = _family(example)
        for reward, verdict in ((1.0, "correct"), (0.0, "incorrect")):
            forward = _graded(example, reward)
            text = f"Step 1: thought: a look first\n  action: run {INSPECT}\nFinal answer: done"
            request = SimRequest(LOSS_ROLE, "sim", loss_agent_messages(forward, text), 1024, 0.0, seed, None)
            loss = orjson.loads(WORLD.respond(request))
            assert loss["verdict"] == verdict
            judged = Loss(loss["verdict"], loss["critique"], Usage())
            request = SimRequest(GRADIENT_ROLE, "sim", gradient_agent_messages(prompt, forward, judged, text), 1024,
                                 0.0, seed, None)
            change = orjson.loads(WORLD.respond(request))["change"]
            own = [TERMINAL_LESSONS.about(family.name, k) for k in range(2)]
            assert change in own or change.startswith("General — lesson")


def test_the_learning_roles_that_read_only_lessons_are_the_default_worlds() -> None:
    for role in (AGGREGATOR_ROLE, "curator", "reducer"):
        assert WORLD.roles[role] is task_world(get_task("formula"), role_table()).roles[role]
