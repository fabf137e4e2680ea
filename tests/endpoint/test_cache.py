"""Record/replay cache: keys, the file, and replay through the client over real HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from combee_fast.endpoint.cache import CacheMode, ReplayCache, request_key
from combee_fast.errors import ReplayCacheError
from combee_fast.endpoint.client import ChatRequest, ChatResult, EndpointClient, EndpointConfig
from combee_fast.config import FaultConfig, TransportConfig
from combee_fast.sim.server import SimServer
from combee_fast.schema import CallError, Message, Usage
from tests.conftest import StartSimServer

SCHEMA = {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}}


def ask(text: str, **options: object) -> ChatRequest:
    return ChatRequest(role="reflector", messages=(Message(role="user", content=text),), **options)  # type: ignore[arg-type]


def client_for(server: SimServer, cache: ReplayCache) -> EndpointClient:
    return EndpointClient(EndpointConfig(name="sim", base_url=server.url, model="m", transport=TransportConfig(backoff_base_s=0.001)),
                          cache=cache)


def test_key_is_stable_and_covers_what_changes_the_answer() -> None:
    base = ask("q", json_schema={"type": "object", "required": ["a"]})
    same = ask("q", json_schema={"required": ["a"], "type": "object"})  # key order does not matter
    assert request_key("m", base) == request_key("m", same)
    assert len(request_key("m", base)) == 64
    variants = [
        msgspec.structs.replace(base, seed=1),
        msgspec.structs.replace(base, temperature=0.7),
        msgspec.structs.replace(base, max_tokens=10),
        msgspec.structs.replace(base, role="curator"),
        msgspec.structs.replace(base, json_schema=None),
        msgspec.structs.replace(base, messages=(Message(role="system", content="q"),)),
    ]
    keys = {request_key("m", v) for v in variants} | {request_key("m2", base), request_key("m", base)}
    assert len(keys) == len(variants) + 2


async def test_replay_is_identical_and_sends_nothing(start_sim_server: StartSimServer, tmp_path: Path) -> None:
    server = await start_sim_server(time_scale=0.001, latency_jitter=0.5, seed=5,
                                    faults=FaultConfig(rate_malformed=0.3))
    path = tmp_path / "cache.jsonl"
    requests = [ask(f"q{i}", json_schema=SCHEMA) for i in range(30)] + [ask(f"free {i}") for i in range(10)]
    recording = ReplayCache(path, CacheMode.RECORD)
    async with client_for(server, recording) as client:
        recorded = await asyncio.gather(*(client.chat(r) for r in requests))
    recording.close()
    sent = server.counters().requests

    replaying = ReplayCache(path, CacheMode.REPLAY)
    assert len(replaying) == len(requests)
    async with client_for(server, replaying) as client:
        replayed = await asyncio.gather(*(client.chat(r) for r in requests))
        totals = client.usage_totals()[("reflector", "m", "sim")]
    assert server.counters().requests == sent  # nothing sent
    expected = [msgspec.structs.replace(r, usage=msgspec.structs.replace(r.usage, cached=True)) for r in recorded]
    assert replayed == expected
    assert any(r.error is not None for r in replayed)  # recorded failures replay as failures
    assert totals.cached == totals.calls == len(requests)
    assert totals.sim_latency_s == pytest.approx(sum(r.usage.sim_latency_s or 0.0 for r in recorded))


async def test_a_request_repeated_while_recording_gets_the_answer_its_replay_will_give(
        start_sim_server: StartSimServer, tmp_path: Path) -> None:
    # a jittery server answers identical requests with different latencies; a replay holds one
    # result per request, so the recorded run must have used that one result for every repeat
    server = await start_sim_server(time_scale=0.001, latency_jitter=0.5, seed=3)
    path = tmp_path / "cache.jsonl"
    requests = [ask(f"q{i % 5}") for i in range(20)]  # each request four times, concurrently
    recording = ReplayCache(path, CacheMode.RECORD)
    async with client_for(server, recording) as client:
        recorded = await asyncio.gather(*(client.chat(r) for r in requests))
        again = await client.chat(ask("q0"))  # and once more after they ended
    recording.close()
    assert server.counters().requests == 5  # one call per distinct request
    assert len(path.read_bytes().splitlines()) == 5
    latencies = {r.usage.sim_latency_s for r in recorded[0::5]} | {again.usage.sim_latency_s}
    assert len(latencies) == 1 and again.usage.cached

    async with client_for(server, ReplayCache(path, CacheMode.REPLAY)) as client:
        replayed = await asyncio.gather(*(client.chat(r) for r in requests))
    assert [r.usage.sim_latency_s for r in replayed] == [r.usage.sim_latency_s for r in recorded]
    assert [r.text for r in replayed] == [r.text for r in recorded]


async def test_a_repeat_of_a_request_that_failed_in_transport_calls_again(
        start_sim_server: StartSimServer, tmp_path: Path) -> None:
    server = await start_sim_server(time_scale=0.001, faults=FaultConfig(rate_500=1.0))
    cache = ReplayCache(tmp_path / "c.jsonl", CacheMode.RECORD)
    async with client_for(server, cache) as client:
        results = await asyncio.gather(*(client.chat(ask("q")) for _ in range(3)))
    cache.close()
    assert all(r.error is not None and r.error.kind == "http_status" for r in results)
    assert not any(r.usage.cached for r in results)  # nothing recorded to answer them with


async def test_replay_miss_is_a_typed_error(sim_server: SimServer, tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"")
    async with client_for(sim_server, ReplayCache(path, CacheMode.REPLAY)) as client:
        result = await client.chat(ask("never recorded"))
    assert result.error is not None and result.error.kind == "replay_miss"
    assert str(path) in result.error.message and result.text is None
    assert sim_server.counters().requests == 0


async def test_record_missing_calls_only_for_misses(sim_server: SimServer, tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    first = ReplayCache(path, CacheMode.RECORD_MISSING)
    async with client_for(sim_server, first) as client:
        await client.chat(ask("a"))
        await client.chat(ask("a"))
    first.close()
    assert sim_server.counters().requests == 1
    second = ReplayCache(path, CacheMode.RECORD_MISSING)
    async with client_for(sim_server, second) as client:
        hit = await client.chat(ask("a"))
        miss = await client.chat(ask("b"))
    second.close()
    assert hit.usage.cached and not miss.usage.cached
    assert sim_server.counters().requests == 2
    assert len(path.read_bytes().splitlines()) == 2


async def test_transport_failures_are_not_recorded(start_sim_server: StartSimServer, tmp_path: Path) -> None:
    server = await start_sim_server(time_scale=0.001, faults=FaultConfig(rate_500=1.0))
    cache = ReplayCache(tmp_path / "c.jsonl", CacheMode.RECORD)
    async with client_for(server, cache) as client:
        result = await client.chat(ask("q"))
    cache.close()
    assert result.error is not None and result.error.kind == "http_status"
    assert (tmp_path / "c.jsonl").read_bytes() == b""


def test_later_records_win_and_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "c.jsonl"
    cache = ReplayCache(path, CacheMode.RECORD)
    old = ChatResult(text="old", usage=Usage(role="r"))
    new = ChatResult(text="new", usage=Usage(role="r"), error=CallError(kind="truncated", message="cut"))
    cache.put("k", old)
    cache.put("k", new)
    cache.close()
    reopened = ReplayCache(path, CacheMode.REPLAY)
    assert reopened.get("k") == msgspec.structs.replace(new, usage=Usage(role="r", cached=True))
    assert reopened.get("other") is None
    with pytest.raises(ReplayCacheError, match="mode 'replay' cannot record"):
        reopened.put("k", old)


def test_corrupt_line_is_named_by_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    cache = ReplayCache(path, CacheMode.RECORD)
    cache.put("k", ChatResult(text="x", usage=Usage()))
    cache.close()
    with path.open("ab") as f:
        f.write(b'{"key": "k2", "result": {"text": 5}}\n')
    with pytest.raises(ReplayCacheError, match=rf"{path}:2: bad cache record"):
        ReplayCache(path, CacheMode.REPLAY)


def test_replay_of_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ReplayCacheError, match="does not exist"):
        ReplayCache(tmp_path / "absent.jsonl", CacheMode.REPLAY)
    fresh = ReplayCache(tmp_path / "absent.jsonl", CacheMode.RECORD_MISSING)
    assert len(fresh) == 0
    fresh.close()
