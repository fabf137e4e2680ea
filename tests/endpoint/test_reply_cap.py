"""Reply size cap: a reply over ``transport.max_reply_bytes`` is not read past it (announced or
streamed): a ``too_large`` error on the call, not retried, and memory stays small (real servers on
loopback)."""

from __future__ import annotations

import asyncio
import json
import tracemalloc

from aiohttp import web

from combee_fast.config import TransportConfig
from combee_fast.endpoint.client import ChatRequest, EndpointClient, EndpointConfig
from combee_fast.schema import Message
from tests.conftest import ThreadedServer

LIMIT = 1 << 20
CHUNK = b"x" * 65536
COMPLETION = {"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}


def _config(url: str) -> EndpointConfig:
    return EndpointConfig(name="e", base_url=url, model="m",
                          transport=TransportConfig(max_reply_bytes=LIMIT, max_retries=2, backoff_base_s=0.01))


def _ask() -> ChatRequest:
    return ChatRequest(role="generator", messages=(Message(role="user", content="hi"),), max_tokens=8)


async def test_an_announced_reply_over_the_cap_is_a_too_large_error_not_retried() -> None:
    async def big(request: web.BaseRequest) -> web.Response:
        return web.Response(body=b"{" + b" " * (3 * LIMIT) + b"}", content_type="application/json")

    with ThreadedServer(big) as server:
        async with EndpointClient(_config(server.url)) as client:
            result = await client.chat(_ask())
    assert result.error is not None and result.error.kind == "too_large" and result.error.label == "too_large"
    assert f"max_reply_bytes={LIMIT}" in result.error.message
    assert len(server.requests) == 1 and result.usage.retries == 0


async def test_a_streamed_50_mb_reply_is_cut_at_the_cap_and_memory_stays_small() -> None:
    async def endless(request: web.BaseRequest) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            for _ in range(50 * 16):  # 50 MB, until the client hangs up
                if request.transport is None or request.transport.is_closing():
                    break
                await asyncio.wait_for(response.write(CHUNK), 2.0)  # a client that stopped reading
        except (ConnectionError, RuntimeError, TimeoutError):
            pass
        return response

    with ThreadedServer(endless) as server:
        tracemalloc.start()
        try:
            async with EndpointClient(_config(server.url)) as client:
                result = await client.chat(_ask())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert result.error is not None and result.error.kind == "too_large"
    assert peak < 8 * LIMIT, f"peak {peak} bytes while reading a capped reply"


async def test_a_reply_within_the_cap_is_read_whole() -> None:
    async def small(request: web.BaseRequest) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(json.dumps(COMPLETION).encode())
        return response

    with ThreadedServer(small) as server:
        async with EndpointClient(_config(server.url)) as client:
            result = await client.chat(_ask())
    assert result.error is None and result.text == "ok"
