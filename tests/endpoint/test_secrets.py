"""Errors kept from an endpoint never hold the API key or URL credentials (real servers on loopback)."""

from __future__ import annotations

import json

from aiohttp import web

from combee_fast.endpoint.client import ChatRequest, EndpointClient, EndpointConfig
from combee_fast.config import TransportConfig
from combee_fast.schema import Message
from tests.conftest import ThreadedServer

KEY = "sk-live-0123456789abcdef"


async def _echo_headers(request: web.BaseRequest) -> web.Response:
    """A careless server: its 400 error body echoes every request header."""
    return web.Response(status=400, text=json.dumps({"error": "bad", "headers": dict(request.headers)}),
                        content_type="application/json")


async def _chat(url: str, **options: object):
    config = EndpointConfig(name="e", base_url=url, model="m", transport=TransportConfig(max_retries=0),
                            **options)  # type: ignore[arg-type]
    async with EndpointClient(config) as client:
        return await client.chat(ChatRequest(role="generator", messages=(Message("user", "hi"),)))


def _assert_scrubbed(result, *secrets: str) -> None:
    error = result.error
    assert error is not None and error.kind == "http_status" and error.status == 400
    assert "[redacted]" in (error.raw or "")
    for text in (error.message, error.raw or ""):
        for secret in secrets:
            assert secret not in text
    assert "Authorization" in (error.raw or "")  # the header is named, its value is not kept


async def test_an_error_body_echoing_the_headers_is_scrubbed_of_the_api_key(monkeypatch) -> None:
    monkeypatch.setenv("I12_KEY", KEY)
    with ThreadedServer(_echo_headers) as server:
        result = await _chat(server.url, api_key_env="I12_KEY")
    _assert_scrubbed(result, KEY)


async def test_url_credentials_are_sent_but_never_kept_in_an_error() -> None:
    with ThreadedServer(_echo_headers) as server:
        result = await _chat(server.url.replace("http://", "http://alice:pw-hunter2@"))
    _assert_scrubbed(result, "pw-hunter2", "YWxpY2U6cHctaHVudGVyMg==")  # base64 of alice:pw-hunter2


def test_url_credentials_and_an_api_key_together_are_a_config_error(monkeypatch) -> None:
    import pytest

    from combee_fast.errors import ConfigError

    monkeypatch.setenv("I12_KEY", KEY)
    config = EndpointConfig(name="e", base_url="http://a:b@127.0.0.1:9/v1", model="m", api_key_env="I12_KEY")
    with pytest.raises(ConfigError, match="both authenticate"):
        EndpointClient(config)
