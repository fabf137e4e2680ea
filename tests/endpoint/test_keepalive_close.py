"""A server that closes idle keep-alive connections (as cpp-httplib, llama.cpp's HTTP server,
does after 5 s idle, and llama.cpp after every streamed reply): a request sent as the server
closes the connection it goes out on is resent once on a new connection, not counted as a
``connection`` retry. A real loopback server written here; llama.cpp's own in test_local_keepalive.py."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest

from combee_fast.config import TransportConfig
from combee_fast.endpoint.client import ChatRequest, EndpointClient, EndpointConfig
from combee_fast.schema import Message

_IDLE_S = 0.2  # the test server's keep-alive timeout
_REPLY = json.dumps({"id": "c", "object": "chat.completion", "model": "m",
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": "hello"}}],
                     "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}).encode()


class _ClosesIdle(asyncio.Protocol):
    """One connection of a chat-completions server that drops a keep-alive connection idle past
    ``_IDLE_S`` when the next request's bytes arrive, unread: its idle timer has fired just as
    the request reached it (the close crossing the request on the wire, made deterministic)."""

    def __init__(self, stats: dict[str, int]) -> None:
        self.stats = stats
        self.buffer = b""
        self.answered_at: float | None = None  # monotonic time of the last reply; None: no reply yet
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.stats["connections"] += 1

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        if not self.buffer and self.answered_at is not None and time.monotonic() - self.answered_at > _IDLE_S:
            self.stats["closed_idle"] += 1
            self.transport.abort()  # closed with the request unread, as a socket closed with bytes pending
            return
        self.buffer += data
        head, found, body = self.buffer.partition(b"\r\n\r\n")
        if not found:
            return
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
        if len(body) < length:
            return
        self.buffer = body[length:]
        self.stats["requests"] += 1
        self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nKeep-Alive: timeout=0.2, max=100\r\n"
                             b"Content-Length: %d\r\n\r\n%b" % (len(_REPLY), _REPLY))
        self.answered_at = time.monotonic()


@pytest.fixture
async def closes_idle() -> AsyncIterator[tuple[str, dict[str, int]]]:
    stats = {"connections": 0, "closed_idle": 0, "requests": 0}
    server = await asyncio.get_running_loop().create_server(lambda: _ClosesIdle(stats), "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", stats
    server.close()
    await server.wait_closed()


def ask(text: str) -> ChatRequest:
    """A short free-text generator call."""
    return ChatRequest(role="generator", messages=(Message(role="user", content=text),), max_tokens=8)


async def test_requests_spaced_past_the_idle_timeout_are_not_connection_retries(
        closes_idle: tuple[str, dict[str, int]]) -> None:
    url, stats = closes_idle
    config = EndpointConfig(name="idle", base_url=url, model="m", json_schema=False,
                            transport=TransportConfig(concurrency=2, max_retries=3))
    async with EndpointClient(config) as client:
        results = []
        for i in range(4):
            if i:
                await asyncio.sleep(_IDLE_S * 1.5)
            results.append(await client.chat(ask(f"q{i}")))
    assert [r.text for r in results] == ["hello"] * 4, [r.error for r in results]
    assert [r.usage.retry_kinds for r in results] == [()] * 4
    assert stats == {"connections": 4, "closed_idle": 3, "requests": 4}  # each closed idle: resent on a new one
    assert client.resent == 3
