"""A shell environment of your own, with partial credit, for the terminal task's chores.

Run it with ``combee learn --task terminal --env shell_env:make_env`` from the folder holding this
file (``docs/environments.md`` walks through it). Each episode gets a fresh sandbox holding the
chore's files; the agent's one tool, ``run``, runs a shell command there; at the end every check
of the chore is tried on the final files, and the reward is the share of checks that hold, with
feedback naming each one that does not (what the learner reflects on).
"""

from __future__ import annotations

import json

from combee_fast.environments import (Example, Observation, Sandboxes, SandboxSession, Score, SetupFile, Tool,
                                      ToolCall)
from combee_fast.tasks.terminal.chores import Chore, failed_check
from combee_fast.tasks.terminal.task import TerminalTask

RUN = Tool("run", "Run one shell command in the working directory and see its exit status and output.",
           {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})

CHORES = TerminalTask()
"""Where each example's chore (its files and checks) is looked up."""


class ShellEnvironment:
    """One episode: a sandbox with the chore's files, the ``run`` tool, partial credit at the end."""

    def __init__(self, sandboxes: Sandboxes) -> None:
        self.sandboxes = sandboxes
        self.session: SandboxSession | None = None
        self.chore: Chore | None = None

    def tools(self) -> list[Tool]:
        return [RUN]

    async def reset(self, task: Example) -> str:
        self.chore = CHORES.chore(task)
        files = [SetupFile(spec.path, spec.data(), spec.permissions, spec.age_s) for spec in self.chore.files]
        self.session = await self.sandboxes.open(files)
        return "You are in the working directory. Files: " + ", ".join(f.path for f in files) + "."

    async def step(self, action: ToolCall) -> Observation:
        assert self.session is not None, "reset comes first"
        try:
            arguments = json.loads(action.arguments or "{}")
        except ValueError:
            arguments = None
        command = arguments.get("command") if isinstance(arguments, dict) and action.name == "run" else None
        if not isinstance(command, str) or not command.strip():
            return Observation('the one tool is run, with {"command": "..."}', "bad_action")
        result = await self.session.run(command, timeout_s=self.sandboxes.step_timeout_s)
        return Observation(f"exit status {result.exit_code}\n{result.output}", result.kind)

    async def check(self) -> Score:
        assert self.session is not None and self.chore is not None, "reset comes first"
        state = await self.session.final_state()
        problems = [p for p in (failed_check(check, state) for check in self.chore.checks) if p is not None]
        if not problems:
            return Score(1.0, "every check passed")
        share = 1 - len(problems) / len(self.chore.checks)
        return Score(share, "not done: " + "; ".join(problems))

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


def make_env(sandboxes: Sandboxes) -> ShellEnvironment:
    """The ``--env`` factory: called once per episode with the run's sandboxes."""
    return ShellEnvironment(sandboxes)
