"""The simulated inference server over real HTTP on loopback (plain aiohttp client)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from typing import Any

import aiohttp
import pytest

from combee_fast.config import FaultConfig
from combee_fast.sim.server import LatencyPreset, SimRequest, SimServer, TemplateResponder
from combee_fast.errors import ConfigError
from combee_fast.tokens import estimate_tokens
from tests.conftest import StartSimServer

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}, "n": {"type": "integer"}},
          "required": ["answer", "n"]}


def body(content: str, **fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "system", "content": "be brief"},
                                       {"role": "user", "content": content}], **fields}


async def post(server: SimServer, payload: dict[str, Any], role: str = "generator") -> tuple[int, dict[str, Any], Any]:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{server.url}/chat/completions", json=payload,
                                headers={"X-Combee-Role": role}) as response:
            return response.status, dict(response.headers), await response.json(content_type=None)


async def test_flat_latency_and_token_counts_are_exact(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(time_scale=0.01)
    content = "x" * 203  # 51 completion tokens echoed back
    started = time.perf_counter()
    status, headers, answer = await post(server, body(content))
    wall = time.perf_counter() - started
    assert status == 200
    assert answer["choices"][0]["message"]["content"] == content
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"] == {"prompt_tokens": estimate_tokens("be brief" + content),
                               "completion_tokens": 51, "total_tokens": estimate_tokens("be brief" + content) + 51,
                               "prompt_tokens_details": None}  # it caches no prompt
    sim_latency = float(headers["X-Combee-Sim-Latency"])
    assert sim_latency == pytest.approx(0.4 + 0.025 * 51, abs=1e-9)
    assert wall >= sim_latency * 0.01  # it really slept the scaled time


async def test_completion_is_cut_at_max_tokens(sim_server: SimServer) -> None:
    status, headers, answer = await post(sim_server, body("y" * 400, max_tokens=10))
    assert status == 200
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "length" and choice["message"]["content"] == "y" * 40
    assert answer["usage"]["completion_tokens"] == 10
    assert float(headers["X-Combee-Sim-Latency"]) == pytest.approx(0.4 + 0.025 * 10)


async def test_json_schema_response_format_gets_a_matching_object(sim_server: SimServer) -> None:
    response_format = {"type": "json_schema", "json_schema": {"name": "out", "schema": SCHEMA}}
    status, _, answer = await post(sim_server, body("hello", response_format=response_format))
    assert status == 200
    assert answer["choices"][0]["message"]["content"] == '{"answer":"hello","n":0}'


async def test_h200_preset_queues_requests_beyond_max_running(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(preset="h200-70b", time_scale=0.05)  # ~1 s real per wave: all arrive first
    capacity = server.preset.max_running
    long_answer = "z" * 1600  # 400 completion tokens: the first wave runs ~20 simulated seconds
    results = await asyncio.gather(*(post(server, body(long_answer)) for _ in range(capacity + 4)))
    latencies = sorted(float(headers["X-Combee-Sim-Latency"]) for _, headers, _ in results)
    counters = server.counters()
    assert counters.queue_peak == 4 and counters.peak_in_flight == capacity + 4
    assert counters.queued == 0 and counters.running == 0
    single = server.preset.first_token_s(estimate_tokens("be brief" + long_answer)) + 400 * 0.030
    assert latencies[0] > single * 1.4  # a full batch decodes much slower than a lone sequence
    # the 4 queued requests waited for first-wave requests to finish before starting
    assert latencies[-4] > single + 0.5 * latencies[0]


async def test_counters_and_responder_timing(start_sim_server: StartSimServer) -> None:
    responder = TemplateResponder({"curator": "curate {n_messages}"}, default="{role}:{last_user}")
    server = await start_sim_server(responder, time_scale=0.001)
    answers = [await post(server, body("q"), role=role) for role in ("curator", "reflector", "reflector")]
    assert [a["choices"][0]["message"]["content"] for _, _, a in answers] == ["curate 2", "reflector:q", "reflector:q"]
    counters = server.counters()
    assert counters.requests_by_role == {"curator": 1, "reflector": 2}
    assert counters.requests == counters.completed == counters.responder_calls == 3
    assert 0 < counters.responder_max_s <= counters.responder_total_s


async def test_counters_and_models_over_http(sim_server: SimServer) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{sim_server.url}/models") as response:
            assert (await response.json())["data"][0]["id"] == "sim"
        async with session.get(f"{sim_server.url}/combee/counters") as response:
            assert (await response.json())["requests"] == 0


async def test_bad_body_and_unknown_route_get_clear_errors(sim_server: SimServer) -> None:
    status, _, answer = await post(sim_server, {"model": "m", "messages": "not a list"})
    assert status == 400 and "invalid chat-completions body" in answer["error"]["message"]
    assert "$.messages" in answer["error"]["message"]
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{sim_server.url}/nothing") as response:
            assert response.status == 404


async def test_faults_are_seeded_and_counted(start_sim_server: StartSimServer) -> None:
    faults = FaultConfig(rate_429=0.2, rate_500=0.2, rate_truncated=0.2, retry_after_s=3.0)
    outcomes = []
    for _ in range(2):
        server = await start_sim_server(time_scale=0.001, faults=faults, seed=7)
        statuses = [(status, answer.get("choices", [{}])[0].get("finish_reason"), headers.get("Retry-After"))
                    for status, headers, answer in [await post(server, body("abcdefgh" * 10)) for _ in range(30)]]
        outcomes.append(statuses)
        injected = server.counters().faults_injected
        assert injected["429"] == sum(1 for s, _, _ in statuses if s == 429)
        assert injected["500"] == sum(1 for s, _, _ in statuses if s == 500)
        assert injected["truncated"] == sum(1 for _, f, _ in statuses if f == "length")
    assert outcomes[0] == outcomes[1]
    assert {retry_after for status, _, retry_after in outcomes[0] if status == 429} == {"1"}  # ceil(3 * 0.001)


async def test_a_requests_fault_depends_on_its_body_and_its_resends_not_on_arrival_order(
        start_sim_server: StartSimServer) -> None:
    faults = FaultConfig(rate_429=0.2, rate_500=0.2, rate_truncated=0.2)
    texts = [f"question {i}" for i in range(12)]
    outcomes = []
    for order in (texts, texts[::-1]):
        server = await start_sim_server(time_scale=0.001, faults=faults, seed=7)
        seen: dict[str, list[tuple[int, str | None]]] = {}
        for text in order:
            for _ in range(3):  # the same body again, as a retry sends it
                status, _, answer = await post(server, body(text))
                seen.setdefault(text, []).append((status, answer.get("choices", [{}])[0].get("finish_reason")))
        outcomes.append(seen)
    assert outcomes[0] == outcomes[1]
    assert any(len(set(draws)) > 1 for draws in outcomes[0].values()), "a resent body draws afresh"


async def test_api_key_is_required_when_configured(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(time_scale=0.001, api_key="sekrit")
    status, _, answer = await post(server, body("hi"))
    assert status == 401 and "API key" in answer["error"]["message"]


@pytest.mark.parametrize("options, message", [
    ({"time_scale": 0.0}, "time_scale must be a number of real seconds per simulated second"),
    ({"latency_jitter": 1.0}, r"latency_jitter must be in \[0, 1\)"),
    ({"preset": "tpu"}, "unknown latency preset 'tpu'"),
])
def test_invalid_server_options_are_rejected(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SimServer(TemplateResponder({}), **options)


def test_invalid_fault_rates_are_rejected() -> None:
    with pytest.raises(ConfigError, match="sum to 1.5"):
        FaultConfig(rate_500=0.9, rate_drop=0.6)
    with pytest.raises(ConfigError, match=r"rate_stall must be in \[0, 1\], got -0.1"):
        FaultConfig(rate_stall=-0.1)


def test_sim_request_last_user_content() -> None:
    request = SimRequest(role="r", model="m", messages=(), max_tokens=1, temperature=0.0, seed=None, json_schema=None)
    assert request.last_user_content == ""


async def test_stopped_server_closes_every_connection(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(preset=LatencyPreset.constant(0.0))
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{server.url}/chat/completions", json=body("a")) as response:
            assert response.status == 200
        assert server.counters().open_connections == 1  # kept alive
        await server.stop()
        assert server.counters().open_connections == 0


async def test_sim_server_cli_serves_until_interrupted() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "combee_fast.sim.cli", "sim-server", "--port", "0",
        "--preset", "h200-70b", "--time-scale", "0.001", "--rate-500", "0.0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 20)).decode()
    assert line.startswith("listening on http://127.0.0.1:")
    url = line.removeprefix("listening on ").strip()
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/chat/completions", json=body("hi")) as response:
            assert response.status == 200 and float(response.headers["X-Combee-Sim-Latency"]) > 0.05
    process.send_signal(signal.SIGINT)
    _, errors = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 0 and b"stopped after 1 requests" in errors


def test_sim_server_cli_rejects_bad_fault_rates() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "combee_fast.sim.cli", "sim-server", "--rate-429", "0.7", "--rate-drop", "0.7"],
        capture_output=True, text=True, timeout=30,
    )
    assert done.returncode == 2 and "sim-server: fault rates sum to 1.4" in done.stderr


async def test_counters_report_busy_simulated_seconds(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(time_scale=0.01)
    assert server.counters().busy_s == 0.0
    await asyncio.gather(post(server, body("x" * 203)), post(server, body("x" * 203)))  # 1.675 s each, together
    busy = server.counters().busy_s
    assert busy == pytest.approx(0.4 + 0.025 * 51, rel=0.05)
    await asyncio.sleep(0.02)  # two idle simulated seconds
    assert server.counters().busy_s == busy


def test_sim_server_refuses_an_unknown_world_variant_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "combee_fast.sim.cli", "sim-server", "--world", "formula", "--world-variant", "chatty"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2 and "unknown task-world variant 'chatty'" in done.stderr
    assert done.stderr.count("\n") == 1


async def test_servers_with_reuse_port_share_one_port() -> None:
    async with SimServer(TemplateResponder({"default": "ok"}), preset=LatencyPreset.constant(0.0),
                         reuse_port=True) as first:
        port = int(first.url.rsplit(":", 1)[1].split("/")[0])
        async with SimServer(TemplateResponder({"default": "ok"}), preset=LatencyPreset.constant(0.0),
                             port=port, reuse_port=True) as second:
            assert second.url == first.url
            for _ in range(64):  # a new connection each: the kernel spreads them over both listeners
                async with aiohttp.ClientSession() as session:
                    async with session.post(f"{first.url}/chat/completions", json=body("hi")) as response:
                        assert response.status == 200
            served = (first.counters().completed, second.counters().completed)
    assert sum(served) == 64 and min(served) > 0, served


def test_a_sleep_without_bound_or_a_latency_that_is_no_number_is_refused(tmp_path) -> None:
    """A time scale of 1e308 real seconds per simulated second slept for ever (no signal ended the
    run), a NaN or infinite latency never answered: refused when the server is made, and through
    the CLI in one line, exit 2, before a run folder is made."""
    for scale in (1e308, float("nan"), float("inf"), 0.0):
        with pytest.raises(ConfigError, match=r"time_scale must be a number of real seconds per simulated second"):
            SimServer(TemplateResponder({}), time_scale=scale)
    for seconds in (float("inf"), float("nan"), -1.0, 1e6):
        with pytest.raises(ConfigError, match=r"latencies must be numbers from 0 to 3600 s"):
            LatencyPreset.constant(seconds)
    with pytest.raises(ConfigError, match=r"prefill_tokens_per_s must be a number > 0"):
        LatencyPreset("p", 0.1, 0.01, prefill_tokens_per_s=float("nan"))
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", "--train-split", "train[0:4]",
                           "--time-scale", "1e308", "--out", str(tmp_path / "run"), "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not (tmp_path / "run").exists()
    assert done.stderr.strip().splitlines() == [
        "combee learn: error: time_scale must be a number of real seconds per simulated second in (0, 100], got 1e+308"]
    served = subprocess.run([sys.executable, "-m", "combee_fast.cli", "sim-server", "--constant-latency", "nan",
                             "--port", "0"], capture_output=True, text=True, timeout=60)
    assert served.returncode == 2 and served.stderr.strip().splitlines()[-1].startswith(
        "sim-server: latency preset 'constant-nan': latencies must be numbers from 0 to 3600 s")
