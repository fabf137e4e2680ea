"""How the simulated endpoint answers TextGrad's five roles: :data:`RESPONDERS` (request role
name -> ``responder(world, request)``), given by its kind as ``responders``. A model, not evidence
about real LLMs. They read the prompts by their tags, as a model reads them:

- **textgrad_forward**: the system message is the prompt variable, read as the world reads any
  instruction (:func:`~combee_fast.sim.instructed.solve`: every line stating a lesson,
  ``<unit> — lesson k: ...``, acts like a playbook entry about its unit; other prose changes nothing).
- **textgrad_loss**: reads the question and the model's answer; its verdict is the task's grade
  (``correct`` at score 1), its critique names the unit whose step went wrong.
- **textgrad_gradient**: reads the question, the answer and the critique's verdict; it names the
  unit's lesson with the ACE reflector's probabilities (after a wrong or a right answer), else a
  generic lesson, as the line the prompt should gain (in the ``uninformative`` variant a lesson
  about nothing, as that variant's reflector writes).
- **textgrad_step** (the optimizer): reads the numbered prompt and ``m`` gradients; of the
  distinct lessons they propose that the prompt lacks it adds the fraction ``capacity(m) / m``,
  generic ones first: it overloads along the curator's calibration curve, as GEPA's reflection
  does (:func:`~combee_fast.sim.instructed.capacity`). One gradient read is applied whole, so
  a gradient that names a unit's lesson makes the updated prompt hold it.
- **textgrad_reduce**: reads the prompt and the changes of several steps (``[r.n] add to <part>:
  <line>``); it keeps by reference every distinct lesson the prompt lacks, specific ones first, up
  to the ACE reducer's capacity (``reducer_capacity``), as the ACE reducer merges curators' ops;
  it keeps removals as proposed and writes nothing anew.

The loss and the gradient judge an attempt by the world
(:meth:`~combee_fast.sim.world.TaskWorld.verdict`: its answer graded by the task, or the reward
its prompt reports when the question has no target) and the gradient names the world's lessons
(:meth:`~combee_fast.sim.world.TaskWorld.named_lesson`); in a world where the endpoint plays the
agent the loss names what the attempt left behind in the world's words. Fractional counts are
rounded by a seeded draw. No world parameter is added or changed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from combee_fast.sim.instructed import capacity, instruction_lessons, kept_count, solve
from combee_fast.sim.responders import RoleResponder, SimRequest
from combee_fast.sim.world import (
    Question, TaskWorld, fresh_lessons, json_lines, json_reply, lesson_key, lesson_unit, noise_lesson,
    seed_of, tagged, uniform,
)
from combee_fast.textgrad.calls import FORWARD_ROLE, GRADIENT_ROLE, LOSS_ROLE, REDUCE_ROLE, STEP_ROLE

_NUMBERED = re.compile(r"^\((\d+)\) \[([^\]]+)\] (.*)$", re.MULTILINE)
_CHANGE = re.compile(r"^\[(\d+\.\d+)\] (remove|add to [^:]+): (.*)$", re.MULTILINE)
_PROPOSAL = re.compile(r"^### Proposal \d+$", re.MULTILINE)
DEFAULT_PART = "system_prompt"

_REWARD = re.compile(r"^Reward: ([0-9.]+)", re.MULTILINE)


def _verdict(world: TaskWorld, question: Question, prompt: str) -> tuple[bool, str]:
    """The attempt a loss or gradient prompt shows, judged by the world: its model answer, or
    the reward it reports."""
    reward = _REWARD.search(prompt)
    return world.verdict(question, tagged(prompt, "model_answer") or "", reward is not None and float(reward[1]) >= 1.0)


def loss(world: TaskWorld, request: SimRequest) -> str:
    """The evaluator's verdict and a critique naming the unit that went wrong (module docstring)."""
    prompt, seed = request.last_user_content, seed_of(request)
    question = world.question(tagged(prompt, "question") or "")
    if question is None:
        return json_reply({"verdict": "incorrect", "critique": "The question is unknown to me."})
    right, unit = _verdict(world, question, prompt)
    if right:
        return json_reply({"verdict": "correct",
                           "critique": "The answer is correct. " + world.prose(3, "tg-loss", seed)})
    wrong = world.agent.words.result if world.agent is not None else f"The answer {tagged(prompt, 'model_answer') or ''!r}"
    return json_reply({"verdict": "incorrect",
                       "critique": f"{wrong} is wrong: the step that handles {unit} went wrong. "
                       + world.prose(3, "tg-loss", seed)})


def gradient(world: TaskWorld, request: SimRequest) -> str:
    """The line the prompt should gain, about the unit the world finds (module docstring)."""
    prompt, seed = request.last_user_content, seed_of(request)
    question = world.question(tagged(prompt, "question") or "")
    if question is None:
        return json_reply({"diagnosis": "The question is unknown to me.", "change": ""})
    _, unit = _verdict(world, question, prompt)
    text = question.example.input
    right = (tagged(prompt, "critique") or "").split(":", 1)[0].strip() == "correct"
    naming = world.params.name_unit_after_right if right else world.params.name_unit_after_wrong
    if not world.params.informative_reflections:
        change = noise_lesson(int(uniform("facet", seed, text) * world.params.facets_per_unit))
    else:
        change = world.named_lesson(unit, uniform("tg-gradient", seed, text) < naming, text, seed)
    return json_reply({"diagnosis": f"The prompt says nothing about {unit}. " + world.prose(2, "tg-gradient", seed),
                       "change": change})


def step(world: TaskWorld, request: SimRequest) -> str:
    """The optimizer's update (module docstring)."""
    prompt, seed = request.last_user_content, seed_of(request)
    numbered = _NUMBERED.findall(tagged(prompt, "current_prompt") or "")
    held = {lesson_key(line) for line in instruction_lessons("\n".join(line for _, _, line in numbered))}
    part = numbered[0][1] if numbered else DEFAULT_PART
    rows = json_lines(tagged(prompt, "feedback") or "")
    fresh = sorted(fresh_lessons((str(row.get("change", "")) for row in rows), held),
                   key=lambda lesson: lesson_unit(lesson) != "General")
    expected = len(fresh) * capacity(len(rows), world.params.curator_curve) / max(1, len(rows))
    kept = fresh[: kept_count(expected, "tg-step", seed)]
    return json_reply({"reasoning": f"{len(kept)} new lines from {len(rows)} gradients. "
                       + world.prose(3, "tg-step", seed),
                       "remove": [], "add": [{"part": part, "line": lesson} for lesson in kept]})


def reduce(world: TaskWorld, request: SimRequest) -> str:
    """Several steps' changes merged by reference (module docstring)."""
    prompt, seed = request.last_user_content, seed_of(request)
    held = {lesson_key(line) for line in instruction_lessons(tagged(prompt, "current_prompt") or "")}
    proposals = tagged(prompt, "proposals") or ""
    first_ref: dict[str, str] = {}
    removals = []
    for ref, kind, line in _CHANGE.findall(proposals):
        if kind == "remove":
            removals.append(ref)
        else:
            first_ref.setdefault(line.strip(), ref)
    fresh = fresh_lessons(first_ref, held)
    specific_first = sorted(fresh, key=lambda lesson: lesson_unit(lesson) == "General")
    keep = [first_ref[lesson] for lesson in specific_first[: int(world.params.reducer_capacity)]]
    read = len(_PROPOSAL.findall(proposals))
    return json_reply({"reasoning": f"Merging {len(fresh)} new lines from {read} proposals, keeping {len(keep)}. "
                       + world.prose(3, "tg-reduce", seed), "keep": [*keep, *removals], "add": []})


RESPONDERS: Mapping[str, RoleResponder] = {FORWARD_ROLE: solve, LOSS_ROLE: loss, GRADIENT_ROLE: gradient,
                                           STEP_ROLE: step, REDUCE_ROLE: reduce}
"""TextGrad's roles as the simulated endpoint answers them, by request role name."""
