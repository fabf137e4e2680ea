"""The task world for textual-gradient learning (TextGrad): a model, not evidence about real LLMs.

:class:`TextGradWorld` is the :class:`~combee_fast.sim.instructions.InstructionWorld` (every ACE
and GEPA role answered exactly as there, nothing changed) plus the five roles of a TextGrad run.
It reads the prompts by their tags, as a model reads them:

- **textgrad_forward**: the system message is the prompt variable; it answers as GEPA's solver
  does (every line stating a lesson, ``<unit> — lesson k: ...``, acts like a playbook entry about
  its unit; other prose changes nothing).
- **textgrad_loss**: reads the question and the model's answer; its verdict is the task's grade
  (``correct`` at score 1), its critique names the unit whose step went wrong.
- **textgrad_gradient**: reads the question, the answer and the critique's verdict; it names the
  unit's lesson with the ACE reflector's probabilities (after a wrong or a right answer), else a
  generic lesson, as the line the prompt should gain (in the ``uninformative`` variant a lesson
  about nothing, as that variant's reflector writes).
- **textgrad_step** (the optimizer): reads the numbered prompt and ``m`` gradients; of the
  distinct lessons they propose that the prompt lacks it adds the fraction ``capacity(m) / m``,
  generic ones first: it overloads along the curator's calibration curve, as GEPA's reflection
  does (:func:`~combee_fast.sim.instructions.capacity`). One gradient read is applied whole, so
  a gradient that names a unit's lesson makes the updated prompt hold it.
- **textgrad_reduce**: reads the prompt and the changes of several steps (``[r.n] add to <part>:
  <line>``); it keeps by reference every distinct lesson the prompt lacks, specific ones first, up
  to the ACE reducer's capacity (``reducer_capacity``), as the ACE reducer merges curators' ops;
  it keeps removals as proposed and writes nothing anew.

Fractional counts are rounded by a seeded draw. No world parameter is added or changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from combee_fast.roles.names import TEXTGRAD_FORWARD_ROLE as FORWARD_ROLE
from combee_fast.roles.names import TEXTGRAD_GRADIENT_ROLE as GRADIENT_ROLE
from combee_fast.roles.names import TEXTGRAD_LOSS_ROLE as LOSS_ROLE
from combee_fast.roles.names import TEXTGRAD_REDUCE_ROLE as REDUCE_ROLE
from combee_fast.roles.names import TEXTGRAD_STEP_ROLE as STEP_ROLE
from combee_fast.sim.instructions import InstructionWorld, _section, capacity, instruction_lessons
from combee_fast.sim.server import SimRequest
from combee_fast.sim.world import (
    GENERIC_LESSONS, _fresh, _json_lines, _lesson_key, _prose, _uniform, generic_lesson, lesson_unit, noise_lesson,
    specific_lesson,
)

TEXTGRAD_ROLES = (FORWARD_ROLE, LOSS_ROLE, GRADIENT_ROLE, STEP_ROLE, REDUCE_ROLE)
"""The TextGrad roles this world answers, by request name."""


_TAG = {name: re.compile(rf"<{name}>\n(.*?)\n?</{name}>", re.DOTALL) for name in (
    "model_answer", "critique", "current_prompt", "feedback", "proposals",
)}
_NUMBERED = re.compile(r"^\((\d+)\) \[([^\]]+)\] (.*)$", re.MULTILINE)
_CHANGE = re.compile(r"^\[(\d+\.\d+)\] (remove|add to [^:]+): (.*)$", re.MULTILINE)
_PROPOSAL = re.compile(r"^### Proposal \d+$", re.MULTILINE)
DEFAULT_PART = "system_prompt"


def _tagged(text: str, name: str) -> str:
    match = _TAG[name].search(text)
    return match[1] if match else ""


class TextGradWorld(InstructionWorld):
    """The ACE and GEPA task world plus the TextGrad roles (module docstring)."""

    def _instruction_roles(self) -> dict[str, Callable[[SimRequest, int], dict[str, object]]]:
        return {**super()._instruction_roles(), FORWARD_ROLE: self._solve, LOSS_ROLE: self._loss,
                GRADIENT_ROLE: self._gradient, STEP_ROLE: self._step, REDUCE_ROLE: self._reduce_changes}

    def _graded(self, prompt: str) -> tuple[object, str, str] | None:
        """The question of ``prompt``, the model's answer, and the first unit it got wrong (or its
        first unit when right); None for a question the world does not know."""
        question = self._questions.get(_section(prompt, "question").strip())
        if question is None:
            return None
        answer = _tagged(prompt, "model_answer")
        wrong = [u for i, u in enumerate(question.units) if not self._entity_right(question, answer, i)]
        return question, answer, (wrong or list(question.units))[0]

    def _loss(self, request: SimRequest, seed: int) -> dict[str, object]:
        graded = self._graded(request.last_user_content)
        if graded is None:
            return {"verdict": "incorrect", "critique": "The question is unknown to me."}
        question, answer, unit = graded
        if self.task.score(question.example, answer).value >= 1.0:  # type: ignore[attr-defined]
            return {"verdict": "correct", "critique": "The answer is correct. " + _prose(3, "tg-loss", seed)}
        return {"verdict": "incorrect",
                "critique": f"The answer {answer!r} is wrong: the step that handles {unit} went wrong. "
                + _prose(3, "tg-loss", seed)}

    def _gradient(self, request: SimRequest, seed: int) -> dict[str, object]:
        prompt = request.last_user_content
        graded = self._graded(prompt)
        if graded is None:
            return {"diagnosis": "The question is unknown to me.", "change": ""}
        question, _, unit = graded
        text = question.example.input  # type: ignore[attr-defined]
        right = _tagged(prompt, "critique").split(":", 1)[0].strip() == "correct"
        naming = self.params.name_unit_after_right if right else self.params.name_unit_after_wrong
        facet = int(_uniform("facet", seed, text) * self.params.facets_per_unit)
        if not self.params.informative_reflections:
            change = noise_lesson(facet)
        elif _uniform("tg-gradient", seed, text) < naming:
            change = specific_lesson(unit, facet)
        else:
            change = generic_lesson(int(_uniform("generic", seed, text) * len(GENERIC_LESSONS)))
        return {"diagnosis": f"The prompt says nothing about {unit}. " + _prose(2, "tg-gradient", seed),
                "change": change}

    def _step(self, request: SimRequest, seed: int) -> dict[str, object]:
        prompt = request.last_user_content
        numbered = _NUMBERED.findall(_tagged(prompt, "current_prompt"))
        held = {_lesson_key(line) for line in instruction_lessons("\n".join(line for _, _, line in numbered))}
        part = numbered[0][1] if numbered else DEFAULT_PART
        rows = _json_lines(_tagged(prompt, "feedback"))
        fresh = sorted(_fresh((str(row.get("change", "")) for row in rows), held),
                       key=lambda lesson: lesson_unit(lesson) != "General")
        expected = len(fresh) * capacity(len(rows), self.params.curator_curve) / max(1, len(rows))
        kept = fresh[: self._kept(expected, "tg-step", seed)]
        return {"reasoning": f"{len(kept)} new lines from {len(rows)} gradients. " + _prose(3, "tg-step", seed),
                "remove": [], "add": [{"part": part, "line": lesson} for lesson in kept]}

    def _reduce_changes(self, request: SimRequest, seed: int) -> dict[str, object]:
        prompt = request.last_user_content
        held = {_lesson_key(line) for line in instruction_lessons(_tagged(prompt, "current_prompt"))}
        proposals = _tagged(prompt, "proposals")
        first_ref: dict[str, str] = {}
        removals = []
        for ref, kind, line in _CHANGE.findall(proposals):
            if kind == "remove":
                removals.append(ref)
            else:
                first_ref.setdefault(line.strip(), ref)
        fresh = _fresh(first_ref, held)
        specific_first = sorted(fresh, key=lambda lesson: lesson_unit(lesson) == "General")
        keep = [first_ref[lesson] for lesson in specific_first[: int(self.params.reducer_capacity)]]
        read = len(_PROPOSAL.findall(proposals))
        return {"reasoning": f"Merging {len(fresh)} new lines from {read} proposals, keeping {len(keep)}. "
                + _prose(3, "tg-reduce", seed), "keep": [*keep, *removals], "add": []}
