"""How the simulated endpoint answers GEPA's three roles: :data:`RESPONDERS` (request role name ->
``responder(world, request)``), given by its kind as ``responders``. A model, not evidence about
real LLMs.

- **gepa_solver**: the system message is the candidate instruction, read as the world reads any
  (:func:`~combee_fast.sim.instructed.solve`): every line of it that states a lesson acts like a
  playbook entry about that unit; other prose in the instruction changes nothing.
- **gepa_proposer** (reflection): reads the current instruction and graded examples (one JSON
  line each, ``question``/``answer``; or a gepa adapter's reflective records, as
  ``combee_fast.optimize`` sends them: :func:`graded_row`). Per example it names the unit's lesson with the ACE
  reflector's probabilities (after a wrong or a right answer), else a generic lesson. Like the
  curator it overloads: of the lessons the instruction lacks it keeps the fraction
  ``capacity(m) / m`` for ``m`` examples read, generic ones first, and returns the instruction
  with them appended. An example is judged by the world
  (:meth:`~combee_fast.sim.world.TaskWorld.verdict`: graded by the task, or by the score its row
  reports when it has no target), its lesson named in the world's lessons
  (:meth:`~combee_fast.sim.world.TaskWorld.named_lesson`).
- **gepa_aggregator**: reads the current instruction and the lines each of ``m`` revisions adds
  (``[r.n] line``); of the distinct lessons they add that the instruction lacks it keeps the
  fraction ``capacity(m) / m``, specific ones first (its prompt asks to keep complementary details
  and prefer the more specific guidance), by reference; it removes and writes nothing.

Overload is modelled on the number of items a call reads (examples for the proposer, revisions
for the aggregator), as the curator's is on the reflections it reads
(:func:`~combee_fast.sim.instructed.capacity`): one item read is kept whole, many saturate, the
shape of the paper's Fig. 2. No world parameter is added or changed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from combee_fast.gepa.calls import AGGREGATOR_ROLE, PROPOSER_ROLE, SOLVER_ROLE
from combee_fast.sim.instructed import capacity, instruction_lessons, kept_count, solve
from combee_fast.sim.peers import FINAL_ANSWER
from combee_fast.sim.responders import RoleResponder, SimRequest
from combee_fast.sim.world import (TaskWorld, fresh_lessons, json_lines, json_reply, lesson_key, lesson_unit, seed_of,
                                   tagged, uniform)

_REVISION = re.compile(r"^### Revision \d+$", re.MULTILINE)
_ADDED = re.compile(r"^\[(\d+\.\d+)\] (.*)$", re.MULTILINE)


def with_lessons(instruction: str, lessons: Sequence[str]) -> str:
    """``instruction`` with ``lessons`` appended as ``- `` lines."""
    if not lessons:
        return instruction
    return instruction.rstrip("\n") + "\n" + "\n".join(f"- {lesson}" for lesson in lessons)


def _last(request: SimRequest) -> str:
    return request.messages[-1].content if request.messages else ""


RECORD_FIELDS = {"question": ("question", "Inputs", "input"), "answer": ("answer", "Generated Outputs", "output")}
"""Where a graded example's question and answer may stand: our proposer's fields, the reflective
records of gepa's default adapter, and those ``combee_fast.optimize`` makes of an evaluator's."""


def graded_row(row: dict[str, Any]) -> dict[str, Any]:
    """A graded example as the proposer judges it: its ``question`` and ``answer`` from the first
    field of :data:`RECORD_FIELDS` it has, an answer written as a peer's reply read after its last
    ``Final answer:``."""
    found = dict(row)
    for name, fields in RECORD_FIELDS.items():
        value = next((row[field] for field in fields if field in row), "")
        found[name] = value
    answer = str(found["answer"])
    found["answer"] = answer.rsplit(FINAL_ANSWER, 1)[1].strip() if FINAL_ANSWER in answer else answer
    return found


def propose(world: TaskWorld, request: SimRequest) -> str:
    """GEPA's reflection (module docstring): each known example judged by the world, its lesson
    named with the ACE reflector's probabilities."""
    prompt, seed = _last(request), seed_of(request)
    current = tagged(prompt, "current_instruction") or ""
    held = {lesson_key(line) for line in instruction_lessons(current)}
    rows = [graded_row(row) for row in json_lines(tagged(prompt, "examples") or "")]
    lessons = []
    for row in rows:
        question = world.question(str(row.get("question", "")))
        if question is None:
            continue
        score = row.get("score")
        right, unit = world.verdict(question, str(row.get("answer", "")),
                                    isinstance(score, (int, float)) and score >= 1.0)
        naming = world.params.name_unit_after_right if right else world.params.name_unit_after_wrong
        text = question.example.input
        lessons.append(world.named_lesson(unit, uniform("propose", seed, text) < naming, text, seed))
    fresh = sorted(fresh_lessons(lessons, held), key=lambda text: lesson_unit(text) != "General")
    expected = len(fresh) * capacity(len(rows), world.params.curator_curve) / max(1, len(rows))
    kept = fresh[: kept_count(expected, "propose", seed)]
    return json_reply({
        "reasoning": f"{len(kept)} lessons from {len(rows)} graded examples. " + world.prose(3, "proposer", seed),
        "instruction": with_lessons(current, kept),
    })


def aggregate(world: TaskWorld, request: SimRequest) -> str:
    """The revisions' added lessons merged by reference (module docstring)."""
    prompt, seed = _last(request), seed_of(request)
    held = {lesson_key(line) for line in instruction_lessons(tagged(prompt, "current_instruction") or "")}
    proposals = tagged(prompt, "proposals") or ""
    read = max(1, len(_REVISION.findall(proposals)))
    first_ref: dict[str, str] = {}
    for ref, line in _ADDED.findall(proposals):
        lesson = line.strip().removeprefix("- ").strip()
        first_ref.setdefault(lesson, ref)
    fresh = fresh_lessons(instruction_lessons("\n".join(first_ref)), held)
    specific_first = sorted(fresh, key=lambda text: lesson_unit(text) == "General")
    expected = len(fresh) * capacity(read, world.params.curator_curve) / read
    keep = [first_ref[text] for text in specific_first[: kept_count(expected, "aggregate", seed)]]
    return json_reply({
        "reasoning": f"Merging {len(fresh)} new lessons from {read} revisions, keeping {len(keep)}. "
        + world.prose(3, "aggregator", seed),
        "remove": [],
        "keep": keep,
        "add": [],
    })


RESPONDERS: Mapping[str, RoleResponder] = {SOLVER_ROLE: solve, PROPOSER_ROLE: propose, AGGREGATOR_ROLE: aggregate}
"""GEPA's roles as the simulated endpoint answers them, by request role name."""
