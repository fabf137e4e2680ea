"""The engine's side of an agent's model calls: :class:`AgentChat`.

Every call an agent makes is a call of the learner's serving role (ACE's generator, GEPA's
solver, TextGrad's forward pass) through the session's role calls (its client's concurrency cap,
retries, replay cache, accounting in ``calls.json``, failures in ``errors.jsonl``), wherever the
agent runs: the local backend calls it directly, the process backend's workers send their
requests to the parent, which calls it; the ray backend's actors send them with an
:class:`AgentChat` of their own over clients of their own (:meth:`AgentChat.send`, not accounted
there) and the outcome of each call, with its role, is counted here afterwards
(:meth:`~combee_fast.roles.calls.RoleCalls.note`).
:meth:`AgentChat.facts` is what the agents need to know of that endpoint, found once (the
tool-calling probe only when asked for). A call of another role (one a task's environment makes:
the tau2 tasks' ``user``) is sent with that role's own sampling, and counted as that role's.
"""

from __future__ import annotations

import asyncio

import msgspec

from combee_fast.endpoint.calls import ChatRequest, ChatResult
from combee_fast.endpoint.client import EndpointClient
from combee_fast.engine.events import EndpointsProbed
from combee_fast.engine.slow_wait import said_if_slow
from combee_fast.redact import strip_userinfo
from combee_fast.roles.calls import RoleCalls
from combee_fast.roles.clients import RoleClients
from combee_fast.rollouts.episode import ChatFacts


class AgentChat:
    """Agent model calls through ``calls``, as their serving role ``role`` (module docstring);
    ``tool_calls``: the agent's setting (``auto`` probes the endpoint once)."""

    def __init__(self, calls: RoleCalls, tool_calls: str, *, role: str | None = None) -> None:
        self.calls = calls
        self.role = role or calls.serving().key
        self.tool_calls = tool_calls
        self._facts: ChatFacts | None = None
        self._lock = asyncio.Lock()

    async def __call__(self, request: ChatRequest) -> ChatResult:
        """``request`` sent (:meth:`send`) and counted as its role's call."""
        result = await self.send(request)
        self.calls.note(request.role, result.error, result.text)
        return result

    async def send(self, request: ChatRequest) -> ChatResult:
        """``request`` through its role's client (the serving role's, or the role an environment
        calls, with that role's own sampling), not accounted."""
        if request.role != self.role:  # a role the environment calls (a task's user): its own sampling
            temperature, max_tokens, extra = self.calls.sampling_of(request.role)
            request = msgspec.structs.replace(request, temperature=temperature, max_tokens=max_tokens,
                                              extra_body=extra)
        return await self.calls.send(request)

    async def facts(self, *, probe: bool) -> ChatFacts:
        """The serving endpoint's facts; with ``probe`` and ``tool_calls`` auto, tool calling is
        probed (once)."""
        async with self._lock:
            if self._facts is None:
                client = RoleClients.replicas_of(self.calls.client(self.role))[0]
                if self.tool_calls == "auto":
                    tools = await self._tools(client) if probe else False
                else:
                    tools = self.tool_calls == "on"
                temperature, max_tokens, extra = self.calls.sampling_of(self.role)
                self._facts = ChatFacts(self.role, temperature, max_tokens, extra, client.capabilities.context_length,
                                        tools)
            return self._facts

    async def _tools(self, client: EndpointClient) -> bool:
        """Whether ``client``'s endpoint does tool calling (probed once,
        :meth:`~combee_fast.endpoint.client.EndpointClient.detect_tools`), said on the session's
        events when the probe takes noticeable time."""
        url = strip_userinfo(client.config.base_url)
        return await said_if_slow(client.detect_tools(), self.calls.events,
                                  lambda seconds: EndpointsProbed((url,), ("tool calling",), seconds))
