"""Calls in flight per role, counted by the endpoint client where attempts start and finish: the
most at once never passes the client's cap, and the time-weighted mean is over busy time only."""

from __future__ import annotations

import asyncio

from combee_fast.config import TransportConfig
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.endpoint.inflight import InFlight
from combee_fast.schema import Message
from combee_fast.endpoint.calls import ChatRequest
from combee_fast.sim.server import SimServer


def test_the_meter_weights_calls_in_flight_by_time_while_busy() -> None:
    meter = InFlight()
    meter.enter(0.0)
    meter.enter(1.0)  # two in flight from 1 s to 3 s
    meter.leave(3.0)
    meter.leave(4.0)  # idle from 4 s to 10 s: not busy, not averaged in
    area, busy = meter.read(10.0)
    assert (meter.peak, meter.now, area, busy) == (2, 0, 1.0 + 4.0 + 1.0, 4.0)
    assert area / busy == 1.5
    meter.open_window()
    assert meter.peak == 0


async def test_a_clients_calls_in_flight_never_pass_its_cap(sim_server: SimServer) -> None:
    config = EndpointConfig(name="sim", base_url=sim_server.url, model=sim_server.model,
                            transport=TransportConfig(concurrency=3))
    request = ChatRequest(role="generator", messages=(Message(role="user", content="What is 2+2?"),), max_tokens=16)
    async with EndpointClient(config) as client:
        results = await asyncio.gather(*(client.chat(request) for _ in range(12)))
    assert all(result.error is None for result in results)
    meter = client.meters["generator"]
    assert meter.now == 0 and meter.peak == 3 and set(client.meters) == {"generator"}
    area, busy = meter.read(0.0)
    assert busy > 0 and 1.0 < area / busy <= 3.0
