"""Shared fixtures: an in-process simulated inference server on loopback; and each test file a
group of its own for pytest-xdist (:mod:`tests.worker_groups`)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

from combee_fast.sim.server import EchoResponder, Responder, SimServer


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test not in a named group of :mod:`tests.worker_groups` is in its file's group: under
    ``--dist loadgroup`` a file's tests run on one worker, in order, sharing its module fixtures."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def pytest_configure(config: pytest.Config) -> None:
    """Before any worker starts, the Numba kernels are compiled once into their disk cache (the
    controller's process; a worker has ``workerinput``): on a fresh clone every test process would
    otherwise compile them at once, and an embedded learner's start (which warms them) waited out
    its 30 s under CI's load."""
    if not hasattr(config, "workerinput"):
        from combee_fast import native

        native.warmup()


def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Under ``--dist loadgroup`` a worker ends each test's node id in ``@`` and its group, which is
    how the scheduler groups it. A pytest on which xdist cannot add it (9.2, where node ids are kept
    elsewhere) would run grouped tests at once without a word: stop instead."""
    if node.config.getoption("dist") == "loadgroup" and any("@" not in nodeid for nodeid in ids):
        pytest.exit(f"pytest-xdist cannot group tests on pytest {pytest.__version__} (no @group in their node ids): "
                    f"install the pytest that pyproject.toml's test extra asks for", returncode=4)


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test (and every process it starts) keeps combee's state (usage records) in a folder
    of its own, and sees none of the caller's OpenAI or MLflow settings."""
    monkeypatch.setenv("COMBEE_STATE_DIR", str(tmp_path_factory.mktemp("state")))
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)

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


@pytest.fixture(scope="module")
def peers_sim_url() -> Iterator[str]:
    """A ``combee sim-server --peers`` process (time scale 0.001) on a free loopback port: its base
    URL; stopped at the module's end."""
    server = subprocess.Popen([sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0", "--peers",
                               "--time-scale", "0.001"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert server.stdout is not None
    try:
        first = server.stdout.readline().split()
        assert first[:2] == ["listening", "on"], first
        yield first[2]
    finally:
        server.terminate()
        server.wait(timeout=30)


Handler = Callable[[Any], Awaitable[Any]]


class ThreadedServer:
    """A real aiohttp server on loopback, run by its own event loop in a thread, so a test can
    point a subprocess (or a client on another loop) at it. ``handler(request) -> web.Response``
    answers every request; ``url`` is the base URL ending in ``/v1``; ``requests`` lists
    ``(method, path)`` of every request received."""

    def __init__(self, handler: Handler) -> None:
        import asyncio
        import threading

        self._handler = handler
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: Any = None
        self.requests: list[tuple[str, str]] = []
        self.url = ""

    async def _handle(self, request: Any) -> Any:
        self.requests.append((request.method, request.path))
        return await self._handler(request)

    async def _start(self) -> None:
        from aiohttp import web

        self._runner = web.ServerRunner(web.Server(self._handle, access_log=None))
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}/v1"

    def __enter__(self) -> ThreadedServer:
        import asyncio

        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc_info: object) -> None:
        import asyncio

        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
