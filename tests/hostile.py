"""A misbehaving OpenAI-compatible server on loopback, for the tests of how the engine survives one.

:class:`HostileServer` is a raw HTTP/1.1 server (asyncio streams, no framework between the test
and the bytes), run by its own event loop in a thread so a ``combee`` subprocess or a client on
another loop can reach it. ``GET .../models`` lists ``model`` unless ``models`` says otherwise;
every other request (``POST .../chat/completions``, ``/props``, ``/tokenize``...) goes to
``chat``. A *behaviour* is ``async (request, writer) -> None`` and writes whatever bytes it
likes; the connection is closed after it returns. The helpers below build the usual ones:
a proper reply, raw bytes, a trickle, an endless body, a gzip bomb.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import zlib
from collections.abc import Awaitable, Callable, Iterable
from typing import NamedTuple


class Request(NamedTuple):
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes


Behaviour = Callable[[Request, asyncio.StreamWriter], Awaitable[None]]


def head(status: int, headers: Iterable[tuple[str, str]] = (), *, length: int | None = None) -> bytes:
    """A response head; ``length`` adds ``Content-Length``."""
    lines = [f"HTTP/1.1 {status} X", "Connection: close", *(f"{name}: {value}" for name, value in headers)]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def completion_body(text: str = '{"answer": "1"}') -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "model": "m",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}).encode()


def respond(status: int, body: bytes | str, headers: Iterable[tuple[str, str]] = (),
            content_type: str = "application/json") -> Behaviour:
    """A well-framed reply of ``status`` with ``body``."""
    data = body.encode() if isinstance(body, str) else body

    async def behave(request: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(head(status, [("Content-Type", content_type), *headers], length=len(data)) + data)

    return behave


def raw(data: bytes) -> Behaviour:
    """Exactly ``data``, framing and all."""

    async def behave(request: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(data)

    return behave


def trickle(status: int, body: bytes, every_s: float) -> Behaviour:
    """The head at once, then ``body`` one byte every ``every_s`` seconds."""

    async def behave(request: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(head(status, [("Content-Type", "application/json")], length=len(body)))
        for i in range(len(body)):
            await writer.drain()
            await asyncio.sleep(every_s)
            writer.write(body[i:i + 1])

    return behave


def endless(status: int = 200, chunk: bytes = b'{"data": [' + b'{"id": "x"},' * 4096) -> Behaviour:
    """A chunked body that never ends (written as fast as the client reads it)."""

    async def behave(request: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(head(status, [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")]))
        piece = b"%x\r\n%b\r\n" % (len(chunk), chunk)
        while True:
            writer.write(piece)
            await writer.drain()

    return behave


def gzip_bomb(inflated: int, status: int = 200) -> Behaviour:
    """A ``Content-Encoding: gzip`` body of zeros inflating to ``inflated`` bytes."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block, parts = bytes(1 << 20), []
    for _ in range(inflated >> 20):
        parts.append(compressor.compress(block))
    body = b"".join(parts) + compressor.flush()

    async def behave(request: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(head(status, [("Content-Type", "application/json"), ("Content-Encoding", "gzip")],
                          length=len(body)) + body)

    return behave


def models_list(model: str) -> Behaviour:
    return respond(200, json.dumps({"object": "list", "data": [{"id": model, "object": "model"}]}))


class HostileServer:
    """The server (module docstring); ``url`` is its base URL ending in ``/v1``; ``requests``
    lists every request received, in order."""

    def __init__(self, chat: Behaviour, *, models: Behaviour | None = None, model: str = "m") -> None:
        self.chat = chat
        self.models = models or models_list(model)
        self.requests: list[Request] = []
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            request = await _read_request(reader)
            if request is None:
                return
            self.requests.append(request)
            behaviour = self.models if request.method == "GET" and request.path.endswith("/models") else self.chat
            await behaviour(request, writer)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away: what a misbehaving server must survive too
        finally:
            with contextlib.suppress(Exception):
                writer.close()
            self._handlers.discard(asyncio.current_task())  # type: ignore[arg-type]

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}/v1"

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    def __enter__(self) -> HostileServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc_info: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head_bytes = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return None
    lines = head_bytes.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method, path, headers, body)
