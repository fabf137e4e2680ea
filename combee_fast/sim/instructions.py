"""The task world for instruction learning (GEPA): a model, not evidence about real LLMs.

:class:`InstructionWorld` is the :class:`~combee_fast.sim.world.TaskWorld` (every ACE role
answered exactly as there, nothing changed) plus the three roles of a GEPA run:

- **gepa_solver**: the system message is the candidate instruction. Every line of it that states
  a lesson (``<unit> — lesson k: ...``, as the ACE world writes them, optionally after ``- ``)
  acts like a playbook entry about that unit: the answer is drawn by
  :meth:`TaskWorld.answer <combee_fast.sim.world.TaskWorld.answer>` with those lines as the
  entries. Other prose in the instruction changes nothing.
- **gepa_proposer** (reflection): reads the current instruction and graded examples (one JSON
  line each, ``question``/``answer``). Per example it names the unit's lesson with the ACE
  reflector's probabilities (after a wrong or a right answer), else a generic lesson. Like the
  curator it overloads: of the lessons the instruction lacks it keeps the fraction
  ``capacity(m) / m`` for ``m`` examples read, generic ones first, and returns the instruction
  with them appended.
- **gepa_aggregator**: reads the current instruction and the lines each of ``m`` revisions adds
  (``[r.n] line``); of the distinct lessons they add that the instruction lacks it keeps the
  fraction ``capacity(m) / m``, specific ones first (its prompt asks to keep complementary details
  and prefer the more specific guidance), by reference; it removes and writes nothing.

Overload is modelled on the number of items a call reads (examples for the proposer, revisions
for the aggregator), as the curator's is on the reflections it reads: a call reading ``m`` items
keeps the fraction ``capacity(m) / m`` of the fresh lessons in them, where ``capacity(m)`` is the
curator's calibration curve (:data:`~combee_fast.sim.world.PAPER_CURATOR_CURVE`, via the world's
``curator_curve``) relative to one input, ``curator_output(m) / curator_output(1)``: one item read
is kept whole, many saturate, the shape of the paper's Fig. 2. Fractional counts are rounded by a
seeded draw. No world parameter is added or changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import orjson

from combee_fast.sim.responders import SimReply
from combee_fast.roles.names import GEPA_AGGREGATOR_ROLE as AGGREGATOR_ROLE
from combee_fast.roles.names import GEPA_PROPOSER_ROLE as PROPOSER_ROLE
from combee_fast.roles.names import GEPA_SOLVER_ROLE as SOLVER_ROLE
from combee_fast.sim.server import SimRequest
from combee_fast.sim.world import (
    GENERIC_LESSONS, TaskWorld, _fresh, _json_lines, _lesson_key, _prose, _uniform, curator_output, generic_lesson,
    lesson_unit, specific_lesson,
)


_SECTION = {name: re.compile(rf"<{name}>\n(.*?)\n?</{name}>", re.DOTALL) for name in (
    "question", "current_instruction", "examples", "proposals",
)}


_REVISION = re.compile(r"^### Revision \d+$", re.MULTILINE)
_ADDED = re.compile(r"^\[(\d+\.\d+)\] (.*)$", re.MULTILINE)


def _section(text: str, name: str) -> str:
    match = _SECTION[name].search(text)
    return match[1] if match else ""


def instruction_lessons(text: str) -> list[str]:
    """The lesson lines of an instruction (``- `` bullets stripped), in order."""
    lines = (line.strip().removeprefix("- ").removeprefix("* ").strip() for line in text.splitlines())
    return [line for line in lines if lesson_unit(line) is not None and _lesson_key(line) is not None]


def capacity(inputs: int, curve: Sequence[tuple[float, float]]) -> float:
    """Expected lessons one call keeps after reading ``inputs`` items: the curator curve
    relative to a single input (1.0 at one input, saturating beyond)."""
    if inputs <= 0:
        return 0.0
    return curator_output(inputs, curve) / curator_output(1, curve)


def with_lessons(instruction: str, lessons: Sequence[str]) -> str:
    """``instruction`` with ``lessons`` appended as ``- `` lines."""
    if not lessons:
        return instruction
    return instruction.rstrip("\n") + "\n" + "\n".join(f"- {lesson}" for lesson in lessons)


class InstructionWorld(TaskWorld):
    """The ACE task world plus the GEPA roles (module docstring)."""

    def respond(self, request: SimRequest) -> str | SimReply:
        handler = self._instruction_roles().get(request.role)
        if handler is None:
            return super().respond(request)
        seed = request.seed if request.seed is not None else 0
        return orjson.dumps(handler(request, seed)).decode()

    def _instruction_roles(self) -> dict[str, Callable[[SimRequest, int], dict[str, object]]]:
        return {SOLVER_ROLE: self._solve, PROPOSER_ROLE: self._propose, AGGREGATOR_ROLE: self._aggregate}

    def _kept(self, expected: float, role: str, seed: int) -> int:
        return int(expected) + (_uniform(role, seed) < expected - int(expected))

    def _solve(self, request: SimRequest, seed: int) -> dict[str, object]:
        system = "\n".join(m.content for m in request.messages if m.role == "system")
        user = request.messages[-1].content if request.messages else ""
        question = self._questions.get(_section(user, "question").strip())
        if question is None:
            return {"reasoning": "The question is not one I can answer.", "final_answer": ""}
        entries = [(f"i{n}", lesson) for n, lesson in enumerate(instruction_lessons(system))]
        reply = self.answer(question, entries, "", seed)
        return {"reasoning": reply["reasoning"], "final_answer": reply["final_answer"]}

    def _propose(self, request: SimRequest, seed: int) -> dict[str, object]:
        prompt = request.messages[-1].content if request.messages else ""
        current = _section(prompt, "current_instruction")
        held = {_lesson_key(line) for line in instruction_lessons(current)}
        rows = _json_lines(_section(prompt, "examples"))
        lessons = []
        for row in rows:
            question = self._questions.get(str(row.get("question", "")).strip())
            if question is None:
                continue
            answer = str(row.get("answer", ""))
            right = self.task.score(question.example, answer).value >= 1.0
            wrong = [u for i, u in enumerate(question.units) if not self._entity_right(question, answer, i)]
            unit = (wrong or list(question.units))[0]
            naming = self.params.name_unit_after_right if right else self.params.name_unit_after_wrong
            if _uniform("propose", seed, question.example.input) < naming:
                facet = int(_uniform("facet", seed, question.example.input) * self.params.facets_per_unit)
                lessons.append(specific_lesson(unit, facet))
            else:
                pick = int(_uniform("generic", seed, question.example.input) * len(GENERIC_LESSONS))
                lessons.append(generic_lesson(pick))
        fresh = sorted(_fresh(lessons, held), key=lambda text: lesson_unit(text) != "General")
        expected = len(fresh) * capacity(len(rows), self.params.curator_curve) / max(1, len(rows))
        kept = fresh[: self._kept(expected, "propose", seed)]
        return {
            "reasoning": f"{len(kept)} lessons from {len(rows)} graded examples. " + _prose(3, "proposer", seed),
            "instruction": with_lessons(current, kept),
        }

    def _aggregate(self, request: SimRequest, seed: int) -> dict[str, object]:
        prompt = request.messages[-1].content if request.messages else ""
        held = {_lesson_key(line) for line in instruction_lessons(_section(prompt, "current_instruction"))}
        proposals = _section(prompt, "proposals")
        read = max(1, len(_REVISION.findall(proposals)))
        first_ref: dict[str, str] = {}
        for ref, line in _ADDED.findall(proposals):
            lesson = line.strip().removeprefix("- ").strip()
            first_ref.setdefault(lesson, ref)
        fresh = _fresh(instruction_lessons("\n".join(first_ref)), held)
        specific_first = sorted(fresh, key=lambda text: lesson_unit(text) == "General")
        expected = len(fresh) * capacity(read, self.params.curator_curve) / read
        keep = [first_ref[text] for text in specific_first[: self._kept(expected, "aggregate", seed)]]
        return {
            "reasoning": f"Merging {len(fresh)} new lessons from {read} revisions, keeping {len(keep)}. "
            + _prose(3, "aggregator", seed),
            "remove": [],
            "keep": keep,
            "add": [],
        }
