"""The admission gate: at most ``limit`` at once, halved by a timeout, grown back by answers."""

from __future__ import annotations

import asyncio

from combee_fast.endpoint.client import EndpointClient
from combee_fast.endpoint.gate import AdmissionGate
from combee_fast.config import FaultConfig
from combee_fast.engine.events import Events, Overloaded
from tests.conftest import StartSimServer
from tests.endpoint.test_client import ask, config


async def test_the_limit_halves_on_overload_and_grows_back_one_window_at_a_time() -> None:
    gate = AdmissionGate(8)
    assert gate.overloaded(0) and gate.limit == 4
    assert not gate.overloaded(0) and gate.limit == 4  # admitted before the limit went down: once per episode
    assert gate.overloaded(1) and gate.overloaded(2) and gate.limit == 1
    assert not gate.overloaded(3) and gate.overloads == 3  # already at one
    for expected in (2, 3, 4):
        for _ in range(gate.limit):
            gate.answered()
        assert gate.limit == expected
    gate.set_ceiling(3)
    assert (gate.ceiling, gate.limit) == (3, 3)
    gate.answered()
    assert gate.limit == 3


async def test_waiters_are_admitted_in_order_and_a_cancelled_waiter_leaves_no_trace() -> None:
    gate = AdmissionGate(1)
    order: list[int] = []
    release = asyncio.Event()

    async def hold(index: int) -> None:
        async with gate:
            order.append(index)
            await release.wait()

    first = asyncio.create_task(hold(0))
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(hold(i)) for i in (1, 2, 3)]
    await asyncio.sleep(0)
    waiting[0].cancel()
    release.set()
    await asyncio.gather(first, *waiting[1:])
    assert order == [0, 2, 3] and gate.held == 0


async def test_timeouts_lower_the_requests_in_flight_and_say_so(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(time_scale=0.001, faults=FaultConfig(rate_stall=0.25, stall_s=5000.0), seed=1)
    told: list[tuple[str, int]] = []
    events = Events(lambda event: told.append((event.endpoint, event.limit)) if isinstance(event, Overloaded) else None)
    async with EndpointClient(config(server, attempt_timeout_s=0.2, timeout_s=30.0, max_retries=6, concurrency=16),
                              events=events) as client:
        results = await asyncio.gather(*(client.chat(ask(f"q{i}")) for i in range(48)))
        limit = client.gate.limit
    stalls = server.counters().faults_injected["stall"]
    assert stalls >= 2
    assert told and told[0] == ("sim", 8) and all(1 <= lowered < 16 for _, lowered in told)
    assert len(told) < stalls  # the stalls that hit together lowered the limit once
    assert limit < 16
    assert sum(result.error is None for result in results) >= 46
