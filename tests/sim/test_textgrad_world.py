"""The TextGrad world: a gradient naming a unit's lesson makes the updated prompt hold it; the
optimizer step overloads along the curator's calibration curve; the reduce keeps lessons by
reference; every ACE and GEPA role is answered exactly as before."""

from __future__ import annotations

import orjson

from combee_fast.schema import GradedAnswer, Message, Usage
from combee_fast.learners import role_table
from combee_fast.sim.instructed import capacity
from combee_fast.sim.server import SimRequest
from combee_fast.sim.world import (FORMULA_PARAMS, GENERIC_LESSONS, TaskWorld, generic_lesson, lesson_unit,
                                   specific_lesson, world_params)
from combee_fast.tasks.registry import get_task
from combee_fast.textgrad import calls
from combee_fast.textgrad import sim as textgrad_sim
from combee_fast.textgrad.calls import Gradient, Loss
from combee_fast.textgrad.variable import SYSTEM_PROMPT, LineEdit, PromptVariable

TASK = get_task("formula")
EXAMPLES = TASK.load("train").examples
WORLD = TaskWorld(TASK, EXAMPLES, FORMULA_PARAMS, roles=role_table())
SEED = PromptVariable.seed()


def _ask(role: str, messages: tuple[Message, ...], seed: int, world: TaskWorld = WORLD) -> dict:
    return orjson.loads(world.respond(SimRequest(role, "m", messages, 1024, 0.0, seed, None)))


def _forward(index: int, prompt: str, seed: int) -> GradedAnswer:
    example = EXAMPLES[index]
    reply = _ask(calls.FORWARD_ROLE, calls.forward_messages(example.input, prompt), seed)
    score = TASK.score(example, reply["final_answer"])
    return GradedAnswer(example, reply["final_answer"], score.value, score.feedback, Usage())


def _gradient(change: str, verdict: str = "incorrect") -> Gradient:
    return Gradient("x", verdict, "d", change, Usage())


def _unit(index: int) -> str:
    return EXAMPLES[index].meta["formula"]


def test_the_world_and_the_learner_name_the_textgrad_roles_alike() -> None:
    assert tuple(textgrad_sim.RESPONDERS) == tuple(role.key for role in calls.ROLES)


def test_ace_and_gepa_roles_are_answered_exactly_as_by_the_instruction_world() -> None:
    before = TaskWorld(TASK, EXAMPLES, FORMULA_PARAMS, roles=role_table())
    question = EXAMPLES[3].input
    for role, content in (("generator", f"<playbook>\n(empty)\n</playbook>\n<question>\n{question}\n</question>"),
                          ("gepa_solver", f"<question>\n{question}\n</question>"),
                          ("curator", "<playbook>\n</playbook>\n<reflections>\n</reflections>")):
        messages = (Message("system", "s"), Message("user", content))
        for seed in range(5):
            assert _ask(role, messages, seed) == _ask(role, messages, seed, before)


def test_the_loss_grades_the_answer_as_the_task_does_and_names_the_unit() -> None:
    seen = set()
    for seed in range(40):
        forward = _forward(0, SEED.render(), seed)
        reply = _ask(calls.LOSS_ROLE, calls.loss_messages(forward), seed)
        assert reply["verdict"] == ("correct" if forward.score >= 1 else "incorrect")
        if reply["verdict"] == "incorrect":
            assert _unit(0) in reply["critique"]
        seen.add(reply["verdict"])
    assert seen == {"correct", "incorrect"}


def test_a_gradient_names_the_units_lesson_and_one_step_makes_the_prompt_hold_it() -> None:
    named = 0
    for seed in range(60):
        forward = _forward(5, SEED.render(), seed)
        loss = Loss("correct" if forward.score >= 1 else "incorrect", "c", Usage())
        change = _ask(calls.GRADIENT_ROLE, calls.gradient_messages(SEED.render(), forward, loss), seed)["change"]
        named += lesson_unit(change) == _unit(5)
        step = _ask(calls.STEP_ROLE, calls.step_messages(SEED, [_gradient(change, loss.verdict)]), seed)
        assert step["add"] == [{"part": SYSTEM_PROMPT, "line": change}] and step["remove"] == []  # one read: kept whole
    assert named >= 45  # the reflector's probabilities: 0.95 after a wrong answer, 0.85 after a right one
    lesson = specific_lesson(_unit(5), 3)
    held, _, _ = SEED.edited([LineEdit(SYSTEM_PROMPT, lesson)], "t")
    right = [_forward(5, prompt, seed).score >= 1 for seed in range(300) for prompt in (SEED.render(), held.render())]
    before, after = sum(right[0::2]) / 300, sum(right[1::2]) / 300
    assert after > before + 0.12  # 0.88 with the lesson, 0.64 without it


def test_a_lesson_the_prompt_already_holds_is_not_added_again() -> None:
    lesson = specific_lesson(_unit(1), 0)
    held, _, _ = SEED.edited([LineEdit(SYSTEM_PROMPT, lesson)], "t")
    assert _ask(calls.STEP_ROLE, calls.step_messages(held, [_gradient(lesson)]), 1)["add"] == []


def test_the_step_overloads_along_the_curators_curve_generic_lessons_first() -> None:
    units = sorted({e.meta["formula"] for e in EXAMPLES})
    for m in (1, 5, 13, 40):
        gradients = [_gradient(specific_lesson(units[i], i)) for i in range(m - 1)] + [_gradient(generic_lesson(0))]
        added = _ask(calls.STEP_ROLE, calls.step_messages(SEED, gradients), 7)["add"]
        expected = capacity(m, FORMULA_PARAMS.curator_curve)
        assert int(expected) <= len(added) <= int(expected) + 1 <= m + 1
        assert added[0]["line"] == generic_lesson(0)  # the generic lesson survives first
    assert capacity(40, FORMULA_PARAMS.curator_curve) < 10  # of 40 read, fewer than 10 kept


def test_the_reduce_keeps_distinct_fresh_lessons_by_reference_specific_first() -> None:
    units = sorted({e.meta["formula"] for e in EXAMPLES})
    held_lesson = specific_lesson(units[0], 0)
    base, _, _ = SEED.edited([LineEdit(SYSTEM_PROMPT, held_lesson)], "t")
    proposals = [
        [LineEdit(SYSTEM_PROMPT, generic_lesson(1)), LineEdit(SYSTEM_PROMPT, specific_lesson(units[1], 2))],
        [LineEdit(SYSTEM_PROMPT, specific_lesson(units[1], 2)), LineEdit(SYSTEM_PROMPT, held_lesson)],
        [LineEdit(SYSTEM_PROMPT, specific_lesson(units[2], 4))],
    ]
    reply = _ask(calls.REDUCE_ROLE, calls.reduce_messages(base.render(), proposals), 3)
    assert reply["keep"] == ["1.2", "3.1", "1.1"] and reply["add"] == []  # the duplicate and the held lesson dropped
    many = [[LineEdit(SYSTEM_PROMPT, specific_lesson(units[i % len(units)], i))] for i in range(40)]
    kept = _ask(calls.REDUCE_ROLE, calls.reduce_messages(SEED.render(), many), 3)["keep"]
    assert len(kept) == int(FORMULA_PARAMS.reducer_capacity)


def test_in_the_uninformative_world_a_gradient_carries_no_lesson() -> None:
    world = TaskWorld(TASK, EXAMPLES, world_params(FORMULA_PARAMS, "uninformative"), roles=role_table())
    for seed in range(20):
        forward = _forward(2, SEED.render(), seed)
        loss = Loss("incorrect", "c", Usage())
        change = _ask(calls.GRADIENT_ROLE, calls.gradient_messages(SEED.render(), forward, loss), seed, world)["change"]
        assert lesson_unit(change) == "Note" and change not in {generic_lesson(i) for i in range(len(GENERIC_LESSONS))}
