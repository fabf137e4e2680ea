"""The instruction world: a lesson in the system prompt acts like a playbook entry; the GEPA
proposer and aggregator overload along the curator's calibration curve; ACE roles unchanged."""

from __future__ import annotations

import orjson

from combee_fast.gepa.calls import AGGREGATOR_ROLE, PROPOSER_ROLE, SOLVER_ROLE, examples_text
from combee_fast.gepa.calls import AGGREGATOR_USER_TEMPLATE, PROPOSER_USER_TEMPLATE, SOLVER_USER_TEMPLATE
from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.revisions import changes_text, compose
from combee_fast.ace.playbook import Playbook
from combee_fast.roles.base import fill
from combee_fast.ace.generator import generator_messages
from combee_fast.schema import GradedAnswer, Message, Usage
from combee_fast.ace.records import Delta, Op, OpKind
from combee_fast.gepa import sim as gepa_sim
from combee_fast.gepa.sim import with_lessons
from combee_fast.learners import role_table
from combee_fast.sim.instructed import capacity, instruction_lessons
from combee_fast.sim.server import SimRequest
from combee_fast.sim.world import FORMULA_PARAMS, PAPER_CURATOR_CURVE, TaskWorld, curator_output, specific_lesson
from combee_fast.tasks.registry import get_task

TASK = get_task("formula")
EXAMPLES = TASK.load("train").examples
WORLD = TaskWorld(TASK, EXAMPLES, FORMULA_PARAMS, roles=role_table())
ACE_WORLD = TaskWorld(TASK, EXAMPLES, FORMULA_PARAMS, roles=role_table())
SEED = Candidate.seed().render()


def _ask(role: str, messages: tuple[Message, ...], seed: int, world: TaskWorld = WORLD) -> dict:
    return orjson.loads(world.respond(SimRequest(role, "m", messages, 1024, 0.0, seed, None)))


def _solve(instruction: str, example_index: int, seed: int) -> str:
    user = fill(SOLVER_USER_TEMPLATE, question=EXAMPLES[example_index].input)
    return _ask(SOLVER_ROLE, (Message("system", instruction), Message("user", user)), seed)["final_answer"]


def test_the_world_answers_every_gepa_role_the_engine_calls() -> None:
    assert tuple(gepa_sim.RESPONDERS) == (SOLVER_ROLE, PROPOSER_ROLE, AGGREGATOR_ROLE)


def test_capacity_is_the_curator_curve_relative_to_one_input() -> None:
    assert capacity(1, PAPER_CURATOR_CURVE) == 1.0
    assert capacity(0, PAPER_CURATOR_CURVE) == 0.0
    for m in (5, 10, 20, 50, 100):
        assert abs(capacity(m, PAPER_CURATOR_CURVE) - curator_output(m, PAPER_CURATOR_CURVE) / (264 / 500)) < 1e-12
    per_input = [capacity(m, PAPER_CURATOR_CURVE) / m for m in (1, 5, 10, 20, 50, 100)]
    assert per_input == sorted(per_input, reverse=True)  # overload: each input is ever less likely kept


def test_a_lesson_in_the_system_prompt_acts_like_a_playbook_entry_about_its_unit() -> None:
    for index in range(60):
        example = EXAMPLES[index]
        lesson = specific_lesson(example.meta["formula"], 0)
        playbook, _ = Playbook.empty().apply(Delta((Op(OpKind.ADD, section="formulas_and_calculations", content=lesson),)))
        ace = _ask("generator", generator_messages(example.input, playbook.render()), index, ACE_WORLD)["final_answer"]
        assert _solve(with_lessons(SEED, [lesson]), index, index) == ace
        bare = _ask("generator", generator_messages(example.input, ""), index, ACE_WORLD)["final_answer"]
        assert _solve(SEED, index, index) == bare


def test_lessons_raise_solver_accuracy_from_the_base_rate() -> None:
    units = sorted({e.meta["formula"] for e in EXAMPLES})
    taught = with_lessons(SEED, [specific_lesson(u, 0) for u in units])

    def accuracy(instruction: str) -> float:
        return sum(TASK.score(EXAMPLES[i], _solve(instruction, i, i)).value for i in range(200)) / 200

    base = accuracy(SEED)
    assert abs(base - FORMULA_PARAMS.base_accuracy) < 0.08
    assert accuracy(taught) > base + 0.15


def _graded(indices: range) -> list[GradedAnswer]:
    return [GradedAnswer(EXAMPLES[i], "0.00", 0.0, "wrong", Usage()) for i in indices]


def _propose(indices: range, seed: int, current: str = SEED) -> list[str]:
    user = fill(PROPOSER_USER_TEMPLATE, instruction=current, examples=examples_text(_graded(indices)))
    reply = _ask(PROPOSER_ROLE, (Message("system", "p"), Message("user", user)), seed)
    return instruction_lessons(reply["instruction"])


def test_the_proposer_keeps_the_instruction_and_overloads_like_the_curator() -> None:
    few = [len(_propose(range(start, start + 3), seed)) for seed, start in enumerate(range(0, 300, 3))]
    many = [len(_propose(range(start, start + 40), seed)) for seed, start in enumerate(range(0, 400, 40))]
    assert sum(few) / (3 * len(few)) > 2 * sum(many) / (40 * len(many))
    assert max(many) <= int(capacity(40, PAPER_CURATOR_CURVE)) + 1
    held = specific_lesson("Current Ratio", 3)
    kept = _propose(range(0, 3), 1, with_lessons(SEED, [held]))
    assert kept[0] == held


def _aggregate(revisions: list[str], seed: int) -> list[str]:
    user = fill(AGGREGATOR_USER_TEMPLATE, instruction=SEED, proposals=changes_text(SEED, revisions))
    reply = _ask(AGGREGATOR_ROLE, (Message("system", "a"), Message("user", user)), seed)
    assert reply["remove"] == [] and reply["add"] == []
    return instruction_lessons(compose(SEED, revisions, reply["remove"], reply["keep"], reply["add"]))


def test_the_aggregator_keeps_specific_lessons_by_reference_and_overloads_with_the_revisions_it_reads() -> None:
    units = sorted({e.meta["formula"] for e in EXAMPLES})
    general = "General — lesson 1: Restate which quantity the question asks for before computing anything."
    revisions = [with_lessons(SEED, [specific_lesson(u, 0), general]) for u in units[:30]]
    merged = _aggregate(revisions, 3)
    fresh = 31
    assert len(merged) <= int(fresh * capacity(30, PAPER_CURATOR_CURVE) / 30) + 1 < fresh
    assert merged and all(not lesson.startswith("General") for lesson in merged)
    few = sum(len(_aggregate(revisions[i : i + 2], i)) for i in range(0, 30, 2)) / (15 * 3)  # 3 fresh each
    many = sum(len(_aggregate(revisions, seed)) for seed in range(10)) / (10 * fresh)
    assert few > 2 * many  # fewer revisions read: a larger share of their lessons kept
    one = with_lessons(SEED, [specific_lesson(units[0], 2)])
    assert _aggregate([one], 5) == [specific_lesson(units[0], 2)]  # one revision read: kept whole


def test_ace_roles_are_answered_exactly_as_by_the_task_world() -> None:
    messages = generator_messages(EXAMPLES[5].input, "")
    assert WORLD.respond(SimRequest("generator", "m", messages, 1024, 0.0, 9, None)) == ACE_WORLD.respond(
        SimRequest("generator", "m", messages, 1024, 0.0, 9, None)
    )
