"""A Retry-After longer than the run's patience fails the call at once instead of waiting in silence."""

from __future__ import annotations

import time

from aiohttp import web

from combee_fast.config import TransportConfig
from combee_fast.endpoint.client import ChatRequest, EndpointClient, EndpointConfig
from combee_fast.schema import Message
from tests.conftest import ThreadedServer


async def _come_back_in_an_hour(request: web.BaseRequest) -> web.Response:
    return web.json_response({"error": "rate limited"}, status=429, headers={"Retry-After": "3600"})


async def test_a_retry_after_beyond_the_patience_is_not_waited_for() -> None:
    with ThreadedServer(_come_back_in_an_hour) as server:
        config = EndpointConfig(name="e", base_url=server.url, model="m", transport=TransportConfig(backoff_max_s=2.0))
        async with EndpointClient(config) as client:
            started = time.perf_counter()
            result = await client.chat(ChatRequest(role="generator", messages=(Message("user", "q"),)))
            elapsed = time.perf_counter() - started
    assert elapsed < 1.5 and len(server.requests) == 1
    error = result.error
    assert error is not None and error.label == "429" and result.usage.retries == 0
    assert "not retried: the server asked to wait 3600 s, more than transport.backoff_max_s=2 s" in error.message
