"""How the simulated endpoint answers the memo learner's roles: :data:`RESPONDERS` (request role
name -> ``responder(world, request)``), given by its kind as ``responders``.

- **memo_act**: an answer under the memo in the system message, read as the world reads any
  learned instruction (:func:`~combee_fast.sim.instructed.solve`). In a world where the endpoint
  plays the agent, an agent's turn in this serving role is the world's agent's to answer.
- **memo_note**: the attempt judged by the world (graded by the task, or by the outcome its
  prompt reports), and the lesson it teaches named in the world's words, about the attempt's
  unit with the world's probability of naming it after a right or a wrong attempt, else a
  generic one.
"""

from __future__ import annotations

from collections.abc import Mapping

from combee_fast.memo.learner import ACT, NOTE
from combee_fast.sim.instructed import solve
from combee_fast.sim.responders import RoleResponder, SimRequest
from combee_fast.sim.world import TaskWorld, json_reply, seed_of, tagged, uniform


def note(world: TaskWorld, request: SimRequest) -> str:
    """The lesson one attempt teaches (module docstring)."""
    prompt, seed = request.last_user_content, seed_of(request)
    question = world.question(tagged(prompt, "question"))
    if question is None:
        return json_reply({"note": ""})
    right, unit = world.verdict(question, tagged(prompt, "answer") or "", "Outcome: correct" in prompt)
    naming = world.params.name_unit_after_right if right else world.params.name_unit_after_wrong
    text = question.example.input
    return json_reply({"note": world.named_lesson(unit, uniform("memo-note", seed, text) < naming, text, seed)})


RESPONDERS: Mapping[str, RoleResponder] = {ACT.key: solve, NOTE.key: note}
"""The memo learner's roles as the simulated endpoint answers them, by request role name."""
