"""A streamed chat completion (server-sent events) read back into one completion.

Why stream: a request the client abandons (its timeout, a cancelled run) closes its connection.
Servers stop generating for a closed *streamed* request as soon as they next write to it;
llama.cpp's servers do so only for streamed requests (a non-streamed one keeps the model busy
until it finishes, and the retry waits behind it). The client still waits for the
whole answer: streaming is about cancellation, not about reading tokens early.

Contract of :func:`join_stream`: ``body`` is the complete response body of a 200 reply to a
request with ``"stream": true``. Events are ``data: <json>`` lines separated by blank lines,
ending with ``data: [DONE]`` (absent at the end of a stream is tolerated: the body is complete).
The content deltas of choice 0 are joined (and its tool-call pieces, by their ``index``), the
last ``finish_reason`` and the last ``usage`` seen are kept. A body that is a plain JSON completion
(a server that ignored ``stream``) is
decoded as one. Raises :class:`StreamFailed` for an ``error`` event and ``ValueError`` for a
body that is neither.
"""

from __future__ import annotations

from typing import Any

import msgspec

from combee_fast.endpoint.wire import (
    AssistantMessage,
    Choice,
    FunctionCall,
    WireToolCall,
    CompletionChunk,
    CompletionResponse,
    CompletionUsage,
)

_chunk_decoder = msgspec.json.Decoder(CompletionChunk)
_response_decoder = msgspec.json.Decoder(CompletionResponse)


class StreamFailed(Exception):
    """The server sent an ``error`` event after the stream began; ``status`` is its code when that
    is an HTTP status, else 500."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def join_stream(body: bytes) -> CompletionResponse:
    """The completion a streamed reply ``body`` carries (see the module doc)."""
    if body.lstrip()[:1] == b"{":
        return _response_decoder.decode(body)
    parts: list[str] = []
    calls: dict[int, list[str]] = {}  # index -> [id, name, arguments so far]
    finish_reason: str | None = None
    usage: CompletionUsage | None = None
    events = 0
    for line in body.splitlines():
        if not line.startswith(b"data:"):
            continue  # blank separators, comments (": ping"), event:/id: fields
        payload = line[5:].strip()
        if payload == b"[DONE]":
            break
        chunk = _chunk_decoder.decode(payload)
        events += 1
        if chunk.error is not None:
            code = chunk.error.code
            status = code if isinstance(code, int) and 400 <= code <= 599 else 500
            raise StreamFailed(f"error event in the stream: {chunk.error.message}", status)
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            if choice.delta.content:
                parts.append(choice.delta.content)
            for piece in choice.delta.tool_calls or ():
                call = calls.setdefault(piece.index, ["", "", ""])
                call[0] = piece.id or call[0]
                function = piece.function or {}
                call[1] = function.get("name") or call[1]
                call[2] += function.get("arguments") or ""
            if choice.finish_reason is not None:
                finish_reason = choice.finish_reason
    if events == 0:
        raise ValueError("no data events in a streamed reply")
    tool_calls = tuple(WireToolCall(FunctionCall(name, arguments or "{}"), id_)
                       for _, (id_, name, arguments) in sorted(calls.items())) or None
    message = AssistantMessage(content="".join(parts), tool_calls=tool_calls)
    return CompletionResponse(choices=(Choice(message=message, finish_reason=finish_reason),), usage=usage)


def stream_body(response: CompletionResponse, *, piece_chars: int = 64, include_usage: bool = True) -> bytes:
    """``response`` written as a server would stream it: one event per ``piece_chars`` characters
    of content, the finish reason, the usage (if ``include_usage``), then ``data: [DONE]``."""
    choice = response.choices[0]
    text = choice.message.content or ""
    head = {"id": response.id, "object": "chat.completion.chunk", "model": response.model}
    events: list[dict[str, Any]] = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    events += [{**head, "choices": [{"index": 0, "delta": {"content": text[start:start + piece_chars]}}]}
               for start in range(0, len(text), piece_chars)]
    events += [{**head, "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": index, "id": call.id, "type": "function",
         "function": {"name": call.function.name, "arguments": call.function.arguments}}]}}]}
        for index, call in enumerate(choice.message.tool_calls or ())]
    events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": choice.finish_reason}]})
    if include_usage and response.usage is not None:
        events.append({**head, "choices": [], "usage": response.usage})
    return b"".join(b"data: %b\n\n" % msgspec.json.encode(event) for event in events) + b"data: [DONE]\n\n"
