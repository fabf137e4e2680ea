"""What the simulated server answers: the :class:`Responder` protocol and two simple responders.

A responder is synchronous and should be fast (microseconds to a millisecond): the server calls
it on the event loop and records how long each call took (``SimCounters.responder_max_s``).
The learning issue adds a task-world responder; this module ships echo and template ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

import msgspec

from combee_fast.schema import Message, ToolCall


class SimRequest(msgspec.Struct, frozen=True):
    """A chat request as the simulated server sees it (``role`` comes from ``X-Combee-Role``;
    ``tools``: the function tools the request offers, OpenAI's JSON definitions)."""

    role: str
    model: str
    messages: tuple[Message, ...]
    max_tokens: int
    temperature: float
    seed: int | None
    json_schema: dict[str, Any] | None
    tools: tuple[dict[str, Any], ...] = ()

    @property
    def last_user_content(self) -> str:
        """Content of the last user message; empty if there is none."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message.content
        return ""


class SimReply(msgspec.Struct, frozen=True):
    """A reply that calls tools: its text and the calls (a request that offered ``tools``)."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()


class Responder(Protocol):
    def respond(self, request: SimRequest) -> str | SimReply:
        """The completion text (JSON text of an object matching ``request.json_schema`` if set),
        or a :class:`SimReply` calling some of ``request.tools``."""
        ...


RoleResponder = Callable[[Any, SimRequest], "str | SimReply"]
"""How the simulated endpoint answers one role: ``responder(world, request)``, ``world`` the task
world answering (its knowledge units, parameters and draws), ``request`` one request of that role.
A learner of a plugin registers one per role it calls (``LearnerKind.responders``)."""


class RoleTable(NamedTuple):
    """The roles a task world plays: ``responders`` by request role name, and ``serving``, the
    request names of the roles that serve the learned context (pool ``serve``): a world in which
    the endpoint plays the agent answers an agent's turn in any of them. The learners' table comes
    from their registry (:func:`combee_fast.learners.role_table`: the built-in learners' and a
    plug-in's alike), handed to the worlds by whoever builds them (the session, ``combee
    sim-server``)."""

    responders: Mapping[str, RoleResponder]
    serving: frozenset[str] = frozenset()


NO_ROLES = RoleTable({})
"""The table of a world that plays no learner's role (its knowledge alone, or transport tests)."""


GENERIC_TEXT = "a simulated reply"
"""What :func:`generic_reply` writes in every text: neither a role's name nor a model's answer."""


def generic_reply(world: Any, request: SimRequest) -> str:
    """A reply a plug-in learner may opt into for any of its roles (``responders = {ROLE.key:
    generic_reply}``) to smoke-test it offline: an object its JSON schema allows, each string
    :data:`GENERIC_TEXT` (plain text without a schema). It parses; it knows nothing of the task,
    so a run answered by it learns nothing and claims nothing."""
    if request.json_schema is None:
        return GENERIC_TEXT
    return msgspec.json.encode(example_for_schema(request.json_schema, GENERIC_TEXT)).decode()


def probe_tool_reply(request: SimRequest) -> SimReply:
    """What a server with tool calling answers a request offering tools that no role plays (the
    start-up probe): a call of its first tool with arguments that fit the tool's parameters."""
    function = request.tools[0].get("function", {})
    arguments = example_for_schema(function.get("parameters", {"type": "object"}), "yes")
    return SimReply("", (ToolCall(str(function.get("name", "")), msgspec.json.encode(arguments).decode(), "call_0"),))


def example_for_schema(schema: dict[str, Any], text: str) -> Any:
    """A small value that satisfies ``schema``'s declared types; strings are filled with ``text``."""
    kind = schema.get("type")
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        properties: dict[str, Any] = schema.get("properties", {})
        return {name: example_for_schema(sub, text) for name, sub in properties.items()}
    if kind == "array":
        return []
    if kind == "integer":
        return 0
    if kind == "number":
        return 0.0
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return text


class EchoResponder:
    """Answers with the last user message; for a JSON schema, an object whose strings echo it."""

    def respond(self, request: SimRequest) -> str:
        text = request.last_user_content
        if request.json_schema is None:
            return text
        return msgspec.json.encode(example_for_schema(request.json_schema, text)).decode()


class TemplateResponder:
    """Answers with a ``str.format`` template chosen by role (``default`` when the role has none).

    Fields: ``{role}``, ``{model}``, ``{last_user}`` (last user message) and ``{n_messages}``.
    For JSON-schema requests the formatted text is sent as is, so the template should be JSON
    (double its literal braces).
    """

    def __init__(self, templates: dict[str, str], default: str = "{last_user}") -> None:
        self._templates = dict(templates)
        self._default = default

    def respond(self, request: SimRequest) -> str:
        template = self._templates.get(request.role, self._default)
        return template.format(
            role=request.role,
            model=request.model,
            last_user=request.last_user_content,
            n_messages=len(request.messages),
        )
