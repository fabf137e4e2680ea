"""The endpoint client against the simulated server over real HTTP on loopback."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from combee_fast.endpoint.client import ChatRequest, EndpointClient, EndpointConfig
from combee_fast.config import FaultConfig, TransportConfig
from combee_fast.sim.server import SimServer
from combee_fast.errors import ConfigError, EndpointUnreachable
from combee_fast.schema import Message
from tests.conftest import StartSimServer

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


TRANSPORT_FIELDS = set(TransportConfig.__struct_fields__)


def config(server: SimServer, **options: object) -> EndpointConfig:
    """An endpoint config for ``server``: fast backoff, 5 s timeout, ``options`` over them
    (transport fields go to its :class:`TransportConfig`)."""
    transport = {"backoff_base_s": 0.001, "timeout_s": 5.0, **{k: v for k, v in options.items() if k in TRANSPORT_FIELDS}}
    rest = {k: v for k, v in options.items() if k not in TRANSPORT_FIELDS}
    return EndpointConfig(**{"name": "sim", "base_url": server.url, "model": "m", **rest},  # type: ignore[arg-type]
                          transport=TransportConfig(**transport))


def ask(text: str, role: str = "generator", **options: object) -> ChatRequest:
    return ChatRequest(role=role, messages=(Message(role="user", content=text),), **options)  # type: ignore[arg-type]


async def test_free_text_call_reports_usage_and_simulated_latency(sim_server: SimServer) -> None:
    async with EndpointClient(config(sim_server)) as client:
        result = await client.chat(ask("four score and seven"))
    assert result.error is None and result.text == "four score and seven"
    assert result.finish_reason == "stop"
    usage = result.usage
    assert (usage.role, usage.model, usage.endpoint) == ("generator", "m", "sim")
    assert (usage.prompt_tokens, usage.completion_tokens, usage.retries, usage.cached) == (5, 5, 0, False)
    assert usage.sim_latency_s == pytest.approx(0.4 + 0.025 * 5)
    assert usage.latency_s > 0


async def test_json_schema_answer_is_parsed(sim_server: SimServer) -> None:
    async with EndpointClient(config(sim_server)) as client:
        result = await client.chat(ask("yes", json_schema=SCHEMA))
    assert result.error is None and result.data == {"answer": "yes"}


async def test_without_response_format_json_is_found_in_the_text(sim_server: SimServer) -> None:
    async with EndpointClient(config(sim_server, json_schema=False)) as client:
        found = await client.chat(ask('Here you go: {"answer": "42"} hope it helps', json_schema=SCHEMA))
        prose = await client.chat(ask("no json at all", json_schema=SCHEMA))
    assert found.error is None and found.data == {"answer": "42"}
    assert prose.error is not None and prose.error.kind == "malformed_json"
    assert "after one repair request" in prose.error.message and prose.data is None
    assert sim_server.counters().requests == 3  # one call, then one call plus its one repair


async def test_concurrency_cap_is_never_exceeded(sim_server: SimServer) -> None:
    async with EndpointClient(config(sim_server, concurrency=8)) as client:
        results = await asyncio.gather(*(client.chat(ask(f"q{i}")) for i in range(100)))
    assert all(result.error is None for result in results)
    counters = sim_server.counters()
    assert counters.peak_in_flight == 8 and counters.requests == 100


async def test_retries_recover_from_429_500_and_dropped_connections(start_sim_server: StartSimServer) -> None:
    faults = FaultConfig(rate_429=0.15, rate_500=0.15, rate_drop=0.15, retry_after_s=1.0)
    server = await start_sim_server(time_scale=0.001, faults=faults, seed=3)
    async with EndpointClient(config(server, max_retries=10, concurrency=16)) as client:
        results = await asyncio.gather(*(client.chat(ask(f"q{i}")) for i in range(120)))
        totals = client.usage_totals()[("generator", "m", "sim")]
    assert [result.text for result in results] == [f"q{i}" for i in range(120)]
    assert all(result.error is None for result in results)
    injected = server.counters().faults_injected
    assert injected["429"] and injected["500"] and injected["drop"]
    retries = sum(result.usage.retries for result in results)
    assert retries == totals.retries
    # a drop on a reused keep-alive connection is resent once on a new one, not retried (endpoint.http1)
    assert retries + client.resent == injected["429"] + injected["500"] + injected["drop"]
    assert totals.calls == 120 and totals.errors == 0


async def test_retry_after_is_honoured(start_sim_server: StartSimServer) -> None:
    faults = FaultConfig(rate_429=1.0, retry_after_s=150.0)  # 0.15 real seconds at time_scale 0.001
    server = await start_sim_server(time_scale=0.001, faults=faults)
    async with EndpointClient(config(server, max_retries=2)) as client:
        started = time.perf_counter()
        result = await client.chat(ask("q"))
        elapsed = time.perf_counter() - started
    assert result.error is not None and result.error.kind == "http_status" and result.error.status == 429
    assert result.usage.retries == 2 and server.counters().requests == 3
    assert elapsed >= 2 * 0.15  # exponential backoff alone would have waited ~3 ms
    # the waits count in simulated seconds too (2 x 150 s, +10% jitter, + real overhead / 0.001)
    assert result.usage.sim_latency_s is not None and 300 <= result.usage.sim_latency_s <= 330 + 100


async def test_stalled_request_times_out_and_is_retried(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(time_scale=0.001, faults=FaultConfig(rate_stall=1.0, stall_s=5000.0))
    async with EndpointClient(config(server, attempt_timeout_s=0.1, max_retries=1)) as client:
        result = await client.chat(ask("q"))
    assert result.error is not None and result.error.kind == "timeout" and "0.1 s" in result.error.message
    assert result.usage.retries == 1 and server.counters().requests == 2


async def test_the_call_timeout_bounds_every_attempt_and_wait_together(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(time_scale=0.001, faults=FaultConfig(rate_stall=1.0, stall_s=5000.0))
    async with EndpointClient(config(server, timeout_s=0.35, attempt_timeout_s=0.1, max_retries=50)) as client:
        started = time.perf_counter()
        result = await client.chat(ask("q"))
        elapsed = time.perf_counter() - started
    assert result.error is not None and result.error.kind == "timeout"
    assert "transport.timeout_s=0.35 s" in result.error.message
    assert 0.3 <= elapsed < 0.6 and 3 <= server.counters().requests <= 4  # not 51 attempts of 0.1 s


async def test_malformed_json_is_repaired_once_and_failures_stay_on_their_records(
    start_sim_server: StartSimServer,
) -> None:
    server = await start_sim_server(time_scale=0.001, faults=FaultConfig(rate_malformed=0.5), seed=11)
    async with EndpointClient(config(server)) as client:
        results = await asyncio.gather(*(client.chat(ask(f"q{i}", json_schema=SCHEMA)) for i in range(40)))
    failed = [result for result in results if result.error is not None]
    assert failed and len(failed) < 40
    for result in failed:
        assert result.error is not None and result.error.kind == "malformed_json"
        assert result.error.raw == result.text and result.data is None
    # the echo responder answers a repair request by echoing the repair instruction
    repaired = [r for r in results if r.error is None and r.data["answer"].startswith("Your previous reply")]
    assert repaired
    for i, result in enumerate(results):
        if result.error is None and result not in repaired:
            assert result.data == {"answer": f"q{i}"} and result.usage.prompt_tokens == 1
    for result in repaired:
        assert "(malformed_json: not JSON" in result.data["answer"]
    counters = server.counters()
    # every malformed first answer got exactly one repair request; a malformed repair is final
    assert counters.requests == 40 + len(repaired) + len(failed)
    assert counters.faults_injected["malformed"] == len(repaired) + 2 * len(failed)
    # ...and each repair request is in the accounting, as a retry of the kind that called for it
    assert counters.requests == sum(1 + r.usage.retries for r in results)
    assert all(r.usage.retry_kinds == ("malformed",) for r in [*repaired, *failed])


async def test_truncated_answers_are_typed_errors(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(time_scale=0.001, faults=FaultConfig(rate_truncated=1.0))
    async with EndpointClient(config(server)) as client:
        structured = await client.chat(ask("a fairly long answer " * 5, json_schema=SCHEMA))
        free = await client.chat(ask("a fairly long answer " * 5))
    assert structured.error is not None and structured.error.kind == "truncated"
    assert structured.finish_reason == "length"
    assert free.error is not None and free.error.kind == "truncated"
    assert free.text and free.error.raw == free.text
    assert server.counters().requests == 2  # a truncated reply is reported, never repaired by asking again


async def test_cancelling_mid_run_leaves_no_tasks_and_no_connections(start_sim_server: StartSimServer) -> None:
    """Cancelled requests close their connections (the server sees them go) without aclose()."""
    server = await start_sim_server(time_scale=2.0)  # every call takes >= 0.8 real seconds
    client = EndpointClient(config(server, concurrency=16))
    batch = asyncio.gather(*(client.chat(ask(f"q{i}")) for i in range(64)))
    await asyncio.sleep(0.05)
    assert client.in_flight == 16
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await batch
    assert client.in_flight == 0
    for _ in range(100):
        counters = server.counters()
        if counters.open_connections == 0 and counters.in_flight == 0:
            break
        await asyncio.sleep(0.01)
    assert counters.open_connections == 0 and counters.in_flight == 0 and counters.running == 0
    assert counters.completed == 0
    await client.aclose()
    await asyncio.sleep(0)  # let the server's connection tasks return
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_api_key_comes_from_the_environment(start_sim_server: StartSimServer,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    server = await start_sim_server(time_scale=0.001, api_key="sekrit")
    monkeypatch.setenv("SIM_KEY", "sekrit")
    async with EndpointClient(config(server, api_key_env="SIM_KEY", model="sim")) as client:
        await client.check()
        ok = await client.chat(ask("q"))
    monkeypatch.setenv("WRONG_KEY", "guess")
    async with EndpointClient(config(server, api_key_env="WRONG_KEY", model="sim")) as client:
        rejected = await client.chat(ask("q"))
        with pytest.raises(EndpointUnreachable, match="rejected the credentials: HTTP 401"):
            await client.check()
    assert ok.error is None and ok.text == "q"
    assert rejected.error is not None and rejected.error.status == 401 and rejected.usage.retries == 0


def test_missing_api_key_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    cfg = EndpointConfig(name="prod", base_url="http://127.0.0.1:9/v1", model="m", api_key_env="NO_SUCH_KEY")
    with pytest.raises(ConfigError, match="'prod'.*NO_SUCH_KEY"):
        EndpointClient(cfg)


@pytest.mark.slow
async def test_check_on_a_dead_endpoint_raises_one_clear_line() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cfg = EndpointConfig(name="dead", base_url=f"http://127.0.0.1:{port}/v1", model="m")
    async with EndpointClient(cfg) as client:
        with pytest.raises(EndpointUnreachable) as raised:
            await client.check()
        result = await client.chat(ask("q"))
    message = str(raised.value)
    assert message.startswith(f"endpoint 'dead' at http://127.0.0.1:{port}/v1 is unreachable: ")
    assert "\n" not in message
    assert result.error is not None and result.error.kind == "connection"


async def test_usage_totals_are_kept_per_role(sim_server: SimServer) -> None:
    async with EndpointClient(config(sim_server)) as client:
        await asyncio.gather(client.chat(ask("aaaa", role="reflector")), client.chat(ask("bbbbbbbb", role="curator")),
                             client.chat(ask("cccc", role="curator")))
        totals = client.usage_totals()
    assert set(totals) == {("reflector", "m", "sim"), ("curator", "m", "sim")}
    curator = totals[("curator", "m", "sim")]
    assert (curator.calls, curator.completion_tokens, curator.errors) == (2, 3, 0)
    assert curator.sim_latency_s == pytest.approx(2 * 0.4 + 3 * 0.025)


def test_a_bad_base_url_is_rejected_by_name() -> None:
    with pytest.raises(ConfigError, match="endpoint 'e': base_url must start with http"):
        EndpointConfig(name="e", base_url="127.0.0.1:8000", model="m")


@pytest.mark.parametrize("options, message", [
    ({"concurrency": 0}, "transport.concurrency must be >= 1"),
    ({"timeout_s": 0.0}, "transport.timeout_s must be > 0"),
    ({"max_retries": -1}, "transport.max_retries must be >= 0"),
])
def test_invalid_transport_values_are_rejected_by_name(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TransportConfig(**options)  # type: ignore[arg-type]
