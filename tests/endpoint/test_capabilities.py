"""Structured-output capability detection and fall-back, against real servers on loopback."""

from __future__ import annotations

import asyncio
import json

import msgspec

from aiohttp import web

from combee_fast.endpoint.calls import ChatRequest
from combee_fast.endpoint.capabilities import FormState, Capabilities, rejects_form
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.config import TransportConfig
from combee_fast.learners import role_table
from combee_fast.schema import CallError, Message
from combee_fast.sim.server import LLAMA_CPP_PYTHON_REJECTION
from combee_fast.sim.world import TaskWorld
from combee_fast.tasks.registry import get_task
from tests.conftest import StartSimServer, ThreadedServer

SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
REQUEST = ChatRequest(role="generator", messages=(Message(role="user", content="hi"),), json_schema=SCHEMA)


def _world():
    return TaskWorld.for_task(get_task("formula"), roles=role_table())


async def test_a_server_that_honours_json_schema_is_probed_to_json_schema(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(_world(), time_scale=0.001)
    async with EndpointClient(EndpointConfig(name="e", base_url=server.url, model="sim")) as client:
        caps = await client.detect()
    assert caps.form == "json_schema" and caps.probed
    assert caps.tried == {"json_schema": "honoured: the reply matched the probe schema"}
    assert server.counters().requests_by_role == {"probe": 1}  # one call proves it


async def test_a_llama_cpp_python_like_server_is_probed_to_json_object_with_schema(
        start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(_world(), time_scale=0.001, reject_json_schema=True)
    async with EndpointClient(EndpointConfig(name="e", base_url=server.url, model="sim")) as client:
        caps = await client.detect()
        result = await client.chat(msgspec.structs.replace(REQUEST, role="other"))
    assert caps.form == "json_object_schema"
    assert caps.tried["json_schema"].startswith("HTTP 500") and "json_object" in caps.tried["json_schema"]
    assert result.error is None and result.data == {"x": "other"}  # the schema was sent and honoured


async def test_a_rejected_form_falls_back_once_with_a_warning_and_is_not_retried_as_an_outage(
        start_sim_server: StartSimServer, capsys) -> None:
    server = await start_sim_server(time_scale=0.001, reject_json_schema=True)
    config = EndpointConfig(name="e", base_url=server.url, model="sim", response_format="json_schema",
                            transport=TransportConfig(max_retries=4, backoff_base_s=0.0))
    async with EndpointClient(config) as client:
        first = await client.chat(REQUEST)
        second = await client.chat(REQUEST)
    assert first.error is None and first.data == {"x": "hi"} and second.error is None
    assert first.usage.retries == 0
    assert server.counters().requests == 3  # one rejected POST, then the weaker form; no retries of the 500
    assert client.capabilities.form == "json_object_schema"
    assert client.capabilities.fallbacks == ["json_schema"]
    assert capsys.readouterr().err.count("rejected response_format form 'json_schema'") == 1


async def test_a_fixed_form_is_kept_and_not_probed(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(time_scale=0.001)
    config = EndpointConfig(name="e", base_url=server.url, model="sim", response_format="json_object")
    async with EndpointClient(config) as client:
        caps = await client.detect()
    assert caps.form == "json_object" and not caps.probed and server.counters().requests == 0


def test_rejections_are_told_from_outages() -> None:
    assert rejects_form(CallError(kind="http_status", message="HTTP 500", status=500, raw=LLAMA_CPP_PYTHON_REJECTION))
    assert not rejects_form(CallError(kind="http_status", message="HTTP 500: internal error", status=500,
                                      raw="injected internal error"))
    assert not rejects_form(CallError(kind="timeout", message="no answer"))
    state = FormState(Capabilities(endpoint="e", model="m", form="none"), warn=lambda line: None)
    assert not state.fall_back("none", CallError(kind="http_status", message="x", status=400,
                                                 raw="response_format not supported"))


def test_llama_cpp_props_give_context_length_slots_and_tokenizer() -> None:
    async def handler(request: web.BaseRequest) -> web.Response:
        if request.path == "/props":
            body = {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 4}
        elif request.path == "/tokenize":
            body = {"tokens": [1, 2]}
        elif request.path == "/v1/models":
            body = {"data": [{"id": "m"}]}
        else:
            await asyncio.sleep(0.05)  # long enough for every capped request to be in flight at once
            body = {"choices": [{"message": {"role": "assistant", "content": '{"answer": "yes"}'},
                                 "finish_reason": "stop"}]}
        return web.Response(text=json.dumps(body), content_type="application/json")

    async def detect(url: str) -> Capabilities:
        async with EndpointClient(EndpointConfig(name="e", base_url=url, model="m")) as client:
            return await client.detect()

    async def peak_in_flight(url: str) -> int:
        config = EndpointConfig(name="e", base_url=url, model="m", transport=TransportConfig(concurrency=16))
        async with EndpointClient(config) as client:
            await client.detect()
            peak = 0

            async def one() -> None:
                nonlocal peak
                task = asyncio.ensure_future(client.chat(ChatRequest(role="r", messages=(Message(role="user", content="x"),))))
                while not task.done():
                    peak = max(peak, client.in_flight)
                    await asyncio.sleep(0.001)
                await task

            await asyncio.gather(*(one() for _ in range(16)))
            return peak

    with ThreadedServer(handler) as server:
        caps = asyncio.run(detect(server.url))
        concurrent = asyncio.run(peak_in_flight(server.url))
    assert (caps.context_length, caps.slots, caps.tokenize, caps.server) == (2048, 4, True, "llama.cpp")
    assert concurrent == 4  # concurrency 16 capped at the 4 slots the server reported
    assert caps.form == "json_schema"


def test_vllm_max_model_len_gives_the_context_length() -> None:
    async def handler(request: web.BaseRequest) -> web.Response:
        if request.path == "/v1/models":
            return web.Response(text=json.dumps({"data": [{"id": "m", "max_model_len": 32768}]}),
                                content_type="application/json")
        if request.path == "/v1/chat/completions":
            return web.Response(text=json.dumps({"choices": [{"message": {"role": "assistant", "content": "no"},
                                                              "finish_reason": "stop"}]}),
                                content_type="application/json")
        return web.Response(status=404, text="not found")

    import asyncio

    async def detect(url: str) -> Capabilities:
        async with EndpointClient(EndpointConfig(name="e", base_url=url, model="m")) as client:
            return await client.detect()

    with ThreadedServer(handler) as server:
        caps = asyncio.run(detect(server.url))
    assert caps.context_length == 32768 and caps.slots is None and caps.server == "vllm"
    assert caps.form == "json_schema"  # accepted (200) though the model did not comply
    assert set(caps.tried) == {"json_schema", "json_object_schema", "json_object", "none"}
