"""Streamed replies (``transport.stream``) over real HTTP on loopback: the same results as plain
ones, and the failure cases a server can produce only in a stream."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from combee_fast.endpoint.client import EndpointClient
from combee_fast.endpoint.streamed import StreamFailed, join_stream
from combee_fast.config import FaultConfig
from combee_fast.sim.server import SimServer
from tests.conftest import StartSimServer
from tests.endpoint.test_client import SCHEMA, ask, config


async def test_a_streamed_call_gives_what_a_plain_call_gives(sim_server: SimServer) -> None:
    requests = [ask("four score and seven"), ask("yes", json_schema=SCHEMA), ask("x " * 400, max_tokens=50)]
    async with EndpointClient(config(sim_server)) as plain, EndpointClient(config(sim_server, stream=True)) as streamed:
        expected = [await plain.chat(request) for request in requests]
        got = [await streamed.chat(request) for request in requests]
    for want, have in zip(expected, got):
        assert (have.text, have.data, have.finish_reason, have.error) == (want.text, want.data, want.finish_reason,
                                                                          want.error)
        assert (have.usage.prompt_tokens, have.usage.completion_tokens) == (want.usage.prompt_tokens,
                                                                            want.usage.completion_tokens)
        assert have.usage.sim_latency_s == pytest.approx(want.usage.sim_latency_s)
    assert got[2].error is not None and got[2].error.kind == "truncated"


async def test_streamed_calls_retry_through_faults(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(time_scale=0.001, faults=FaultConfig(rate_500=0.2, rate_drop=0.2), seed=5)
    async with EndpointClient(config(server, stream=True, max_retries=10, concurrency=8)) as client:
        results = await asyncio.gather(*(client.chat(ask(f"q{i}")) for i in range(40)))
    assert [result.text for result in results] == [f"q{i}" for i in range(40)]
    retries = sum(result.usage.retries for result in results)  # + drops on a reused connection, resent (endpoint.http1)
    assert retries + client.resent == sum(server.counters().faults_injected.values()) > 0


async def test_an_error_event_in_the_stream_is_a_server_error_and_is_retried() -> None:
    sent = []

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        sent.append(await request.json())
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if len(sent) == 1:
            await response.write(b'data: {"choices":[{"index":0,"delta":{"content":"par"}}]}\n\n')
            await response.write(b'data: {"error":{"message":"engine died","code":503}}\n\n')
        else:
            await response.write(b'data: {"choices":[{"index":0,"delta":{"content":"whole"},"finish_reason":"stop"}]}'
                                 b'\n\ndata: [DONE]\n\n')
        await response.write_eof()
        return response

    runner = web.ServerRunner(web.Server(handle, access_log=None))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        server = type("Server", (), {"url": f"http://{host}:{port}/v1"})()
        async with EndpointClient(config(server, stream=True, max_retries=1)) as client:  # type: ignore[arg-type]
            result = await client.chat(ask("q"))
    finally:
        await runner.cleanup()
    assert result.error is None and result.text == "whole" and result.usage.retries == 1
    assert result.usage.retry_kinds == ("5xx",)
    assert all(body["stream"] is True and body["stream_options"] == {"include_usage": True} for body in sent)


def test_a_body_that_is_neither_a_stream_nor_a_completion_is_refused() -> None:
    with pytest.raises(ValueError, match="no data events"):
        join_stream(b"<html>busy</html>")
    with pytest.raises(StreamFailed) as failed:
        join_stream(b'data: {"error": {"message": "bad", "code": "oops"}}\n\n')
    assert failed.value.status == 500
    plain = join_stream(b'{"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}')
    assert plain.choices[0].message.content == "hi"
