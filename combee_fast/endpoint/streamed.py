"""A streamed chat completion (server-sent events) read back into one completion.

Why stream: a request the client abandons (its timeout, a cancelled run) closes its connection.
Servers stop generating for a closed *streamed* request as soon as they next write to it;
llama.cpp's servers do so only for streamed requests (a non-streamed one keeps the model busy
until it finishes, and the retry waits behind it). The client reads the answer as it
arrives only to cut it (:class:`~combee_fast.endpoint.calls.ReplyCut`: a reply stopped at its first
wasted piece, the connection closed so the server stops generating); otherwise streaming is about
cancellation, not about reading tokens early.

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

from combee_fast.endpoint.calls import ReplyWatch
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


class StreamReader:
    """A streamed reply read as it arrives: :meth:`feed` takes the body's bytes in pieces (any
    split), :meth:`response` is the completion they carry (the contract of :func:`join_stream`).
    With a ``watch`` (:class:`~combee_fast.endpoint.calls.ReplyWatch`), each content delta is shown
    to it; once it keeps a cut reply, :meth:`feed` returns True (read no more: the caller closes
    the connection, so the server stops generating) and :meth:`response` is that cut reply, with
    finish reason ``stop``. ``events`` counts the content-bearing events read: a server that
    streams a token an event (llama.cpp, vLLM) generated that many tokens before the cut. A body
    that is a plain JSON completion is decoded whole at :meth:`response`."""

    def __init__(self, watch: ReplyWatch | None = None) -> None:
        self._watch = watch
        self._pending = bytearray()
        self._plain: bytearray | None = None  # a body that is not a stream: kept whole
        self._parts: list[str] = []
        self._calls: dict[int, list[str]] = {}  # index -> [id, name, arguments so far]
        self._finish_reason: str | None = None
        self._usage: CompletionUsage | None = None
        self._events = 0
        self._done = False
        self._error: Exception | None = None  # why the stream failed, raised by response()
        self.events = 0
        self.kept: str | None = None  # the watch's cut reply, once it cut

    def feed(self, data: bytes) -> bool:
        """Read the next piece of the body; True once nothing more should be read (the stream
        ended, the watch cut the reply, or the stream failed: an ``error`` event, or an event that
        is not a chunk, which :meth:`response` raises). Never raises itself: it runs inside a
        connection's callbacks."""
        if self._plain is not None:
            self._plain += data
            return False
        if self._done:
            return True
        self._pending += data
        if not self._events and not self._parts and self._pending.lstrip()[:1] == b"{":
            self._plain, self._pending = self._pending, bytearray()
            return False
        while (end := self._pending.find(b"\n")) >= 0:
            line = bytes(self._pending[:end]).rstrip(b"\r")
            del self._pending[:end + 1]
            try:
                ended = self._line(line)
            except (StreamFailed, msgspec.MsgspecError) as exc:
                self._error, ended = exc, True
            if ended:
                self._done = True
                return True
        return False

    def _line(self, line: bytes) -> bool:
        """Take one line of the stream; True when the stream ended or the watch cut it."""
        if not line.startswith(b"data:"):
            return False  # blank separators, comments (": ping"), event:/id: fields
        payload = line[5:].strip()
        if payload == b"[DONE]":
            return True
        chunk = _chunk_decoder.decode(payload)
        self._events += 1
        if chunk.error is not None:
            code = chunk.error.code
            status = code if isinstance(code, int) and 400 <= code <= 599 else 500
            raise StreamFailed(f"error event in the stream: {chunk.error.message}", status)
        if chunk.usage is not None:
            self._usage = chunk.usage
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            if choice.delta.content:
                self.events += 1
                self._parts.append(choice.delta.content)
                if self._watch is not None and (kept := self._watch.feed(choice.delta.content)) is not None:
                    self.kept = kept
                    return True
            for piece in choice.delta.tool_calls or ():
                call = self._calls.setdefault(piece.index, ["", "", ""])
                call[0] = piece.id or call[0]
                function = piece.function or {}
                call[1] = function.get("name") or call[1]
                call[2] += function.get("arguments") or ""
            if choice.finish_reason is not None:
                self._finish_reason = choice.finish_reason
        return False

    def response(self) -> CompletionResponse:
        """The completion read so far (see the class doc). Raises :class:`StreamFailed` for an
        ``error`` event, ``msgspec`` errors for an event that is not a chunk, ``ValueError`` when
        the body held no data event (nor a plain completion)."""
        if self._error is not None:
            raise self._error
        if self._plain is not None:
            return _response_decoder.decode(bytes(self._plain))
        if self._pending and not self._done:  # a last line without its newline
            line, self._pending = bytes(self._pending).rstrip(b"\r"), bytearray()
            self._done = self._line(line)
        if self._events == 0:
            raise ValueError("no data events in a streamed reply")
        if self.kept is not None:
            message = AssistantMessage(content=self.kept)
            return CompletionResponse(choices=(Choice(message=message, finish_reason="stop"),), usage=self._usage)
        tool_calls = tuple(WireToolCall(FunctionCall(name, arguments or "{}"), id_)
                           for _, (id_, name, arguments) in sorted(self._calls.items())) or None
        message = AssistantMessage(content="".join(self._parts), tool_calls=tool_calls)
        return CompletionResponse(choices=(Choice(message=message, finish_reason=self._finish_reason),),
                                  usage=self._usage)


def join_stream(body: bytes) -> CompletionResponse:
    """The completion a streamed reply ``body`` carries (see the module doc)."""
    reader = StreamReader()
    reader.feed(body)
    return reader.response()


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
