"""The start-up check proves the endpoint serves the model, against real misbehaving servers on loopback."""

from __future__ import annotations

import json

import pytest
from aiohttp import web

from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.errors import EndpointUnreachable
from tests.conftest import StartSimServer, ThreadedServer

COMPLETION = {"choices": [{"message": {"role": "assistant", "content": "p"}, "finish_reason": "length"}]}


def _json(value: object, status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(value), content_type="application/json")


async def _check(url: str, model: str = "m") -> None:
    async with EndpointClient(EndpointConfig(name="e", base_url=url, model=model)) as client:
        await client.check()


async def _not_found(request: web.BaseRequest) -> web.Response:
    return web.Response(status=404, text="404 page not found")


async def _not_implemented(request: web.BaseRequest) -> web.Response:
    return web.Response(status=501, text="Not Implemented")


async def _html(request: web.BaseRequest) -> web.Response:
    return web.Response(text="<!doctype html><html><body>Welcome to nginx!</body></html>", content_type="text/html")


async def _prose(request: web.BaseRequest) -> web.Response:
    return web.Response(text="Hello! I am a friendly server.\nAsk me anything.", content_type="text/plain")


async def _other_model_only(request: web.BaseRequest) -> web.Response:
    if request.path.endswith("/models"):
        return _json({"object": "list", "data": [{"id": "other"}]})
    return _json({"error": {"message": "model 'm' not found"}}, status=404)


@pytest.mark.parametrize("handler, why", [
    (_not_found, "HTTP 404"),
    (_not_implemented, "HTTP 501"),
    (_html, "not a chat completion"),
    (_prose, "not a chat completion"),
    (_other_model_only, "does not list model 'm'"),
])
async def test_an_endpoint_that_does_not_serve_the_model_fails_the_check_in_one_line(handler, why: str) -> None:
    with ThreadedServer(handler) as server:
        with pytest.raises(EndpointUnreachable) as raised:
            await _check(server.url)
    message = str(raised.value)
    assert "\n" not in message and why in message
    assert message.startswith(f"endpoint 'e' at {server.url} does not serve model 'm'")


async def test_a_model_list_naming_the_model_passes_without_a_completion() -> None:
    async def models(request: web.BaseRequest) -> web.Response:
        if request.path.endswith("/models"):
            return _json({"object": "list", "data": [{"id": "other"}, {"id": "m"}]})
        return web.Response(status=500)

    with ThreadedServer(models) as server:
        await _check(server.url)
    assert server.requests == [("GET", "/v1/models")]


async def test_without_a_model_list_one_token_completion_is_the_proof() -> None:
    async def completions_only(request: web.BaseRequest) -> web.Response:
        if request.path.endswith("/chat/completions"):
            body = await request.json()
            assert body["max_tokens"] == 1 and body["model"] == "m"
            return _json(COMPLETION)
        return web.Response(status=404)

    with ThreadedServer(completions_only) as server:
        await _check(server.url)
    assert server.requests == [("GET", "/v1/models"), ("POST", "/v1/chat/completions")]


async def test_rejected_credentials_are_named() -> None:
    async def locked(request: web.BaseRequest) -> web.Response:
        return _json({"error": "no"}, status=401)

    with ThreadedServer(locked) as server:
        with pytest.raises(EndpointUnreachable, match="rejected the credentials: HTTP 401"):
            await _check(server.url)


async def test_the_simulated_server_passes_for_the_model_it_lists_and_refuses_another(
        start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(time_scale=0.001)
    await _check(server.url, model="sim")
    with pytest.raises(EndpointUnreachable) as raised:
        await _check(server.url, model="my-model")
    assert str(raised.value).endswith("does not list model 'my-model'; it lists 'sim'")
    named = await start_sim_server(time_scale=0.001, model="llama")
    await _check(named.url, model="llama")


async def test_a_base_url_without_v1_is_refused_naming_the_url_to_give(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(time_scale=0.001)
    bare = server.url.removesuffix("/v1")
    with pytest.raises(EndpointUnreachable) as raised:
        await _check(bare, model="sim")
    message = str(raised.value)
    assert "\n" not in message and message.endswith(f"{bare}/v1/models lists 'sim': give the base URL {bare}/v1")
