"""One LLM call as the engine sees it: :class:`ChatRequest` in, :class:`ChatResult` out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from combee_fast.schema import CallError, Message, ToolCall, Usage


class ChatRequest(msgspec.Struct, frozen=True):
    """A chat-completions call. ``role`` (generator, reflector, curator, reducer, ...) is sent as
    header ``X-Combee-Role``; ``json_schema`` asks for a JSON object of that schema (``None``:
    free text); ``extra_body`` fields (penalties, ``top_p``, server-specific knobs) are merged into
    the request body as given; ``tools`` offers OpenAI function tools (their JSON definitions) and
    ``tool_choice`` says how the model may use them (None: the server's default)."""

    role: str
    messages: tuple[Message, ...]
    max_tokens: int = 1024
    temperature: float = 0.0
    seed: int | None = None
    json_schema: dict[str, Any] | None = None
    schema_name: str = "output"
    extra_body: dict[str, Any] | None = None
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: str | None = None


class ChatResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of a call, never an exception.

    ``text`` is the response content (``None`` if there was no response); ``data`` the parsed
    JSON object when a schema was requested and it parsed; ``error`` the typed failure;
    ``tool_calls`` the tools the reply called (a request that offered ``tools``).
    """

    text: str | None
    data: Any = None
    usage: Usage
    error: CallError | None = None
    finish_reason: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


ChatCall = Callable[[ChatRequest], Awaitable[ChatResult]]
"""One model call through the engine's client (it accounts the call to its request's role)."""
