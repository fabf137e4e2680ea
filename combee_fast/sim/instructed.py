"""A learned context of plain instruction text as the task world reads it: GEPA's candidate,
TextGrad's prompt variable, a peer's instruction. A model, not evidence about real LLMs.

- :func:`instruction_lessons`: the lines of an instruction that state a lesson (``<unit> —
  lesson k: ...``, as the world writes them, optionally after ``- ``); other prose is no lesson.
- :func:`solve`: the serving role's answer under the instruction in its system message, every
  lesson line read as a playbook entry about its unit (:meth:`TaskWorld.answer
  <combee_fast.sim.world.TaskWorld.answer>`).
- :func:`capacity` and :func:`kept_count`: how a call that reads ``m`` items (graded examples,
  revisions, gradients) overloads, as the curator does on the reflections it reads: it keeps the
  fraction ``capacity(m) / m`` of the fresh lessons in them, ``capacity(m)`` the curator's
  calibration curve (:data:`~combee_fast.sim.world.PAPER_CURATOR_CURVE`, via the world's
  ``curator_curve``) relative to one input, a fractional count rounded by a seeded draw.
"""

from __future__ import annotations

from collections.abc import Sequence

from combee_fast.sim.responders import SimRequest
from combee_fast.sim.world import TaskWorld, curator_output, json_reply, lesson_key, lesson_unit, seed_of, tagged, uniform


def instruction_lessons(text: str) -> list[str]:
    """The lesson lines of an instruction (``- `` bullets stripped), in order."""
    lines = (line.strip().removeprefix("- ").removeprefix("* ").strip() for line in text.splitlines())
    return [line for line in lines if lesson_unit(line) is not None and lesson_key(line) is not None]


def solve(world: TaskWorld, request: SimRequest) -> str:
    """An answer under the system message's instruction, its lesson lines read as entries."""
    system = "\n".join(m.content for m in request.messages if m.role == "system")
    last = request.messages[-1].content if request.messages else ""
    question = world.question(tagged(last, "question") or "")
    if question is None:
        return json_reply({"reasoning": "The question is not one I can answer.", "final_answer": ""})
    entries = [(f"i{n}", lesson) for n, lesson in enumerate(instruction_lessons(system))]
    reply = world.answer(question, entries, "", seed_of(request))
    return json_reply({"reasoning": reply["reasoning"], "final_answer": reply["final_answer"]})


def capacity(inputs: int, curve: Sequence[tuple[float, float]]) -> float:
    """Expected lessons one call keeps after reading ``inputs`` items: the curator curve
    relative to a single input (1.0 at one input, saturating beyond)."""
    if inputs <= 0:
        return 0.0
    return curator_output(inputs, curve) / curator_output(1, curve)


def kept_count(expected: float, role: str, seed: int) -> int:
    """``expected`` (a fractional count of lessons kept) rounded by a draw seeded by ``role`` and ``seed``."""
    return int(expected) + (uniform(role, seed) < expected - int(expected))
