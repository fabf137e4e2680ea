"""The engine's side of an agent's model calls: :class:`GeneratorChat`.

Every call an agent makes goes through the session's role calls (the generator's client: its
concurrency cap, retries, replay cache, accounting in ``calls.json``, failures in
``errors.jsonl``), wherever the agent runs: the local backend calls it directly, the process
backend's workers send their requests to the parent, which calls it; the ray backend's actors
call the endpoints with clients of their own and the outcome of each call is counted here
afterwards (:meth:`~combee_fast.roles.agents.Agents.note_call`). :meth:`GeneratorChat.facts`
is what the agents need to know of that endpoint, found once (the tool-calling probe only when
asked for).
"""

from __future__ import annotations

import asyncio

from combee_fast.endpoint.calls import ChatRequest, ChatResult
from combee_fast.roles.agents import Agents
from combee_fast.roles.clients import RoleClients
from combee_fast.rollouts.episode import ChatFacts

AGENT_ROLE = "generator"
"""The role an agent's model calls are made as."""


class GeneratorChat:
    """Agent model calls through ``agents`` (module docstring); ``tool_calls``: the agent's
    setting (``auto`` probes the endpoint once)."""

    def __init__(self, agents: Agents, tool_calls: str) -> None:
        self.agents = agents
        self.tool_calls = tool_calls
        self._facts: ChatFacts | None = None
        self._lock = asyncio.Lock()

    async def __call__(self, request: ChatRequest) -> ChatResult:
        return await self.agents.call(request)

    async def facts(self, *, probe: bool) -> ChatFacts:
        """The generator endpoint's facts; with ``probe`` and ``tool_calls`` auto, tool calling
        is probed (once)."""
        async with self._lock:
            if self._facts is None:
                client = RoleClients.replicas_of(self.agents.clients.generator)[0]
                if self.tool_calls == "auto":
                    tools = await client.detect_tools() if probe else False
                else:
                    tools = self.tool_calls == "on"
                temperature, max_tokens, extra = self.agents.sampling_of(AGENT_ROLE)
                self._facts = ChatFacts(temperature, max_tokens, extra, client.capabilities.context_length, tools)
            return self._facts
