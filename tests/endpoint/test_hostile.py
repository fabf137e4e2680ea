"""Every byte the client reads is bounded, whatever the server sends (a misbehaving server of our
own on loopback, tests/hostile.py): bad chunk sizes, gzip bombs, endless bodies at start-up and in
the probe, a trickling reply, header values that are not numbers."""

from __future__ import annotations

import resource
import time

import pytest

from combee_fast.config import TransportConfig
from combee_fast.endpoint.client import ChatRequest, EndpointClient, EndpointConfig
from combee_fast.errors import EndpointUnreachable
from combee_fast.schema import Message
from tests.hostile import (HostileServer, completion_body, endless, gzip_bomb, head, models_list, raw, respond,
                           trickle)

MiB = 2**20


def _config(server: HostileServer, **transport: object) -> EndpointConfig:
    options = {"max_retries": 0, "timeout_s": 10.0, "max_reply_bytes": MiB, **transport}
    return EndpointConfig(name="h", base_url=server.url, model="m", transport=TransportConfig(**options),  # type: ignore[arg-type]
                          response_format="none")


async def _chat(server: HostileServer, **transport: object):
    async with EndpointClient(_config(server, **transport)) as client:
        started = time.perf_counter()
        result = await client.chat(ChatRequest(role="generator", messages=(Message("user", "hi"),)))
        return result, time.perf_counter() - started


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


CHUNKED = head(200, [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")])


@pytest.mark.parametrize(("chunks", "kind", "said"), [
    (b"-6\r\nabcdef\r\n0\r\n\r\n", "malformed_json", "chunk size b'-6'"),
    (b"zz\r\nabcdef\r\n0\r\n\r\n", "malformed_json", "chunk size b'zz'"),
    (b"6\r\nabcdefXX0\r\n\r\n", "malformed_json", "not followed by CRLF"),
    (b"1" * 5000, "malformed_json", "chunk size line over"),
    (b"FFFFFFFFFF\r\nabc", "too_large", "over transport.max_reply_bytes"),
])
async def test_a_bad_chunk_size_is_a_malformed_reply_at_once(chunks: bytes, kind: str, said: str) -> None:
    with HostileServer(raw(CHUNKED + chunks)) as server:
        result, elapsed = await _chat(server)
    assert result.error is not None and result.error.kind == kind and said in result.error.message
    assert result.error.label == ("malformed" if kind == "malformed_json" else kind)
    assert elapsed < 5


async def test_a_gzip_bomb_is_refused_after_the_cap_of_inflated_bytes() -> None:
    before = _peak_rss()
    with HostileServer(gzip_bomb(512 * MiB)) as server:  # about 0.5 MiB on the wire
        result, elapsed = await _chat(server)
    assert result.error is not None and result.error.kind == "too_large"
    assert "inflating past transport.max_reply_bytes=1048576" in result.error.message
    assert _peak_rss() - before < 100 * MiB and elapsed < 10


async def test_a_trickling_reply_is_given_up_at_the_call_timeout() -> None:
    with HostileServer(trickle(200, completion_body(), every_s=0.05)) as server:
        result, elapsed = await _chat(server, timeout_s=1.0, max_retries=5, backoff_base_s=0.01)
    assert result.error is not None and result.error.kind == "timeout"
    assert elapsed < 2.5  # one call, however many attempts: not 6 x the timeout
    assert len(server.requests) >= 1


@pytest.mark.parametrize(("value", "retried", "said"), [
    ("nan", True, None), ("NaN", True, None), ("-5", True, None), ("Wed, 21 Oct 2015 07:28:00 GMT", True, None),
    ("inf", False, "asked to wait inf s"), ("1e999", False, "asked to wait inf s"), ("soon", True, None),
])
async def test_a_retry_after_that_is_not_a_number_of_seconds_is_no_traceback(value: str, retried: bool,
                                                                             said: str | None) -> None:
    for header in ("Retry-After", "retry-after-ms"):
        with HostileServer(respond(429, '{"error": "slow down"}', [(header, value)])) as server:
            result, _ = await _chat(server, max_retries=2, backoff_base_s=0.001)
        assert result.error is not None and result.error.label == "429"
        assert len(server.requests) == (3 if retried else 1), (header, value)
        if said is not None and header == "Retry-After":
            assert said in result.error.message


async def test_token_counts_and_latencies_that_are_not_numbers_are_not_used() -> None:
    negative = completion_body().replace(b'"prompt_tokens": 5', b'"prompt_tokens": -5')
    with HostileServer(respond(200, negative)) as server:
        result, _ = await _chat(server)
    assert result.error is not None and result.error.label == "malformed" and "$.usage.prompt_tokens" in result.error.message
    with HostileServer(respond(200, completion_body(), [("X-Combee-Sim-Latency", "nan"),
                                                        ("X-Combee-Time-Scale", "-1")])) as server:
        result, _ = await _chat(server)
    assert result.error is None and result.usage.sim_latency_s is None


@pytest.mark.parametrize("models", ["endless", "bomb"])
async def test_the_start_up_check_reads_a_bounded_body(models: str) -> None:
    behaviour = endless() if models == "endless" else gzip_bomb(256 * MiB)
    before = _peak_rss()
    with HostileServer(endless(), models=behaviour) as server:
        async with EndpointClient(_config(server)) as client:
            started = time.perf_counter()
            with pytest.raises(EndpointUnreachable) as failed:
                await client.check()
            elapsed = time.perf_counter() - started
    message = str(failed.value)
    assert "unusable body" in message and "max_reply_bytes=1048576" in message and "\n" not in message
    assert _peak_rss() - before < 100 * MiB and elapsed < 10


async def test_the_capabilities_probe_reads_a_bounded_body() -> None:
    before = _peak_rss()
    with HostileServer(endless()) as server:  # /props, /tokenize and every probe completion: endless
        config = EndpointConfig(name="h", base_url=server.url, model="m",
                                transport=TransportConfig(max_retries=0, timeout_s=10.0, max_reply_bytes=MiB))
        async with EndpointClient(config) as client:
            found = await client.detect()
    assert found.form == "none" and all("unreadable answer" in what for what in found.tried.values())
    assert _peak_rss() - before < 100 * MiB


async def test_a_proper_reply_still_reads() -> None:
    with HostileServer(respond(200, completion_body("fine")), models=models_list("m")) as server:
        result, _ = await _chat(server)
    assert result.error is None and result.text == "fine"
