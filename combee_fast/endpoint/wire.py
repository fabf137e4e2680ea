"""The OpenAI chat-completions wire format, as msgspec Structs shared by client and simulator.

Only the fields this project sends or reads are declared; unknown fields in a response are
ignored, so any OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, OpenAI) decodes.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from combee_fast.schema import Message

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


class CompletionRequest(msgspec.Struct, frozen=True, omit_defaults=True):
    """Body of ``POST /chat/completions``; ``stream`` asks for server-sent events
    (:mod:`combee_fast.endpoint.streamed`)."""

    model: str
    messages: tuple[Message, ...]
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    response_format: ResponseFormat | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None


class AssistantMessage(msgspec.Struct, frozen=True):
    role: str = "assistant"
    content: str | None = None


class Choice(msgspec.Struct, frozen=True):
    message: AssistantMessage
    index: int = 0
    finish_reason: str | None = None


TokenCount = Annotated[int, msgspec.Meta(ge=0)]
"""A token count as a server reports it: a negative one makes the reply malformed."""


class CompletionUsage(msgspec.Struct, frozen=True):
    prompt_tokens: TokenCount = 0
    completion_tokens: TokenCount = 0
    total_tokens: TokenCount = 0


class CompletionResponse(msgspec.Struct, frozen=True):
    """Body of a successful chat-completions response."""

    choices: tuple[Choice, ...]
    model: str = ""
    id: str = ""
    object: str = "chat.completion"
    usage: CompletionUsage | None = None


class Delta(msgspec.Struct, frozen=True):
    content: str | None = None


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
    id: str
    object: str = "model"
    owned_by: str = "combee-sim"


class ModelList(msgspec.Struct, frozen=True):
    data: tuple[ModelCard, ...]
    object: str = "list"


def with_extra_body(body: bytes, extra: dict[str, Any]) -> bytes:
    """The JSON request ``body`` with the fields of ``extra`` added (or replacing its own)."""
    return msgspec.json.encode({**msgspec.json.decode(body), **extra})
