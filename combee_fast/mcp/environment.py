"""Any MCP tool server as an :class:`~combee_fast.protocols.Environment`: :class:`McpEnvironment`.

One server process (and one SDK session, :class:`~combee_fast.mcp.client.McpConnection`) per
episode: started by :meth:`~McpEnvironment.reset`, stopped by :meth:`~McpEnvironment.close`
(which the executor always calls), so episodes share no state and a broken server breaks only
its own episode. The agent's tools are the server's ``list_tools`` (each input JSON Schema its
arguments), less the tools of :attr:`McpServer.hidden_tools` and the per-episode state argument:
when a tool declares :attr:`McpServer.state_key_arg` (the tau2 servers' ``state_key``), every
call carries the episode's own key (fresh per episode) and the agent never sees it.

Each step is one ``call_tool`` within the step limit; its observation is the call's text, cut
to :attr:`McpServer.output_chars` (the transport already refuses any message over
``max_line_bytes``). A tool that answers with an error, or a call the server refuses, is a
``bad_action`` (the episode goes on); a connection that failed is the observation's error, one
of :data:`~combee_fast.mcp.client.FAILURE_KINDS` (the episode fails with that kind, the run goes
on). :meth:`~McpEnvironment.check` calls the server's :attr:`McpServer.check_tool` when it lists
one (its JSON ``{"reward", "feedback"}`` or a bare number), else the reward is 0 with feedback
saying there is no checker; a check tool that fails or answers anything but a finite number fails
the episode (``mcp_bad_check``, or the connection's kind), never a silent 0. Tasks with their own
scoring subclass it (:mod:`combee_fast.tasks.tau2`).
"""

from __future__ import annotations

import asyncio
import math
import shlex
import shutil
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from combee_fast.engine.child_variables import child_variables
from combee_fast.mcp import ENV_PREFIX
from combee_fast.errors import ConfigError, McpFailure, McpToolError
from combee_fast.mcp.client import CallResult, ListedTool, McpConnection
from combee_fast.sandbox.scratch import new_folder, sweep_abandoned
from combee_fast.schema import Example, Observation, Tool, ToolCall
from combee_fast.tasks.base import Score

SCRATCH_KIND = "combee-mcp"
"""The scratch folders of MCP servers (the system's temporary folder; :mod:`combee_fast.sandbox.scratch`):
removed when their episode ends or their process exits; those of a process killed before it
could are removed by the next process's first episode."""

_swept: list[bool] = []
"""Whether this process has swept the scratch folders killed processes left (once)."""

SCRATCH = "{scratch}"
"""In :attr:`McpServer.env` values: the episode's own scratch directory (removed on close)."""


@dataclass(frozen=True)
class McpServer:
    """How to run one MCP stdio server per episode. ``argv``: its command; ``env``: variables set
    for it over the few of ours every child keeps (:mod:`combee_fast.engine.child_variables`: no
    API key; ``{scratch}`` in a value: the episode's scratch directory, also its working
    directory); ``state_key_arg``: the argument that carries per-episode state, injected when a tool
    declares it (None: none); ``hidden_tools``: tools the agent is not offered; ``check_tool``:
    the tool that grades the final state (None: none); ``output_chars``: most characters of an
    observation; ``max_line_bytes``: the longest message the server may write;
    ``open_timeout_s``: seconds to start and list tools."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    state_key_arg: str | None = "state_key"
    hidden_tools: frozenset[str] = frozenset()
    check_tool: str | None = "check"
    output_chars: int = 16_000
    max_line_bytes: int = 1_000_000
    max_tools_bytes: int = 64_000
    open_timeout_s: float = 30.0


def server_of_env(value: str) -> McpServer:
    """The server of ``--env mcp:COMMAND``; ConfigError naming it when COMMAND is empty or not
    shell words."""
    command = value[len(ENV_PREFIX):]
    try:
        argv = tuple(shlex.split(command))
    except ValueError as exc:
        raise ConfigError(f"--env {value!r}: the command is not shell words ({exc})") from None
    if not argv:
        raise ConfigError(f"--env {value!r}: give the server's command after 'mcp:'")
    return McpServer(argv)


def say_where_servers_run(value: str) -> None:
    """The one line a run with ``--env mcp:COMMAND`` says at start: its servers are not sandboxed."""
    print(f"combee: --env {value}: each episode's MCP server runs outside the sandbox, as this user, in a "
          f"scratch folder of its own and without the engine's API keys (docs/trust.md): use servers you trust",
          file=sys.stderr)


def _agent_schema(schema: dict[str, Any], hidden: str | None) -> dict[str, Any]:
    properties = {k: v for k, v in (schema.get("properties") or {}).items() if k != hidden}
    required = [k for k in schema.get("required") or () if k != hidden]
    out = {**schema, "type": "object", "properties": properties}
    if "required" in schema:
        out["required"] = required
    return out


class McpEnvironment:
    """An environment over one MCP server per episode (module docstring); ``step_timeout_s``:
    each call's limit."""

    def __init__(self, server: McpServer, *, step_timeout_s: float) -> None:
        self.server = server
        self.step_timeout_s = step_timeout_s
        self._connection: McpConnection | None = None
        self._listed: dict[str, ListedTool] = {}
        self._tools: tuple[Tool, ...] = ()
        self._scratch: str | None = None
        self.state_key: str = ""
        self.failure: McpFailure | None = None

    def tools(self) -> Sequence[Tool]:
        return self._tools

    def _keyed(self, name: str) -> bool:
        arg = self.server.state_key_arg
        listed = self._listed.get(name)
        return arg is not None and listed is not None and arg in (listed.input_schema.get("properties") or {})

    def new_state_key(self, task: Example) -> str:
        """The episode's state key (fresh per episode)."""
        return f"combee/{task.id}/{uuid.uuid4().hex}"

    async def reset(self, task: Example) -> str:
        if not _swept:
            _swept.append(True)
            await asyncio.to_thread(sweep_abandoned, SCRATCH_KIND, None)
        self._scratch = str(new_folder(SCRATCH_KIND, None))
        env = child_variables({k: v.replace(SCRATCH, self._scratch) for k, v in self.server.env.items()})
        self._connection = McpConnection(self.server.argv, env=env, cwd=self._scratch,
                                         max_line_bytes=self.server.max_line_bytes,
                                         open_timeout_s=self.server.open_timeout_s)
        listed = await self._connection.open()
        self._listed = {tool.name: tool for tool in listed}
        self.state_key = self.new_state_key(task)
        hidden = self.server.hidden_tools | ({self.server.check_tool} if self.server.check_tool else set())
        self._tools = tuple(Tool(t.name, t.description, _agent_schema(t.input_schema, self.server.state_key_arg))
                            for t in listed if t.name not in hidden)
        size = len(msgspec.json.encode(self._tools))
        if size > self.server.max_tools_bytes:
            raise McpFailure("mcp_tools_too_large", f"its {len(self._tools)} tools take {size:,} bytes as JSON, over "
                             f"the {self.server.max_tools_bytes:,} every model request of an episode may carry")
        return await self.first_observation(task)

    async def first_observation(self, task: Example) -> str:
        """What the agent sees first (default: the tools it has)."""
        return "Tools: " + ", ".join(t.name for t in self._tools) + "."

    async def call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """Call ``name`` with the episode's state key added when the tool takes one;
        :class:`McpToolError`/:class:`McpFailure` as :meth:`McpConnection.call`."""
        if self._connection is None:
            raise McpFailure("mcp_error", "the environment was not reset")
        arg = self.server.state_key_arg
        if arg is not None and self._keyed(name):
            arguments = {**arguments, arg: self.state_key}
        return await self._connection.call(name, arguments, timeout_s=self.step_timeout_s)

    def observed(self, result: CallResult) -> str:
        """The observation text of a call's result (default: its text)."""
        return result.text

    async def step(self, action: ToolCall) -> Observation:
        if action.name not in {t.name for t in self._tools}:
            return Observation(f"unknown tool {action.name!r}; the tools are "
                               f"{', '.join(t.name for t in self._tools)}", "bad_action")
        try:
            arguments = msgspec.json.decode(action.arguments or "{}")
        except msgspec.DecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            return Observation(f"{action.name} takes a JSON object of arguments", "bad_action")
        arguments.pop(self.server.state_key_arg, None)
        try:
            result = await self.call(action.name, arguments)
        except McpToolError as exc:
            return Observation(f"the server refused the call: {str(exc)[:500]}", "bad_action")
        except McpFailure as exc:
            self.failure = exc
            return Observation(f"the MCP server failed: {exc.message[:500]}", exc.kind)
        text = self.observed(result)
        if len(text) > self.server.output_chars:
            text = text[: self.server.output_chars] + f"\n[output cut: {len(text)} characters in all]"
        return Observation(text, "bad_action" if result.is_error else None)

    async def check(self) -> Score:
        """The server's grade of the episode (module docstring); :class:`McpFailure` when there is
        none to give."""
        tool = self.server.check_tool
        if tool is None or tool not in self._listed:
            return Score(0.0, "not checked: the MCP server lists no check tool")
        try:
            result = await self.call(tool, {})
        except McpToolError as exc:
            raise McpFailure("mcp_bad_check", f"the check tool refused the call: {str(exc)[:200]}") from None
        try:
            graded = msgspec.json.decode(result.text)
        except msgspec.DecodeError:
            graded = None
        if isinstance(graded, dict):
            value, feedback = graded.get("reward"), str(graded.get("feedback", ""))
        else:
            value, feedback = graded, ""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise McpFailure("mcp_bad_check", f"the check tool answered {result.text[:200]!r}, not a reward")
        return Score(float(min(1.0, max(0.0, value))), feedback)

    async def close(self) -> None:
        try:
            if self._connection is not None:
                connection, self._connection = self._connection, None
                await connection.close()
        finally:
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
                self._scratch = None
