"""Shared fixtures: an in-process simulated inference server on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from combee_fast.sim.server import EchoResponder, Responder, SimServer

StartSimServer = Callable[..., Awaitable[SimServer]]


@pytest.fixture
async def start_sim_server() -> AsyncIterator[StartSimServer]:
    """``await start_sim_server(responder=None, **SimServer options)``: a started server,
    stopped at teardown. The responder defaults to :class:`EchoResponder`."""
    servers: list[SimServer] = []

    async def start(responder: Responder | None = None, **options: Any) -> SimServer:
        server = SimServer(responder or EchoResponder(), **options)
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


@pytest.fixture
async def sim_server(start_sim_server: StartSimServer) -> SimServer:
    """A fault-free ``flat`` server running 1000x faster than simulated time."""
    return await start_sim_server(time_scale=0.001)
