"""A tau2 domain's environment: the domain's MCP server per episode, the customer, the checker.

:class:`Tau2Environment` is an :class:`~combee_fast.mcp.environment.McpEnvironment` over the
domain's wheel server (:mod:`.domain`), its state in the episode's own state key (reset with the
server's ``reset_state`` at :meth:`~Tau2Environment.reset`) and in the episode's scratch directory;
the control tools (``reset_state``, ``get_call_log``) are hidden from the agent. Each observation
is tau2's tool message: the content the tool answered (``Error: ...`` when it refused).

The agent talks to the customer with one more tool, ``respond``: its message is kept (the
communication check reads it) and the observation is the customer's answer, until the customer
ends the conversation with one of tau2's stop tokens (:data:`STOP_TOKENS`). The customer is a
:class:`Customer`: in a run, the ``user`` role's model (:class:`~combee_fast.tasks.tau2.user.ModelCustomer`,
given the engine's chat call by :meth:`~Tau2Environment.use_chat`; a failed call fails the episode as
``user_call``), its calls' usage attached to the step that waited for them (the opening message's
to the first step; :attr:`~combee_fast.schema.Observation.calls`, so the ledger counts them as
``user``'s) and their seconds counted in that step's environment seconds; driven by hand without one (:class:`StatedCustomer`), the
customer states the scenario's request once, up front, and has nothing more to say.

:meth:`~Tau2Environment.check` reads the server's own log of the episode's calls
(``get_call_log``) and grades them with :func:`~combee_fast.tasks.tau2.scoring.grade` in a thread
(the replays copy the whole database).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec

from combee_fast.errors import CustomerFailed, McpFailure, McpToolError
from combee_fast.mcp.client import CallResult
from combee_fast.mcp.environment import SCRATCH, McpEnvironment, McpServer
from combee_fast.schema import Example, Observation, Tool, ToolCall, Usage
from combee_fast.tasks.base import Score
from combee_fast.tasks.tau2.domain import Domain, Instructions, Tau2Task
from combee_fast.tasks.tau2.scoring import grade
from combee_fast.tasks.tau2.user import ChatCall, ModelCustomer

RESPOND = Tool(
    "respond",
    "Send one message to the customer and read their answer. Everything the customer should know "
    "(results, amounts, confirmations) must be said with this tool.",
    {"type": "object", "properties": {"message": {"type": "string", "maxLength": 2000}}, "required": ["message"],
     "additionalProperties": False},
)
"""The agent's tool to talk to the customer."""

STOP_TOKENS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
"""tau2's tokens by which the customer ends the conversation."""

CONTROL_TOOLS = frozenset({"reset_state", "get_call_log"})

TASK_META = "tau2_task"
"""``Example.meta`` key: the tau2 task id."""

POLICY_META = "system"
"""``Example.meta`` key: text the agent puts first in its system prompt (the domain's policy)."""


class Customer(Protocol):
    """The customer of one episode: their opening message, then an answer to each of the agent's."""

    async def open(self, task: Tau2Task) -> str: ...

    async def reply(self, message: str) -> str: ...


def scenario_text(task: Tau2Task) -> str:
    """The customer's request as their scenario states it (reason for the call, what they know)."""
    instructions = task.user_scenario.instructions
    if isinstance(instructions, Instructions):
        parts = [instructions.reason_for_call, instructions.known_info]
        return "\n".join(part.strip() for part in parts if part)
    return str(instructions or "")


class StatedCustomer:
    """A customer who states the scenario's request once and says nothing more (module docstring)."""

    async def open(self, task: Tau2Task) -> str:
        return scenario_text(task)

    async def reply(self, message: str) -> str:
        return "(the customer has nothing more to say; finish when the request is handled) ###STOP###"


class Tau2Environment(McpEnvironment):
    """One tau2 episode (module docstring)."""

    def __init__(self, domain: Domain, *, step_timeout_s: float, customer: Customer | None = None) -> None:
        server = McpServer(domain.server_argv, env={domain.state_dir_variable: SCRATCH}, hidden_tools=CONTROL_TOOLS,
                           check_tool=None)
        super().__init__(server, step_timeout_s=step_timeout_s)
        self.domain = domain
        self.customer: Customer = customer or StatedCustomer()
        self.task: Tau2Task | None = None
        self.messages: list[str] = []
        self.stopped = False
        self._customer_counted = 0  # the customer's calls already attached to a step

    def use_chat(self, chat_call: ChatCall, seed: int) -> None:
        """The customer is the ``user`` role's model, called through ``chat_call``."""
        self.customer = ModelCustomer(chat_call, seed)

    def _new_customer_calls(self) -> list[Usage]:
        usages = getattr(self.customer, "usages", [])
        new = list(usages[self._customer_counted:])
        self._customer_counted = len(usages)
        return new

    def new_state_key(self, task: Example) -> str:
        return f"tau2/{self.domain.name}/{task.meta.get(TASK_META, 'x')}.{uuid.uuid4().hex}"

    def tools(self) -> Sequence[Tool]:
        return (*super().tools(), RESPOND)

    async def first_observation(self, task: Example) -> str:
        key = task.meta.get(TASK_META, "")
        if key not in self.domain.tasks:
            raise ValueError(f"tau2-{self.domain.name}: no task {key!r}")
        self.task = self.domain.tasks[key]
        result = await self.call("reset_state", {"domain": self.domain.name, "task_id": key})
        if result.is_error:
            raise McpFailure("mcp_error", f"reset_state refused: {result.text[:200]}")
        return "The customer says: " + await self.customer.open(self.task)

    def observed(self, result: CallResult) -> str:
        payload = result.structured if isinstance(result.structured, dict) else None
        message = payload.get("tau2_tool_message") if payload else None
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            return message["content"]
        return result.text

    async def step(self, action: ToolCall) -> Observation:
        started = time.perf_counter()
        observation = await self._step(action)
        new = self._new_customer_calls()
        if new:  # the customer's calls since the last step (the opening's, or this answer's)
            seconds = time.perf_counter() - started if observation.seconds is None else observation.seconds
            observation = msgspec.structs.replace(
                observation, seconds=seconds + sum(u.effective_latency_s for u in new), calls=tuple(new))
        return observation

    async def _step(self, action: ToolCall) -> Observation:
        if action.name != RESPOND.name:
            return await super().step(action)
        try:
            arguments = msgspec.json.decode(action.arguments or "{}")
        except msgspec.DecodeError:
            arguments = None
        message = arguments.get("message") if isinstance(arguments, dict) else None
        if not isinstance(message, str) or not message.strip():
            return Observation('respond takes {"message": "..."}', "bad_action")
        self.messages.append(message)
        if self.stopped:
            return Observation("The customer has left the conversation; finish now.")
        try:
            answer = await self.customer.reply(message)
        except CustomerFailed as exc:
            return Observation(str(exc), "user_call", seconds=0.0 if isinstance(self.customer, ModelCustomer) else None)
        if any(token in answer for token in STOP_TOKENS):
            self.stopped = True
        # a model customer's seconds are its calls' (added by step()); a hand-driven one's, the wall time
        return Observation("The customer says: " + answer, seconds=0.0 if isinstance(self.customer, ModelCustomer)
                           else None)

    async def agent_calls(self) -> list[tuple[str, dict[str, Any]]]:
        """The episode's business tool calls, in order, as the server logged them."""
        result = await self.call("get_call_log", {})
        payload = result.structured if isinstance(result.structured, dict) else msgspec.json.decode(result.text)
        calls = []
        for record in payload.get("calls", []):
            call = record.get("tau2_tool_call", {})
            if call.get("requestor", "assistant") == "assistant":
                calls.append((str(call.get("name", "")), dict(call.get("arguments") or {})))
        return calls

    async def check(self) -> Score:
        if self.task is None:
            return Score(0.0, "the environment was not reset")
        try:
            calls = await self.agent_calls()
        except (McpToolError, msgspec.DecodeError, AttributeError) as exc:  # a failed connection: its own kind
            raise McpFailure("mcp_bad_check", f"the server's call log could not be read ({exc})") from None
        return await asyncio.to_thread(grade, self.domain, self.task, calls, tuple(self.messages))
