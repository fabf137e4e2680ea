"""The worlds a simulated endpoint plays: one task's, or several tasks' behind one server.

:func:`task_world` is the world of one task as the in-process simulated endpoint builds it (a
:class:`~combee_fast.sim.world.TaskWorld` answering every built-in learner's roles,
:func:`built_in_roles`; for the terminal task its own, :func:`~combee_fast.sim.terminal.terminal_world`,
in which the endpoint plays the agent; for the tau2 tasks :func:`~combee_fast.sim.tau2.tau2_world`,
in which it plays the agent and the customer), so a standalone ``combee sim-server --world TASK``
answers exactly what a run without an endpoint would get.

:class:`TaskWorlds` answers for several tasks at once (``combee sim-server`` with no ``--world``
plays every bundled task): each request goes to the world that knows the question its prompt
names (the ``<question>`` of a generator, reflector, GEPA solver or TextGrad forward, loss or
gradient prompt; the first graded example of a GEPA proposer prompt). A prompt that names no
question (curator, reducer, GEPA aggregator, TextGrad step and merge: they read lessons, not
questions) goes to the first world; those roles read only the curator curve and the reducer
capacity, which every bundled world shares.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from combee_fast.protocols.tasks import Task
from combee_fast.sim import ace, instructions, textgrad
from combee_fast.sim.responders import RoleResponder, SimReply, SimRequest, WithRoles
from combee_fast.sim.world import TaskWorld, json_lines
from combee_fast.tasks.registry import get_task

BUNDLED_TASKS = ("formula", "finer")
"""The tasks whose data ships with the package: what ``combee sim-server`` plays by default."""

_QUESTION = re.compile(r"<question>\n(.*?)\n?</question>", re.DOTALL)
_EXAMPLES = re.compile(r"<examples>\n(.*?)\n?</examples>", re.DOTALL)


def built_in_roles() -> dict[str, RoleResponder]:
    """Every built-in learner's responders, by request role name: ACE's (:mod:`.ace`), GEPA's
    (:mod:`.instructions`) and TextGrad's (:mod:`.textgrad`)."""
    return {**ace.ROLES, **instructions.ROLES, **textgrad.ROLES}


def task_world(task: Task, *, variant: str = "default",
               roles: Mapping[str, RoleResponder] | None = None) -> TaskWorld | WithRoles:
    """The world of ``task`` (every split's examples), as the in-process simulated endpoint plays
    it, answering also ``roles`` (a plugin learner's responders, by request role); ValueError for
    an unknown ``variant``."""
    if task.name == "terminal":
        from combee_fast.sim.terminal import terminal_world

        world = terminal_world(task, variant=variant)
    elif task.name in ("tau2-retail", "tau2-airline"):
        from combee_fast.sim.tau2 import tau2_world

        world = tau2_world(task, variant=variant)
    else:
        world = TaskWorld.for_task(task, variant=variant)
    return WithRoles(world, roles) if roles else world


def asked_question(request: SimRequest) -> str | None:
    """The question a request's prompt names, stripped; None when it names none."""
    for message in request.messages:
        match = _QUESTION.search(message.content)
        if match:
            return match[1].strip()
        examples = _EXAMPLES.search(message.content)
        if examples:
            for row in json_lines(examples[1]):
                if isinstance(row.get("question"), str):
                    return row["question"].strip()
    return None


class TaskWorlds:
    """One :class:`~combee_fast.sim.server.Responder` over several task worlds (module docstring)."""

    def __init__(self, worlds: Sequence[TaskWorld]) -> None:
        if not worlds:
            raise ValueError("TaskWorlds needs at least one world")
        self.worlds = tuple(worlds)

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(world.task.name for world in self.worlds)

    def plays(self) -> tuple[str, ...]:
        """The request roles some world answers as their learner's model would."""
        return tuple(sorted({role for world in self.worlds for role in world.plays()}))

    def world_for(self, request: SimRequest) -> TaskWorld:
        """The world that knows the request's question (the first world when it names none or no
        world knows it: that world then answers as for any unknown question)."""
        question = asked_question(request)
        if question is not None:
            for world in self.worlds:
                if world.knows(question):
                    return world
        return self.worlds[0]

    def respond(self, request: SimRequest) -> str | SimReply:
        return self.world_for(request).respond(request)


def bundled_worlds(*, variant: str = "default") -> TaskWorlds:
    """Every bundled task's world behind one responder (ValueError for an unknown ``variant``)."""
    return TaskWorlds([TaskWorld.for_task(get_task(name), variant=variant) for name in BUNDLED_TASKS])
