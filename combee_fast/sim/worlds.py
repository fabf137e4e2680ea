"""The world the simulated endpoint plays for a task: the terminal task's own
(:class:`~combee_fast.sim.terminal.TerminalWorld`), else the task world with the GEPA roles
(:class:`~combee_fast.sim.instructions.InstructionWorld`)."""

from __future__ import annotations

from combee_fast.protocols import Task
from combee_fast.sim.instructions import InstructionWorld
from combee_fast.sim.world import TaskWorld


def world_for(task: Task, variant: str = "default") -> TaskWorld:
    """The world of ``task`` as ``variant`` has it (ValueError for an unknown variant)."""
    if task.name == "terminal":
        from combee_fast.sim.terminal import TerminalWorld

        return TerminalWorld.for_task(task, variant=variant)
    return InstructionWorld.for_task(task, variant=variant)
