"""The start-up batching probe against the simulated server on loopback: the curve, its gain and
best concurrency, the budget, failures, and where its calls are accounted."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from combee_fast.config import TransportConfig
from combee_fast.endpoint.batching import (PROBE_ROLE, MAX_LEVEL, RISE, BatchingCurve, BatchingPoint, measure_batching,
                                           probe_levels)
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.schema import Message
from combee_fast.sim.latency import LatencyPreset
from combee_fast.sim.server import SimRequest
from tests.hostile import HostileServer, Request, completion_body, head

FOUR_SLOTS = LatencyPreset(name="four-slots", overhead_s=0.05, decode_s_per_token=0.02, max_running=4,
                           full_batch_slowdown=1.2)
"""Four sequences at once, each a little slower the fuller the batch: tokens/s rises to 4, then flattens."""

SLOW = LatencyPreset(name="slow-cpu", overhead_s=0.5, decode_s_per_token=0.0)
"""Half a second a request, however many run at once (no batching at all)."""


def _client(server, **transport: object) -> EndpointClient:
    return EndpointClient(EndpointConfig(name="sim", base_url=server.url, model="sim",
                                         transport=TransportConfig(**transport)))


async def _timed_probe(client: EndpointClient, *, budget_s: float) -> tuple[BatchingCurve, float]:
    """``measure_batching(client, budget_s=...)`` and the wall seconds it took."""
    started = time.perf_counter()
    curve = await measure_batching(client, budget_s=budget_s)
    return curve, time.perf_counter() - started


def test_the_levels_double_up_to_the_cap() -> None:
    assert probe_levels(1) == (1,)
    assert probe_levels(6) == (1, 2, 4, 6)
    assert probe_levels(MAX_LEVEL) == (1, 2, 4, 8, 16, 32, 64)


def _curve(*rates: float) -> BatchingCurve:
    """The curve of levels 1, 2, 4, ... generating ``rates`` tokens/s."""
    return BatchingCurve.of([BatchingPoint(concurrency=2 ** i, latency_s=1.0, tokens_per_s=rate, prompt_tokens=20,
                                           completion_tokens=16) for i, rate in enumerate(rates)], stopped="flat")


def test_the_best_concurrency_is_the_smallest_level_no_later_level_rose_above() -> None:
    below_a_rise = 40.0 * (1 + RISE) - 0.1
    assert _curve(10.0, 20.0, 40.0, 42.0, below_a_rise).best_concurrency == 4  # 8 and 16 did not rise above 4
    assert _curve(10.0, 20.0, 40.0, 42.0, 42.0 * (1 + RISE)).best_concurrency == 16  # 16 rose above 8 and 4
    assert _curve(10.0, 10.5, 10.2).best_concurrency == 1
    assert _curve(0.0, 0.0).best_concurrency == 1 and _curve(0.0, 0.0).gain == 1.0


async def test_a_server_with_four_slots_peaks_at_four_and_the_calls_are_the_probes(start_sim_server) -> None:
    server = await start_sim_server(preset=FOUR_SLOTS, time_scale=0.05)
    async with _client(server) as client:
        curve, elapsed = await _timed_probe(client, budget_s=5.0)
        totals = client.usage_totals()
    assert [p.concurrency for p in curve.points] == [1, 2, 4, 8, 16]  # two levels past the peak
    assert curve.stopped == "flat" and curve.why == ""
    assert curve.best_concurrency == 4
    assert 3.0 < curve.gain < 4.0  # four at once, each decoding 1.2x slower at a full batch
    rates = [p.tokens_per_s for p in curve.points]
    assert rates[0] < rates[1] < rates[2] and rates[3] < 1.1 * rates[2] and rates[4] < 1.1 * rates[2]
    assert all(p.completion_tokens > 0 and p.prompt_tokens > 0 for p in curve.points)
    assert elapsed < 5.0
    assert set(key[0] for key in totals) == {PROBE_ROLE} and totals[(PROBE_ROLE, "sim", "sim")].calls == 31
    assert server.counters().requests_by_role == {PROBE_ROLE: 31}


async def test_a_slow_server_is_measured_at_fewer_levels_within_the_budget(start_sim_server) -> None:
    server = await start_sim_server(preset=SLOW, time_scale=1.0)
    async with _client(server) as client:
        curve, elapsed = await _timed_probe(client, budget_s=1.2)
    assert [p.concurrency for p in curve.points] == [1]  # 2 at once would take ~1 s more: past the budget
    assert curve.stopped == "budget" and "1.2 s budget" in curve.why and "concurrency 1 measured" in curve.why
    assert elapsed < 1.2


async def test_a_level_outlasting_the_budget_is_cancelled_and_left_out(start_sim_server) -> None:
    server = await start_sim_server(preset=SLOW, time_scale=1.0)
    async with _client(server) as client:
        curve, elapsed = await _timed_probe(client, budget_s=0.2)
    assert curve.points == () and curve.stopped == "budget" and "still running" in curve.why
    assert (curve.best_concurrency, curve.gain) == (1, 1.0)
    assert elapsed < 0.5


class _FailsFromTwo:
    """Answers the probe's first level; every request of its second level fails (HTTP 500)."""

    def __init__(self) -> None:
        self.seen: list[int | None] = []

    def respond(self, request: SimRequest) -> str:
        self.seen.append(request.seed)
        if request.seed is not None and request.seed >= 2 * (MAX_LEVEL + 1):
            raise RuntimeError("out of memory")
        return "1\n2\n3\n4\n5\n6\n7\n8"


async def test_a_failed_call_ends_the_curve_with_one_line_saying_why(start_sim_server) -> None:
    server = await start_sim_server(_FailsFromTwo(), preset=FOUR_SLOTS, time_scale=0.05)
    async with _client(server, max_retries=0) as client:
        curve = await measure_batching(client, budget_s=5.0)
    assert [p.concurrency for p in curve.points] == [1]
    assert curve.stopped == "error" and "a call at concurrency 2 failed" in curve.why and "500" in curve.why
    assert "\n" not in curve.why


async def test_each_request_sends_the_next_of_the_prompts_given(start_sim_server) -> None:
    """A bench measuring its own workload's ceiling passes that workload's prompts: the n-th request
    sends prompts[n % len(prompts)], so no level re-sends a prompt a slot may have cached."""
    server = await start_sim_server(preset=FOUR_SLOTS, time_scale=0.05)
    prompts = [(Message(role="user", content="word " * (40 * (n + 1))),) for n in range(7)]
    async with _client(server) as client:
        curve = await measure_batching(client, levels=(1, 2, 4), budget_s=5.0, prompts=prompts)
        with pytest.raises(ValueError, match="at least one prompt"):
            await measure_batching(client, prompts=())
    sizes = [p.prompt_tokens for p in curve.points]
    assert [p.concurrency for p in curve.points] == [1, 2, 4]
    assert sizes[0] < sizes[1] < sizes[2]  # prompts 0; 1-2; 3-6: each level's longer than the last's


class _FlatThenRising:
    """A server (:class:`~tests.hostile.HostileServer` behaviour) whose requests at once take
    :data:`SECONDS` by how many are in flight, each answering :data:`TOKENS` tokens: generated
    tokens/s is flat from one to two, doubles at four, then is flat again (a CPU server's shape)."""

    SECONDS = {1: 0.1, 2: 0.2, 4: 0.2, 8: 0.4, 16: 0.8}
    TOKENS = 32
    GATHER_S = 0.03  # how long a request waits for the rest of its level to arrive

    def __init__(self) -> None:
        self.in_flight = 0
        self.levels_seen: list[int] = []

    async def __call__(self, request: Request, writer: asyncio.StreamWriter) -> None:
        self.in_flight += 1
        try:
            await asyncio.sleep(self.GATHER_S)
            level = self.in_flight
            self.levels_seen.append(level)
            await asyncio.sleep(self.SECONDS[level] - self.GATHER_S)
        finally:
            self.in_flight -= 1
        body = json.loads(completion_body("1\n2\n3"))
        body["usage"] = {"prompt_tokens": 20, "completion_tokens": self.TOKENS, "total_tokens": 20 + self.TOKENS}
        data = json.dumps(body).encode()
        writer.write(head(200, [("Content-Type", "application/json")], length=len(data)) + data)


async def test_a_curve_flat_at_two_and_rising_at_four_is_measured_past_two() -> None:
    server_curve = _FlatThenRising()
    with HostileServer(server_curve, model="sim") as server:
        async with _client(server, concurrency=16, max_retries=0) as client:
            curve = await measure_batching(client, budget_s=10.0)
    assert sorted(set(server_curve.levels_seen)) == [1, 2, 4, 8, 16]
    assert [p.concurrency for p in curve.points] == [1, 2, 4, 8, 16]
    assert curve.stopped == "flat"  # 8 and 16 did not rise above 4
    assert curve.best_concurrency == 4 and 1.6 < curve.gain < 2.2
