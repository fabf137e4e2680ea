"""A llama.cpp server's own count of its work (``GET /metrics``): read from a recorded reply, from
servers that do not count it, and from the real local server before and after a call."""

from __future__ import annotations

from pathlib import Path

import pytest

from combee_fast.config import LocalConfig, TransportConfig
from combee_fast.endpoint.calls import ChatRequest
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.endpoint.local import LocalServer
from combee_fast.endpoint.server_work import ServerWork, parse_server_work, read_server_work
from combee_fast.schema import Message
from tests.local_models import LOCAL_MODEL_MARKS

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


@local_model
async def test_the_local_server_counts_the_tokens_of_a_call() -> None:
    async with LocalServer(LocalConfig()) as server:
        before = await read_server_work(server.url)
        client = EndpointClient(EndpointConfig(name="local", base_url=server.url, model=server.alias, json_schema=False,
                                               transport=TransportConfig(timeout_s=120.0, max_retries=0)))
        try:
            reply = await client.chat(ChatRequest(role="generator", max_tokens=8, temperature=0.0, seed=1, messages=(
                Message(role="user", content="Count from one to twenty in words, separated by commas."),)))
        finally:
            await client.aclose()
        after = await read_server_work(server.url)
    assert before is not None and after is not None, "the local server serves no /metrics"
    assert reply.usage.completion_tokens == 8, reply  # cut at max_tokens: the answer is longer
    done = after.since(before)
    assert done.generated_tokens == reply.usage.completion_tokens
    assert done.prompt_tokens + (done.cached_tokens or 0) == reply.usage.prompt_tokens
    assert done.prompt_s > 0 and done.generate_s > 0 and 0 < done.prefill_share < 1
