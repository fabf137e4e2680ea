"""The worlds behind one standalone server: each request answered by the world that knows its question."""

from __future__ import annotations

import orjson

from combee_fast.gepa.calls import PROPOSER_ROLE, SOLVER_ROLE
from combee_fast.ace.generator import generator_messages
from combee_fast.learners import role_table
from combee_fast.schema import Message
from combee_fast.sim.server import SimRequest
from combee_fast.sim.worlds import BUNDLED_TASKS, asked_question, bundled_worlds, task_world
from combee_fast.tasks.registry import get_task

WORLDS = bundled_worlds(role_table())


def _request(role: str, messages: tuple[Message, ...]) -> SimRequest:
    return SimRequest(role=role, model="sim", messages=messages, max_tokens=1024, temperature=0.0, seed=7,
                      json_schema=None)


def test_every_bundled_task_is_played_and_each_question_goes_to_its_own_world() -> None:
    assert WORLDS.tasks == BUNDLED_TASKS
    for name in BUNDLED_TASKS:
        example = get_task(name).load("test").examples[0]
        request = _request("generator", generator_messages(example.input, ""))
        assert asked_question(request) == example.input.strip()
        assert WORLDS.world_for(request).task.name == name
        alone = task_world(get_task(name), role_table())  # what --world NAME (and the in-process endpoint) plays
        assert WORLDS.respond(request) == alone.respond(request)
        assert orjson.loads(WORLDS.respond(request))["final_answer"]


def test_gepa_prompts_are_routed_by_their_question_and_lesson_prompts_go_to_the_first_world() -> None:
    example = get_task("finer").load("train").examples[3]
    solve = _request(SOLVER_ROLE, (Message("system", "Answer."),
                                   Message("user", f"<question>\n{example.input}\n</question>")))
    assert WORLDS.world_for(solve).task.name == "finer"
    rows = orjson.dumps({"question": example.input, "answer": "x", "score": 0.0, "feedback": ""}).decode()
    propose = _request(PROPOSER_ROLE, (Message("user", f"<examples>\n{rows}\n</examples>"),))
    assert WORLDS.world_for(propose).task.name == "finer"
    curate = _request("curator", (Message("user", "<reflections>\n{}\n</reflections>"),))
    assert asked_question(curate) is None and WORLDS.world_for(curate) is WORLDS.worlds[0]
