"""The worlds a simulated endpoint plays: one task's, or several tasks' behind one server.

:func:`task_world` is the world of one task as the in-process simulated endpoint builds it, so a
standalone ``combee sim-server --world TASK`` answers exactly what a run without an endpoint would
get: the world a task names as its ``sim_world`` (a ``package.module:factory`` path, a built-in
task's and a user's alike, :data:`WorldFactory`; no world is picked by a task's name: the terminal
task's, :func:`~combee_fast.sim.terminal.terminal_world`, in which the endpoint plays the agent;
the tau2 tasks', :func:`~combee_fast.sim.tau2.tau2_world`, in which it plays the agent and the
customer; FiNER's, :func:`~combee_fast.sim.finer.finer_world`), else the calibrated world of its
examples (:meth:`TaskWorld.for_task <combee_fast.sim.world.TaskWorld.for_task>`), answering the
roles of the table it is handed (the learners', from their registry:
:func:`combee_fast.learners.role_table`; this package imports no learner).

:class:`TaskWorlds` answers for several tasks at once (``combee sim-server`` with no ``--world``
plays every bundled task): each request goes to the world that knows the question its prompt
names (the ``<question>`` of a generator, reflector, GEPA solver or TextGrad forward, loss or
gradient prompt; the first graded example of a GEPA proposer prompt). A prompt that names no
question (curator, reducer, GEPA aggregator, TextGrad step and merge: they read lessons, not
questions) goes to the first world that one of the lessons it holds is of (they write in that
world's words: its prose, its playbook section), else to the first world.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import cast

from combee_fast.errors import ConfigError
from combee_fast.plugins import load_path
from combee_fast.protocols.rollouts import EnvironmentTask
from combee_fast.protocols.tasks import Task
from combee_fast.sim.responders import RoleTable, SimReply, SimRequest
from combee_fast.sim.world import TaskWorld, json_lines
from combee_fast.tasks.registry import get_task

BUNDLED_TASKS = ("formula", "finer")
"""The tasks whose data ships with the package: what ``combee sim-server`` plays by default."""

_QUESTION = re.compile(r"<question>\n(.*?)\n?</question>", re.DOTALL)
_EXAMPLES = re.compile(r"<examples>\n(.*?)\n?</examples>", re.DOTALL)


WorldFactory = Callable[..., TaskWorld]
"""What a task's ``sim_world`` names: ``factory(task, roles, *, splits=(), variant="default")``,
the world of ``task`` knowing the examples of ``splits`` (default: those it plays), as the world
``variant`` has it, answering ``roles`` (:class:`~combee_fast.sim.responders.RoleTable`)."""


def world_factory(task: Task) -> WorldFactory:
    """The factory of ``task``'s world: the one its ``sim_world`` path names, else the calibrated
    world's (:meth:`TaskWorld.for_task <combee_fast.sim.world.TaskWorld.for_task>`).
    :class:`ConfigError` (one line naming the task and what to do) for a task solved by acting
    in an environment that names none: the calibrated world answers single calls and plays no
    agent, so every agent turn would be answered with no action (each a ``schema_mismatch``)."""
    path = getattr(task, "sim_world", None)
    if path is None:
        if isinstance(task, EnvironmentTask):
            raise ConfigError(f"no simulated world plays task {task.name!r}: its examples are solved by acting in an "
                              "environment and it names no sim_world (a world whose agent acts in it, as the terminal "
                              "task's does); serve it by a real model (--endpoint URL --model NAME), or give the task "
                              "a sim_world")
        return _calibrated
    return cast(WorldFactory, load_path(path, what=f"task {task.name!r}'s sim_world"))


def _calibrated(task: Task, roles: RoleTable, *, splits: Sequence[str] = (), variant: str = "default") -> TaskWorld:
    return TaskWorld.for_task(task, splits, variant=variant, roles=roles)


def task_world(task: Task, table: RoleTable, *, variant: str = "default") -> TaskWorld:
    """The world of ``task`` (every split's examples), as the in-process simulated endpoint plays
    it, answering the roles of ``table``; ValueError for an unknown ``variant``."""
    return world_factory(task)(task, table, variant=variant)


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
        """The world that knows the request's question; for a request that names none, the first
        world whose lessons its messages state (:meth:`TaskWorld.states_lesson`); else the first
        world (which then answers as for any unknown question)."""
        question = asked_question(request)
        if question is not None:
            return next((world for world in self.worlds if world.knows(question)), self.worlds[0])
        return next((world for world in self.worlds
                     if any(world.states_lesson(message.content) for message in request.messages)), self.worlds[0])

    def respond(self, request: SimRequest) -> str | SimReply:
        return self.world_for(request).respond(request)


def bundled_worlds(table: RoleTable, *, variant: str = "default") -> TaskWorlds:
    """Every bundled task's world, answering the roles of ``table``, behind one responder
    (ValueError for an unknown ``variant``)."""
    worlds = [world_factory(task)(task, table, variant=variant) for task in map(get_task, BUNDLED_TASKS)]
    return TaskWorlds(worlds)
