"""The panel task's simulated world (the task's ``sim_world``): the endpoint plays the agent. It
names no learner: each learner's responders read what the world knows, and its agent takes the
agent's turns in whichever learner's serving role they are made. A model, not evidence about
real LLMs.

Each chore's knowledge unit is its family (heating, lighting, ventilation), which has two lessons
(:data:`PANEL_LESSONS`). The agent's first turn decides, once per episode, whether it knows the
family's rule (:func:`~combee_fast.sim.agent_world.knows_the_way`: a line of the learned context
states a lesson about the family, or the retry's reflection names it): it then sets the right
value with probability ``known_accuracy``, else with the base accuracy; otherwise it sets the
chore's usual mistake. Once the dial is set, it finishes.
"""

from __future__ import annotations

from collections.abc import Sequence

from combee_fast.protocols.tasks import Task
from combee_fast.schema import Example
from combee_fast.sim.agent_world import (action_reply, actions, context_lines, context_of, finish_reply, knows_the_way,
                                         states_lesson_of)
from combee_fast.sim.responders import RoleTable, SimReply, SimRequest
from combee_fast.sim.world import EpisodeWords, Lessons, TaskWorld, WorldParams, seed_of, tagged, world_params

from tests.worlds.panel import Chore, PanelTask

PANEL_PARAMS = WorldParams(base_accuracy=0.3, facets_per_unit=2)
"""A third of the chores right with no lesson; two lessons a family."""

FAMILY_LESSONS = {
    "Heating": ("an empty building is kept at frost, never off, so the pipes do not freeze",
                "rooms in use at night are heated at eco, not comfort"),
    "Lighting": ("cleaning after hours needs the lights at half, not full",
                 "a film is shown with the lights dim, never off, for the exits"),
    "Ventilation": ("a solvent bench needs the fan at purge while it runs",
                    "a full meeting room needs the fan at high; auto lags behind"),
}
"""What the world teaches about each family: its rules, in the world's words."""

PANEL_LESSONS = Lessons(lambda family: FAMILY_LESSONS[family], (
    "Read the occasion before touching a dial.",
    "Set the dial once, to the value the occasion needs, then stop.",
), section="strategies_and_hard_rules")
"""What the panel world teaches: each family's rules, and two generic ones."""

PANEL_WORDS = EpisodeWords(
    thing="chore", outcomes=("The dial was set wrong.", "The dial was set right."),
    cause="The agent did not know the rule for {unit}.", remedy="Apply the rule for {unit} before setting the dial.",
    result="The dial's final setting",
    filler=("The occasion was read first.", "The dial was set once.", "The panel showed the new value."),
    filler_key="panel-prose")
"""How the panel world speaks of its episodes."""


class PanelAgent:
    """The agent's turns on the chores ``chores`` (by instruction; module docstring)."""

    words = PANEL_WORDS

    def __init__(self, chores: dict[str, Chore]) -> None:
        self.chores = chores

    def turn(self, world: TaskWorld, request: SimRequest) -> str | SimReply | None:
        """The reply to one turn of the built-in agent; None for a request that is none."""
        system = context_of(request)
        if system is None:
            return None
        first = next((m.content for m in request.messages if m.role == "user"), "")
        chore = self.chores.get((tagged(first, "task") or "").strip())
        if chore is None:
            return action_reply(request, "finish", {"answer": "unknown chore"}, "This chore is unknown to me.")
        seed = seed_of(request)
        lines, citable = context_lines(system)
        about = [(bid, text) for bid, text in lines if states_lesson_of(text, chore.family, world.lessons)]
        if any(name == "set" for name, _ in actions(request.messages)):
            return finish_reply(request, about, lines, citable, world.lessons, "The dial is set.")
        known = knows_the_way(world, chore.family, about, lines, tagged(first, "reflection") or "", seed,
                              chore.instruction)
        value = chore.right if known else chore.wrong
        return action_reply(request, "set", {"value": value}, f"Setting the dial for this {chore.family.lower()} chore.")


def panel_world(task: Task, roles: RoleTable, *, splits: Sequence[str] = (), variant: str = "default") -> TaskWorld:
    """The world of the panel ``task`` knowing the chores of ``splits`` (default: all), as the world
    ``variant`` has it, answering ``roles`` (module docstring)."""
    if not isinstance(task, PanelTask):
        raise TypeError(f"panel_world plays the panel task, not {type(task).__name__}")
    examples = [e for s in (splits or task.split_names()) for e in task.load(s).examples]

    def units(example: Example) -> tuple[str, ...]:
        return (example.meta["family"],)

    return TaskWorld(task, examples, world_params(PANEL_PARAMS, variant), roles=roles, units=units,
                     lessons=PANEL_LESSONS, agent=PanelAgent({e.input: task.chore(e) for e in examples}))
