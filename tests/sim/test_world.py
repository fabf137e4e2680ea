"""The task world plays each role from the prompt alone, deterministically."""

from __future__ import annotations

import pytest

import orjson

from combee_fast.learners import role_table
from combee_fast.sim.server import SimRequest
from combee_fast.ace.playbook import Playbook
from combee_fast.ace.curator import curator_messages
from combee_fast.ace.generator import generator_messages
from combee_fast.ace.reflector import reflector_messages
from combee_fast.schema import Rollout, Usage
from combee_fast.ace.records import Delta, Op, OpKind, Reflection
from combee_fast.tasks.registry import get_task
from combee_fast.sim.world import (
    FORMULA_PARAMS, HARMFUL_SHARE, TaskWorld, generic_lesson, harmful_lesson, is_harmful, specific_lesson, world_params,
)

TASK = get_task("formula")
EXAMPLES = TASK.load("train").examples
WORLD = TaskWorld(TASK, EXAMPLES, FORMULA_PARAMS, roles=role_table())


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
    from combee_fast.ace.reflector import reflector_messages
    from combee_fast.schema import Rollout
    from combee_fast.sim.world import WORLD_VARIANTS, lesson_unit, world_params

    assert WORLD_VARIANTS[0] == "default" and world_params(FORMULA_PARAMS, "default") is FORMULA_PARAMS
    noise = TaskWorld(TASK, EXAMPLES, world_params(FORMULA_PARAMS, "uninformative"), roles=role_table())
    units = {e.meta["formula"] for e in EXAMPLES} | {"General"}
    for seed, example in enumerate(EXAMPLES[:40]):
        rollout = Rollout(example=example, round=0, messages=(), answer="0", reasoning="", cited=(), score=0.0,
                          feedback="", usage=Usage())
        messages = reflector_messages(rollout, "", ground_truth=example.target)
        informed = orjson.loads(WORLD.respond(SimRequest("reflector", "m", messages, 1024, 0.0, seed, None)))
        blank = orjson.loads(noise.respond(SimRequest("reflector", "m", messages, 1024, 0.0, seed, None)))
        assert lesson_unit(blank["key_insight"]) not in units
        assert lesson_unit(informed["key_insight"]) in units
    with pytest.raises(ValueError, match="unknown task-world variant"):
        world_params(FORMULA_PARAMS, "chatty")


def _learned(*lessons: str) -> str:
    delta = Delta(tuple(Op(OpKind.ADD, section="formulas_and_calculations", content=text) for text in lessons))
    return Playbook.empty().apply(delta)[0].render()


def _answers(world: TaskWorld, playbook_text: str, count: int = 200) -> list[float]:
    scores = []
    for seed, example in enumerate(EXAMPLES[:count]):
        request = SimRequest("generator", "m", generator_messages(example.input, playbook_text), 1024, 0.0, seed, None)
        scores.append(TASK.score(example, orjson.loads(world.respond(request))["final_answer"]).value)
    return scores


def test_the_noisy_world_draws_per_call_where_the_default_world_repeats_its_draws() -> None:
    """Two playbooks that know nothing about a question's unit answer it alike in the default
    world (common random numbers) and independently in the noisy one, at the same rate."""
    noisy = TaskWorld(TASK, EXAMPLES, world_params(FORMULA_PARAMS, "noisy"), roles=role_table())
    one, other = _learned(generic_lesson(3)), _learned(generic_lesson(4))  # same probability everywhere
    assert _answers(WORLD, one) == _answers(WORLD, other)
    first, second = _answers(noisy, one), _answers(noisy, other)
    assert sum(a != b for a, b in zip(first, second)) > 40
    assert abs(sum(first) - sum(second)) / 200 < 0.1
    assert _answers(noisy, one, 30) == first[:30]  # the same prompt and seed: the same answer (replay holds)
    assert _answers(TaskWorld(TASK, EXAMPLES, world_params(FORMULA_PARAMS, "default"), roles=role_table()), one) == _answers(WORLD, one)


def test_a_wrong_lesson_of_the_harmful_world_lowers_accuracy_on_its_unit() -> None:
    harmful = TaskWorld(TASK, EXAMPLES, world_params(FORMULA_PARAMS, "harmful"), roles=role_table())
    unit = EXAMPLES[0].meta["formula"]
    on_unit = [e for e in EXAMPLES if e.meta["formula"] == unit]
    right = _learned(specific_lesson(unit, 0))
    wrong = _learned(specific_lesson(unit, 0), harmful_lesson(unit, 1, FORMULA_PARAMS.facets_per_unit))
    assert harmful.expected_accuracy(right, on_unit) == pytest.approx(FORMULA_PARAMS.known_accuracy)
    assert harmful.expected_accuracy(wrong, on_unit) == pytest.approx(harmful.params.harmful_accuracy)
    assert harmful.expected_accuracy(wrong, EXAMPLES) < harmful.expected_accuracy(right, EXAMPLES)
    assert WORLD.expected_accuracy(wrong, on_unit) == pytest.approx(FORMULA_PARAMS.known_accuracy)  # none in default


def _lesson(world: TaskWorld, example, seed: int) -> str:
    """The lesson ``world`` reflects after a wrong answer to ``example``."""
    rollout = Rollout(example, 0, (), "9999", "I guessed.", (), 0.0, "wrong", Usage())
    request = SimRequest("reflector", "m", reflector_messages(rollout, "", ground_truth=example.target), 1024, 0.0,
                         seed, None)
    return orjson.loads(world.respond(request))["key_insight"]


def test_the_harmful_world_reflects_wrong_lessons_in_its_share_and_world_variants_combine() -> None:
    harmful = TaskWorld(TASK, EXAMPLES, world_params(FORMULA_PARAMS, "noisy+harmful"), roles=role_table())
    assert harmful.params.noisy and harmful.params.harmful_share == HARMFUL_SHARE
    lessons = [_lesson(harmful, example, seed) for seed, example in enumerate(EXAMPLES[:400])]
    share = sum(is_harmful(text) for text in lessons) / len(lessons)
    assert 0.3 * HARMFUL_SHARE < share < 2 * HARMFUL_SHARE
    assert not any(is_harmful(_lesson(WORLD, example, seed)) for seed, example in enumerate(EXAMPLES[:200]))
    with pytest.raises(ValueError, match="unknown task-world variant 'noisy\\+loud'"):
        world_params(FORMULA_PARAMS, "noisy+loud")


def test_gepa_and_textgrad_name_wrong_lessons_in_the_harmful_worlds_share_as_aces_reflector_does() -> None:
    # GEPA's proposer and TextGrad's gradient take their lessons from unit_namer: a release gate's
    # canary has something harmful to catch for every learner, not for ACE alone
    harmful = TaskWorld(TASK, EXAMPLES, world_params(FORMULA_PARAMS, "noisy+harmful"), roles=role_table())
    named = [(example.meta["formula"], example.input, seed) for seed, example in enumerate(EXAMPLES[:400])]
    lessons = [harmful.named_lesson(unit, True, text, seed) for unit, text, seed in named]
    share = sum(is_harmful(text) for text in lessons) / len(lessons)
    assert 0.3 * HARMFUL_SHARE < share < 2 * HARMFUL_SHARE
    assert not any(is_harmful(WORLD.named_lesson(unit, True, text, seed)) for unit, text, seed in named)
    assert not any(is_harmful(harmful.named_lesson(unit, False, text, seed)) for unit, text, seed in named)
