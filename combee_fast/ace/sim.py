"""How the simulated endpoint answers ACE's four roles: :data:`RESPONDERS` (request role name ->
``responder(world, request)``), given by its kind as ``responders``. A model, not evidence about
real LLMs. Each reads the prompt by the tags ACE's templates use; in a repair conversation
(prompt, bad assistant reply, repair instruction) it answers the prompt repaired.

- **generator**: :meth:`TaskWorld.answer <combee_fast.sim.world.TaskWorld.answer>` with the
  playbook's bullets as the lessons read (and the retry's reflection).
- **reflector**: names the missing unit's lesson with some probability (lower without ground
  truth), otherwise a generic lesson, in the world's lessons; tags the cited bullets. An example
  without a target (a collected trace) is judged by the outcome its prompt reports
  (:meth:`~combee_fast.sim.world.TaskWorld.verdict`). Below the ``collapse`` variant's
  temperature it names one and the same lesson whatever the rollout. In a world where the
  endpoint plays the agent, it reviews an episode: judged by the outcome its prompt reports (the
  environment's checks decided it), with the probabilities after a right or a wrong outcome
  (no ground truth to discount), written in the world's words
  (:class:`~combee_fast.sim.world.EpisodeWords`).
- **curator**: its output saturates with the number of reflections in the call, following the
  entries per curator call the paper measured (:data:`~combee_fast.sim.world.PAPER_CURATOR_CURVE`),
  keeping generic lessons before specific ones: that is context overload. It skips lessons the
  playbook holds, and files unit lessons under the world's section for them.
- **reducer**: keeps proposed ADDs by reference, dropping duplicates, specific lessons first, with
  a larger capacity (``reducer_capacity``).

Every reply's prose is the world's (:meth:`TaskWorld.prose <combee_fast.sim.world.TaskWorld.prose>`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from combee_fast.ace.roles import CURATOR, GENERATOR, REDUCER, REFLECTOR
from combee_fast.sim.responders import RoleResponder, SimRequest
from combee_fast.sim.world import (
    EpisodeWords, TaskWorld, curator_output, fresh_lessons, json_lines, json_reply, lesson_key, lesson_unit,
    noise_lesson, playbook_bullets, prompt_of, seed_of, tagged, uniform,
)

_REPORTED_CORRECT = re.compile(r"^Outcome: correct\b", re.MULTILINE)
_OUTCOME = re.compile(r"^Outcome: (correct|incorrect)", re.MULTILINE)
_CITED = re.compile(r"^\[([^\]]+)\] helpful=", re.MULTILINE)


def reflection_reply(
    reasoning: str, error: str, root: str, approach: str, lesson: str, tags: list[dict[str, str]]
) -> dict[str, object]:
    """A reflector's reply object."""
    return {
        "reasoning": reasoning,
        "error_identification": error,
        "root_cause": root,
        "correct_approach": approach,
        "key_insight": lesson,
        "bullet_tags": tags,
    }


def generate(world: TaskWorld, request: SimRequest) -> str:
    prompt, seed = prompt_of(request.messages), seed_of(request)
    question = world.question(tagged(prompt, "question"))
    if question is None:
        return json_reply({"reasoning": "The question is not one I can answer.", "bullet_ids": [], "final_answer": ""})
    bullets = playbook_bullets(tagged(prompt, "playbook") or "")
    return json_reply(world.answer(question, bullets, tagged(prompt, "reflection") or "", seed))


def reflect(world: TaskWorld, request: SimRequest) -> str:
    if world.agent is not None:
        return _review(world, world.agent.words, request)
    prompt, seed = prompt_of(request.messages), seed_of(request)
    collapsed = request.temperature < world.params.collapse_below_temperature
    question = world.question(tagged(prompt, "question"))
    answer = tagged(prompt, "model_answer") or ""
    has_truth = tagged(prompt, "ground_truth") is not None
    cited = [bid for bid, _ in playbook_bullets(tagged(prompt, "cited_bullets") or "")]
    if question is None:
        return json_reply(reflection_reply("The question is unknown to me.", "", "", "", "", []))
    params = world.params
    right, unit = world.verdict(question, answer, _REPORTED_CORRECT.search(prompt) is not None)
    naming = params.name_unit_after_right if right else params.name_unit_after_wrong
    if not has_truth:
        naming *= params.no_ground_truth_factor
    text = question.example.input
    lesson = _lesson(world, unit, uniform("reflect", seed, text) < naming, seed, text, collapsed=collapsed)
    tags = [{"id": bid, "tag": "helpful" if right else "harmful"} for bid in cited]
    verdict = "The answer was correct." if right else f"The answer {answer!r} was wrong."
    return json_reply(reflection_reply(
        f"{verdict} " + world.prose(4, "reflect-reasoning", seed),
        "No error." if right else f"The step that handles {unit} went wrong. " + world.prose(2, "err", seed),
        "Nothing failed." if right else f"The lesson about {unit} was not applied. " + world.prose(2, "root", seed),
        f"Apply the lesson about {unit} explicitly. " + world.prose(3, "approach", seed),
        lesson,
        tags,
    ))


def _review(world: TaskWorld, words: EpisodeWords, request: SimRequest) -> str:
    """The reflector on an agent's episode (module docstring)."""
    prompt = request.messages[-1].content if request.messages else ""
    seed = seed_of(request)
    question = world.question(tagged(prompt, "question") or "")
    if question is None:
        return json_reply(reflection_reply(f"The {words.thing} is unknown to me.", "", "", "", "", []))
    outcome = _OUTCOME.search(prompt)
    right, unit = world.verdict(question, "", outcome is not None and outcome[1] == "correct")
    params = world.params
    naming = params.name_unit_after_right if right else params.name_unit_after_wrong
    cited = _CITED.findall(prompt)
    text = question.example.input
    lesson = _lesson(world, unit, uniform("reflect", seed, text) < naming, seed, text)
    tags = [{"id": bid, "tag": "helpful" if right else "harmful"} for bid in cited]
    return json_reply(reflection_reply(
        f"{words.outcomes[right]} " + words.prose(3, "reflect-reasoning", seed),
        "No error." if right else f"The {unit.lower()} step went wrong. " + words.prose(1, "err", seed),
        "Nothing failed." if right else words.cause.format(unit=unit.lower()),
        words.remedy.format(unit=unit.lower()) + " " + words.prose(2, "approach", seed),
        lesson,
        tags,
    ))


def _lesson(world: TaskWorld, unit: str, names_unit: bool, seed: int, text: str, *, collapsed: bool = False) -> str:
    """The lesson a reflection on the question ``text`` names: the collapsed world's one lesson,
    the ``uninformative`` world's note about nothing, a wrong lesson about ``unit`` (the
    ``harmful`` world, for ``harmful_share`` of those naming it), one of its facets, else a generic one."""
    params, lessons = world.params, world.lessons
    facet = int(uniform("facet", seed, text) * params.facets_per_unit)
    if collapsed:
        return lessons.general(0)
    if not params.informative_reflections:
        return noise_lesson(facet)
    if names_unit and params.harmful_share and lessons.wrong and uniform("harm", seed, text) < params.harmful_share:
        return lessons.wrong_about(unit, int(uniform("harm-facet", seed, text) * len(lessons.wrong)),
                                   params.facets_per_unit)
    if names_unit:
        return lessons.about(unit, facet)
    return lessons.general(int(uniform("generic", seed) * len(lessons.generic)))


def curate(world: TaskWorld, request: SimRequest) -> str:
    prompt, seed = prompt_of(request.messages), seed_of(request)
    held = {lesson_key(content) for _, content in playbook_bullets(tagged(prompt, "playbook") or "")}
    lessons = [row.get("key_insight", "") for row in json_lines(tagged(prompt, "reflections") or "")]
    fresh = fresh_lessons(lessons, held)
    expected = curator_output(len(lessons), world.params.curator_curve)
    count = int(expected) + (uniform("curate", seed) < expected - int(expected))
    generic_first = sorted(fresh, key=lambda text: lesson_unit(text) != "General")
    return json_reply(_operations(world, generic_first[:count], "curator", seed))


def reduce(world: TaskWorld, request: SimRequest) -> str:
    prompt, seed = prompt_of(request.messages), seed_of(request)
    held = {lesson_key(content) for _, content in playbook_bullets(tagged(prompt, "playbook") or "")}
    proposed = {
        op.get("ref", ""): op.get("content", "")
        for row in json_lines(tagged(prompt, "proposals") or "")
        for op in row.get("operations", [])
        if op.get("type") == "ADD"
    }
    first_ref = {text: ref for ref, text in reversed(list(proposed.items()))}
    fresh = fresh_lessons(proposed.values(), held)
    specific_first = sorted(fresh, key=lambda text: lesson_unit(text) == "General")
    keep = [first_ref[text] for text in specific_first[: int(world.params.reducer_capacity)]]
    reasoning = f"Keeping {len(keep)} distinct lessons, dropping duplicates. " + world.prose(3, "reducer", seed)
    return json_reply({"reasoning": reasoning, "keep": keep, "operations": []})


def _operations(world: TaskWorld, lessons: Sequence[str], role: str, seed: int) -> dict[str, object]:
    """The curator's reply adding ``lessons``: generic ones under ``strategies_and_hard_rules``, the
    others under the world's section for unit lessons (:attr:`Lessons.section
    <combee_fast.sim.world.Lessons.section>`)."""
    operations = [
        {
            "type": "ADD",
            "section": "strategies_and_hard_rules" if lesson_unit(text) == "General" else world.lessons.section,
            "content": text,
            "bullet_id": "",
        }
        for text in lessons
    ]
    reasoning = f"{len(operations)} new lessons are worth recording. " + world.prose(3, role, seed)
    return {"reasoning": reasoning, "operations": operations}


RESPONDERS: Mapping[str, RoleResponder] = {GENERATOR.key: generate, REFLECTOR.key: reflect, CURATOR.key: curate,
                                           REDUCER.key: reduce}
"""ACE's roles as the simulated endpoint answers them, by request role name."""
