"""The task world plays each role from the prompt alone, deterministically."""

from __future__ import annotations

import pytest

import orjson

from combee_fast.sim.server import SimRequest
from combee_fast.playbook import Playbook
from combee_fast.roles.curator import curator_messages
from combee_fast.roles.generator import generator_messages
from combee_fast.schema import Delta, Op, OpKind, Reflection, Usage
from combee_fast.tasks.registry import get_task
from combee_fast.sim.world import FORMULA_PARAMS, TaskWorld, generic_lesson, specific_lesson

TASK = get_task("formula")
EXAMPLES = TASK.load("train").examples
WORLD = TaskWorld(TASK, EXAMPLES, FORMULA_PARAMS)


def _ask(role: str, messages, seed: int) -> dict:
    return orjson.loads(WORLD.respond(SimRequest(role, "m", messages, 1024, 0.0, seed, None)))


def _accuracy(playbook_text: str) -> float:
    right = 0
    for seed, example in enumerate(EXAMPLES[:200]):
        answer = _ask("generator", generator_messages(example.input, playbook_text), seed)["final_answer"]
        right += TASK.score(example, answer).value
    return right / 200


def test_the_generator_is_deterministic_per_request_seed() -> None:
    messages = generator_messages(EXAMPLES[0].input, "")
    assert _ask("generator", messages, 5) == _ask("generator", messages, 5)


def test_a_bullet_about_the_unit_raises_accuracy_from_the_base_rate() -> None:
    base = _accuracy("")
    assert abs(base - FORMULA_PARAMS.base_accuracy) < 0.08
    units = sorted({e.meta["formula"] for e in EXAMPLES})
    delta = Delta(tuple(Op(OpKind.ADD, section="formulas_and_calculations", content=specific_lesson(u, 0)) for u in units))
    learned, _ = Playbook.empty().apply(delta)
    assert _accuracy(learned.render()) > base + 0.15


def test_the_curator_keeps_generic_lessons_first_and_saturates() -> None:
    def reflection(lesson: str, i: int) -> Reflection:
        return Reflection(f"r{i}", "", "", "", "", lesson, (), Usage())

    lessons = [specific_lesson(f"Unit {i}", 0) for i in range(40)] + [generic_lesson(0)]
    many = [reflection(text, i) for i, text in enumerate(lessons)]
    ops = _ask("curator", curator_messages("", "", many), 1)["operations"]
    assert len(ops) <= max(ops for _, ops in FORMULA_PARAMS.curator_curve) + 1
    assert ops[0]["content"] == generic_lesson(0)
    one = _ask("curator", curator_messages("", "", many[:1]), 1)["operations"]
    assert len(one) <= 1


@pytest.mark.slow
async def test_naive_batching_learns_the_paper_fig2_entry_counts_within_25_percent() -> None:
    from combee_fast.config import SessionConfig, SimConfig, TaskConfig
    from combee_fast.run.batch_plans import FixedBatch
    from combee_fast.session import open_session
    from combee_fast.sim.world import PAPER_CURATOR_CURVE

    config = SessionConfig(task=TaskConfig(val_split="val[0:1]"), sim=SimConfig("flat", 1e-4))
    async with open_session(config) as session:
        for batch, per_call in PAPER_CURATOR_CURVE:
            paper_entries = round(per_call * 500 / batch)
            result = await session.train(method="naive", plan=FixedBatch(int(batch)))
            assert abs(len(result.final) / paper_entries - 1) <= 0.25, (batch, len(result.final), paper_entries)


def test_the_uninformative_world_variant_reflects_no_lesson_about_any_unit() -> None:
    from combee_fast.roles.reflector import reflector_messages
    from combee_fast.schema import Rollout
    from combee_fast.sim.world import WORLD_VARIANTS, lesson_unit, world_params

    assert WORLD_VARIANTS[0] == "default" and world_params(FORMULA_PARAMS, "default") is FORMULA_PARAMS
    noise = TaskWorld(TASK, EXAMPLES, world_params(FORMULA_PARAMS, "uninformative"))
    units = {e.meta["formula"] for e in EXAMPLES} | {"General"}
    for seed, example in enumerate(EXAMPLES[:40]):
        rollout = Rollout(example=example, round=0, messages=(), answer="0", reasoning="", bullet_ids=(), score=0.0,
                          feedback="", usage=Usage())
        messages = reflector_messages(rollout, "", ground_truth=example.target)
        informed = orjson.loads(WORLD.respond(SimRequest("reflector", "m", messages, 1024, 0.0, seed, None)))
        blank = orjson.loads(noise.respond(SimRequest("reflector", "m", messages, 1024, 0.0, seed, None)))
        assert lesson_unit(blank["key_insight"]) not in units
        assert lesson_unit(informed["key_insight"]) in units
    with pytest.raises(ValueError, match="unknown task-world variant"):
        world_params(FORMULA_PARAMS, "chatty")
