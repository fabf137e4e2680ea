"""One LLM call as the engine sees it: :class:`ChatRequest` in, :class:`ChatResult` out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import msgspec

from combee_fast.schema import CallError, Message, ToolCall, Usage


class ReplyWatch(Protocol):
    """Reads one reply's content as it arrives and says when the rest is not worth generating."""

    def feed(self, delta: str) -> str | None:
        """Take the next piece of the reply's content. Returns the reply to keep, a complete text
        (the content so far, cut where the waste began and made whole again), when generating
        should stop now; None to go on."""
        ...


class ReplyCut(Protocol):
    """A rule that stops a reply at its first wasted piece (a repeated operation, say);
    :meth:`watch` makes the watcher of one reply. With a streamed reply the client closes the
    connection at the cut, so the server stops generating (:mod:`combee_fast.endpoint.streamed`);
    a reply read whole is cut the same way after the fact, so what the caller receives never
    depends on the transport. The rule is not part of the replay cache's key: a replayed run gets
    the replies as they were recorded."""

    def watch(self) -> ReplyWatch: ...


class ChatRequest(msgspec.Struct, frozen=True):
    """A chat-completions call. ``role`` (generator, reflector, curator, reducer, ...) is sent as
    header ``X-Combee-Role``; ``json_schema`` asks for a JSON object of that schema (``None``:
    free text); ``extra_body`` fields (penalties, ``top_p``, server-specific knobs) are merged into
    the request body as given; ``tools`` offers OpenAI function tools (their JSON definitions) and
    ``tool_choice`` says how the model may use them (None: the server's default); ``cut`` stops the
    reply at its first wasted piece (:class:`ReplyCut`)."""

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
    cut: ReplyCut | None = None


class ChatResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of a call, never an exception.

    ``text`` is the response content (``None`` if there was no response); ``data`` the parsed
    JSON object when a schema was requested and it parsed; ``error`` the typed failure;
    ``tool_calls`` the tools the reply called (a request that offered ``tools``); ``cut``: the
    request's :class:`ReplyCut` stopped the reply (``text`` is what it kept); ``response_model``
    the model the server said answered (None: it said none).
    """

    text: str | None
    data: Any = None
    usage: Usage
    error: CallError | None = None
    finish_reason: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    cut: bool = False
    response_model: str | None = None


ChatCall = Callable[[ChatRequest], Awaitable[ChatResult]]
"""One model call through the engine's client (it accounts the call to its request's role)."""
