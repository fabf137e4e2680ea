"""The OpenAI chat-completions wire format, as msgspec Structs shared by client and simulator.

Only the fields this project sends or reads are declared; unknown fields in a response are
ignored, so any OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, OpenAI) decodes.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from combee_fast.schema import Message, ToolCall

ROLE_HEADER = "X-Combee-Role"
"""Request header carrying the calling role; real servers ignore it."""

SIM_LATENCY_HEADER = "X-Combee-Sim-Latency"
"""Response header with the simulated seconds a request took (simulated server only)."""

TIME_SCALE_HEADER = "X-Combee-Time-Scale"
"""Response header with the real seconds per simulated second (simulated server only)."""


class JsonSchemaFormat(msgspec.Struct, frozen=True, omit_defaults=True):
    """``strict`` is left off (false): OpenAI rejects strict schemas that leave any property
    optional, and vLLM/SGLang enforce the schema either way."""

    name: str
    schema: dict[str, Any]
    strict: bool = False


class ResponseFormat(msgspec.Struct, frozen=True, omit_defaults=True):
    """``schema`` is llama-cpp-python's form: ``{"type": "json_object", "schema": {...}}``."""

    type: str
    json_schema: JsonSchemaFormat | None = None
    schema: dict[str, Any] | None = None


class StreamOptions(msgspec.Struct, frozen=True):
    """``include_usage``: the server ends the stream with a chunk carrying the call's ``usage``."""

    include_usage: bool = True


class FunctionCall(msgspec.Struct, frozen=True):
    name: str
    arguments: str = "{}"


class WireToolCall(msgspec.Struct, frozen=True):
    """A tool call as OpenAI writes it in an assistant message."""

    function: FunctionCall
    id: str = ""
    type: str = "function"


class WireMessage(msgspec.Struct, frozen=True, omit_defaults=True):
    """A message of a tool-calling conversation, in OpenAI's form (plain messages are sent as
    :class:`~combee_fast.schema.Message`, whose encoding is the same)."""

    role: str
    content: str | None
    tool_calls: tuple[WireToolCall, ...] = ()
    tool_call_id: str | None = None


def wire_messages(messages: tuple[Message, ...]) -> tuple[Message | WireMessage, ...]:
    """``messages`` as the wire takes them: unchanged unless some carry tool calls."""
    if not any(m.tool_calls or m.tool_call_id is not None for m in messages):
        return messages
    return tuple(
        WireMessage(m.role, m.content if m.content or not m.tool_calls else None,
                    tuple(WireToolCall(FunctionCall(c.name, c.arguments), c.id) for c in m.tool_calls),
                    m.tool_call_id)
        for m in messages
    )


def tool_calls_of(calls: tuple[WireToolCall, ...]) -> tuple[ToolCall, ...]:
    return tuple(ToolCall(c.function.name, c.function.arguments, c.id) for c in calls)


class CompletionRequest(msgspec.Struct, frozen=True, omit_defaults=True):
    """Body of ``POST /chat/completions``; ``stream`` asks for server-sent events
    (:mod:`combee_fast.endpoint.streamed`); ``tools`` offers OpenAI function tools (their JSON
    definitions), ``tool_choice`` how the model may use them."""

    model: str
    messages: tuple[Any, ...]  # Message, or WireMessage in a tool-calling conversation (wire_messages)
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    response_format: ResponseFormat | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: str | None = None


class ReceivedRequest(CompletionRequest, frozen=True):
    """A chat-completions body as a server decodes it (the simulated server)."""

    messages: tuple[WireMessage, ...]

    def schema_messages(self) -> tuple[Message, ...]:
        """The messages as :class:`~combee_fast.schema.Message` values (no content: empty text)."""
        return tuple(Message(m.role, m.content or "", tool_calls_of(m.tool_calls), m.tool_call_id)
                     for m in self.messages)


class AssistantMessage(msgspec.Struct, frozen=True):
    role: str = "assistant"
    content: str | None = None
    tool_calls: tuple[WireToolCall, ...] | None = None


class Choice(msgspec.Struct, frozen=True):
    message: AssistantMessage
    index: int = 0
    finish_reason: str | None = None


TokenCount = Annotated[int, msgspec.Meta(ge=0)]
"""A token count as a server reports it: a negative one makes the reply malformed."""


class PromptTokensDetails(msgspec.Struct, frozen=True):
    """``cached_tokens``: the prompt tokens the server's prompt cache spared it reading (llama.cpp,
    vLLM and OpenAI report them)."""

    cached_tokens: TokenCount = 0


class CompletionUsage(msgspec.Struct, frozen=True):
    prompt_tokens: TokenCount = 0
    completion_tokens: TokenCount = 0
    total_tokens: TokenCount = 0
    prompt_tokens_details: PromptTokensDetails | None = None

    @property
    def cached_tokens(self) -> int:
        return 0 if self.prompt_tokens_details is None else self.prompt_tokens_details.cached_tokens


class CompletionResponse(msgspec.Struct, frozen=True):
    """Body of a successful chat-completions response."""

    choices: tuple[Choice, ...]
    model: str = ""
    id: str = ""
    object: str = "chat.completion"
    usage: CompletionUsage | None = None


class ToolCallDelta(msgspec.Struct, frozen=True):
    """A piece of a streamed tool call: ``index`` names the call; the first piece carries its id
    and name, later ones more of its arguments."""

    index: int = 0
    id: str | None = None
    function: dict[str, Any] | None = None


class Delta(msgspec.Struct, frozen=True):
    content: str | None = None
    tool_calls: tuple[ToolCallDelta, ...] | None = None


class StreamChoice(msgspec.Struct, frozen=True):
    delta: Delta = Delta()
    index: int = 0
    finish_reason: str | None = None


class StreamError(msgspec.Struct, frozen=True):
    message: str = ""
    code: int | str | None = None


class CompletionChunk(msgspec.Struct, frozen=True):
    """One server-sent event of a streamed completion (``chat.completion.chunk``); vLLM and
    llama.cpp send ``error`` instead when the call fails after the stream started."""

    choices: tuple[StreamChoice, ...] = ()
    usage: CompletionUsage | None = None
    error: StreamError | None = None


class ModelCard(msgspec.Struct, frozen=True):
    """One model of a ``GET /models`` listing; ``worlds`` and ``roles``: a ``combee
    sim-server``'s own fields, the tasks whose worlds it plays and the request roles it answers
    (absent elsewhere; ``roles`` absent: any role, e.g. ``--world echo``)."""

    id: str
    object: str = "model"
    owned_by: str = "combee-sim"
    worlds: tuple[str, ...] | None = None
    roles: tuple[str, ...] | None = None


class ModelList(msgspec.Struct, frozen=True):
    data: tuple[ModelCard, ...]
    object: str = "list"


def with_extra_body(body: bytes, extra: dict[str, Any]) -> bytes:
    """The JSON request ``body`` with the fields of ``extra`` added (or replacing its own)."""
    return msgspec.json.encode({**msgspec.json.decode(body), **extra})
