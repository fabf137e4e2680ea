"""One world answers through its table of responders by request role: every role each built-in
learner declares is in the learner registry's table, answered by the responder its kind declares;
a responder registered for a role answers it with the world's knowledge; a plug-in learner's
responders and serving roles are in the table too, and a run's own learner answers its roles first."""

from __future__ import annotations

import orjson

from combee_fast.kinds import Kind
from combee_fast.learners import LEARNERS, role_table, run_roles
from combee_fast.schema import Message
from combee_fast.sim.responders import RoleTable, SimRequest
from combee_fast.sim.world import FORMULA_PARAMS, TaskWorld
from combee_fast.sim.worlds import task_world
from combee_fast.tasks.registry import get_task
from tests.plugins.combee_notes.kind import NotesKind

TASK = get_task("formula")
EXAMPLES = TASK.load("train").examples


def _request(role: str, text: str = "", schema: dict | None = None) -> SimRequest:
    return SimRequest(role, "m", (Message("user", text),), 256, 0.0, 3, schema)


def test_every_role_every_built_in_learner_declares_is_answered_by_its_own_package() -> None:
    table = role_table()
    kinds = [LEARNERS.load(name) for name in LEARNERS.builtin]
    assert len(table.responders) == sum(len(kind.responders) for kind in kinds)  # no two answer one role
    for kind in kinds:
        assert set(kind.responders) == {role.key for role in kind.roles}, kind.name
        for role in kind.roles:
            responder = table.responders[role.key]
            assert responder is kind.responders[role.key]
            assert responder.__module__.startswith(("combee_fast.sim.", f"combee_fast.{kind.name}.sim")), responder
        assert {role.key for role in kind.roles if role.pool == "serve"} <= table.serving


def test_a_registered_responder_answers_its_role_with_the_worlds_knowledge() -> None:
    def units(world: TaskWorld, request: SimRequest) -> str:
        question = world.question(request.last_user_content)
        return ",".join(question.units) if question is not None else "unknown"

    world = TaskWorld(TASK, EXAMPLES, FORMULA_PARAMS, roles=RoleTable({"units": units}))
    assert world.respond(_request("units", EXAMPLES[4].input)) == EXAMPLES[4].meta["formula"]
    assert world.respond(_request("units", "not a question")) == "unknown"
    # a role the table lacks: what a constraining server answers the start-up probe
    lacking = orjson.loads(world.respond(_request("generator", schema={"type": "object", "properties": {
        "final_answer": {"type": "string"}}})))
    assert lacking == {"final_answer": "generator"}


NOTES = "tests.plugins.combee_notes.kind:NOTES"


def test_a_plugin_learners_roles_are_in_the_table_the_worlds_play() -> None:
    notes = LEARNERS.load(NOTES)
    table = role_table([NOTES])
    assert all(table.responders[role] is responder for role, responder in notes.responders.items())
    assert "notes_answer" in table.serving and role_table().responders.items() <= table.responders.items()
    world = task_world(TASK, table)
    assert {*notes.responders, *role_table().responders} == set(world.plays())


def test_a_runs_own_learner_answers_its_roles_before_any_other() -> None:
    seen: list[str] = []

    def mine(world: TaskWorld, request: SimRequest) -> str:
        seen.append(world.task.name)
        return "mine"

    class Mine(NotesKind):  # a plug-in answering a role named as a built-in learner's is
        responders = {**NotesKind.responders, "generator": mine, "my_role": mine}

    world = task_world(TASK, run_roles(Kind(Mine(), "mine")))
    assert world.respond(_request("my_role")) == world.respond(_request("generator")) == "mine"
    assert seen == ["formula", "formula"]
    plain = task_world(TASK, role_table())
    assert "final_answer" in orjson.loads(plain.respond(_request("generator", f"<question>\n{EXAMPLES[0].input}\n"
                                                                            "</question>")))
