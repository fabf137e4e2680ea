"""The terminal task's environment: one sandbox session per episode, one tool.

``run(command)`` runs one shell command in the working directory ``/work`` and answers with its
exit status and output (the first ``output_kb``; the agent's prompt shows less), after the
task's ``tool_wait_s`` (none by default). A command that
hit a sandbox wall is answered with the wall's name as the observation's error. ``check`` grades
the final working directory with the chore's checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

import msgspec

from combee_fast.sandbox.sessions import Sandboxes, SandboxSession
from combee_fast.errors import SandboxError
from combee_fast.schema import Example, Observation, Tool, ToolCall
from combee_fast.tasks.base import Score
from combee_fast.tasks.terminal.chores import Chore, grade


class ChoreSource(Protocol):
    """What the environment needs of its task (:class:`~combee_fast.tasks.terminal.task.TerminalTask`):
    each example's chore, and the seconds each ``run`` step also waits."""

    tool_wait_s: float

    def chore(self, example: Example) -> Chore: ...


RUN_TOOL = Tool(
    "run",
    "Run one shell command (POSIX sh) in the working directory /work and see its exit status and output. "
    "coreutils, findutils, grep, sed, awk, tar and python3 are available; there is no network.",
    {"type": "object", "properties": {"command": {"type": "string", "maxLength": 400}}, "required": ["command"],
     "additionalProperties": False},
)
"""The environment's one tool."""


class TerminalEnvironment:
    """An :class:`~combee_fast.protocols.Environment` over one sandbox session (module docstring)."""

    def __init__(self, task: ChoreSource, sandboxes: Sandboxes) -> None:
        self._task = task
        self._sandboxes = sandboxes
        self._session: SandboxSession | None = None
        self._chore: Chore | None = None

    def tools(self) -> Sequence[Tool]:
        return (RUN_TOOL,)

    async def reset(self, task: Example) -> str:
        chore = self._task.chore(task)
        self._chore = chore
        self._session = await self._sandboxes.open(chore.setup())
        listing = ", ".join(f"{spec.path} ({len(spec.data())} bytes)" for spec in chore.files)
        return f"You are in /work. Files: {listing or '(none)'}."

    async def step(self, action: ToolCall) -> Observation:
        if self._session is None:
            return Observation("the environment was not reset", "env_error")
        if action.name != "run":
            return Observation(f"unknown tool {action.name!r}; the tool is 'run'", "bad_action")
        try:
            arguments = msgspec.json.decode(action.arguments or "{}")
        except msgspec.DecodeError:
            arguments = None
        command = arguments.get("command") if isinstance(arguments, dict) else None
        if not isinstance(command, str) or not command.strip():
            return Observation("the run tool takes {\"command\": \"...\"}", "bad_action")
        if self._task.tool_wait_s:
            await asyncio.sleep(self._task.tool_wait_s)
        result = await self._session.run(command, timeout_s=self._sandboxes.step_timeout_s)
        text = f"exit status {result.exit_code}\n{result.output}"
        if result.output_bytes > len(result.output.encode()):
            text += f"\n[output cut: {result.output_bytes} bytes in all]"
        if result.kind is not None:
            text += f"\n[sandbox: {result.kind}]"
        return Observation(text, result.kind)

    async def check(self) -> Score:
        if self._session is None or self._chore is None:
            return Score(0.0, "the environment was not reset")
        try:
            state = await self._session.final_state()
        except SandboxError as exc:
            return Score(0.0, f"the final state could not be read: {exc}")
        reward, feedback = grade(self._chore, state)
        return Score(reward, feedback)

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
