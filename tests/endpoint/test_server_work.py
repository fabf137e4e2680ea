"""A llama.cpp server's own count of its work (``GET /metrics``): read from a recorded reply, from
servers that do not count it, behind an API key, summed over servers, and from the real local
server before and after a call, by the endpoint client once it found a llama.cpp server."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from combee_fast.config import LocalConfig, TransportConfig
from combee_fast.endpoint.calls import ChatRequest
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.endpoint.local import LocalServer
from combee_fast.endpoint.server_work import ServerWork, parse_server_work, read_server_work, work_since
from combee_fast.schema import Message
from tests.local_models import LOCAL_MODEL_MARKS, THREADS

RECORDED = Path(__file__).parent.parent / "data" / "llamacpp-metrics.txt"
"""``GET /metrics`` of the local server (xllamacpp) after its start-up self-test, recorded here."""


def local_model(test):
    """``test`` with :data:`~tests.local_models.LOCAL_MODEL_MARKS` (the others here need no model)."""
    for mark in reversed(LOCAL_MODEL_MARKS):
        test = mark(test)
    return test


def test_a_recorded_reply_gives_the_four_counters_and_the_cached_tokens() -> None:
    work = parse_server_work(RECORDED.read_text())
    assert work == ServerWork(prompt_tokens=32, prompt_s=0.297829, generated_tokens=1, generate_s=1e-06,
                              cached_tokens=0)
    assert work.prefill_share == pytest.approx(0.297829 / (0.297829 + 1e-06))
    assert work.cached_share == 0.0


def test_a_reply_without_a_counter_or_with_a_word_for_a_number_gives_none() -> None:
    text = RECORDED.read_text()
    assert parse_server_work(text.replace("llamacpp:tokens_predicted_seconds_total", "other")) is None
    assert parse_server_work(text.replace("llamacpp:prompt_seconds_total 0.297829", "llamacpp:prompt_seconds_total x")) is None
    # an older server that does not count cached tokens still gives the four
    older = parse_server_work(text.replace("llamacpp:prompt_tokens_cached_total", "other"))
    assert older is not None and older.cached_tokens is None and older.cached_share is None


def test_work_since_an_earlier_reading_and_a_server_that_did_nothing() -> None:
    earlier = ServerWork(100, 1.0, 10, 0.5, 40)
    later = ServerWork(300, 3.0, 70, 2.5, 240)
    assert later.since(earlier) == ServerWork(200, 2.0, 60, 2.0, 200)
    assert later.since(earlier).prefill_share == 0.5 and later.since(earlier).cached_share == 0.5
    assert later.since(later).prefill_share is None and later.since(later).cached_share is None
    assert later.since(ServerWork(100, 1.0, 10, 0.5)).cached_tokens is None


async def test_a_server_without_metrics_or_not_answering_gives_none(start_sim_server) -> None:
    server = await start_sim_server()
    assert await read_server_work(server.url) is None  # the simulated server: no /metrics
    assert await read_server_work("http://127.0.0.1:9/v1", timeout_s=2.0) is None  # nothing listening


def test_the_work_of_several_servers_is_summed_over_those_read_before_and_after() -> None:
    a0, a1 = ServerWork(100, 1.0, 10, 0.5, 40, ("http://a",)), ServerWork(300, 3.0, 70, 2.5, 240, ("http://a",))
    b0, b1 = ServerWork(0, 0.0, 0, 0.0, None, ("http://b",)), ServerWork(50, 1.0, 5, 1.0, None, ("http://b",))
    both = work_since({"http://a": a1, "http://b": b1}, {"http://a": a0, "http://b": b0})
    assert both == ServerWork(250, 3.0, 65, 3.0, None, ("http://a", "http://b"))  # b counts no cached tokens
    # a server read only once (it died, or came up mid-run) is left out; none read twice: no work
    assert work_since({"http://a": a1, "http://b": b1}, {"http://a": a0}) == a1.since(a0)
    assert work_since({"http://b": b1}, {"http://a": a0}) is None


async def test_counters_behind_an_api_key_are_read_with_the_endpoints_credentials_and_a_flood_is_none() -> None:
    from aiohttp import web

    recorded = RECORDED.read_text()
    replies = [recorded.encode(), recorded.encode() + b"# padding\n" * 200_000, b"\xff\xfe" + recorded.encode()]

    async def metrics(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != "Bearer k1":
            return web.json_response({"error": {"message": "Invalid API Key"}}, status=401)
        return web.Response(body=replies[0], content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        root = f"http://{host}:{port}"
        assert await read_server_work(root + "/v1") is None  # 401 without the key
        work = await read_server_work(root + "/v1", headers={"Authorization": "Bearer k1"})
        for _ in range(2):  # 2 MB of counters, then bytes that are not text: not read
            replies.pop(0)
            assert await read_server_work(root, headers={"Authorization": "Bearer k1"}) is None
    finally:
        await runner.cleanup()
    assert work == msgspec.structs.replace(parse_server_work(recorded), servers=(root,))


async def test_an_endpoint_not_found_to_be_llama_cpp_is_not_asked_for_counters(start_sim_server) -> None:
    server = await start_sim_server()
    async with EndpointClient(EndpointConfig(name="sim", base_url=server.url, model="sim")) as client:
        await client.detect()
        asked = server.counters().requests
        assert client.capabilities.server is None and await client.server_work() is None
        assert server.counters().requests == asked  # nothing sent


@local_model
async def test_the_local_server_counts_the_tokens_of_a_call() -> None:
    async with LocalServer(LocalConfig(threads=THREADS)) as server:
        before = await read_server_work(server.url)
        client = EndpointClient(EndpointConfig(name="local", base_url=server.url, model=server.alias, json_schema=False,
                                               transport=TransportConfig(timeout_s=120.0, max_retries=0)))
        try:
            unprobed = await client.server_work()  # not yet known to be llama.cpp: not asked
            reply = await client.chat(ChatRequest(role="generator", max_tokens=8, temperature=0.0, seed=1, messages=(
                Message(role="user", content="Count from one to twenty in words, separated by commas."),)))
            after = await read_server_work(server.url)
            await client.detect()
            probed = await client.server_work()  # the endpoint's own reading, as a run's
        finally:
            await client.aclose()
    assert unprobed is None and client.capabilities.server == "llama.cpp"
    assert before is not None and after is not None and probed is not None, "the local server serves no /metrics"
    assert reply.usage.completion_tokens == 8, reply  # cut at max_tokens: the answer is longer
    done = after.since(before)
    assert done.generated_tokens == reply.usage.completion_tokens
    assert done.prompt_tokens + (done.cached_tokens or 0) == reply.usage.prompt_tokens
    assert done.prompt_s > 0 and done.generate_s > 0 and 0 < done.prefill_share < 1
    assert after.servers == probed.servers == (server.url.removesuffix("/v1"),)
    assert probed.generated_tokens >= after.generated_tokens  # detect() probed with calls of its own
