"""Throughput of our endpoint client vs plain ``httpx.AsyncClient()`` against the simulated server.

The server is ``--server-processes`` (default 2) ``python -m combee_fast.sim.cli sim-server
--constant-latency L --time-scale 1 --reuse-port`` processes sharing one port, apart from the
client's, answering every request after ``L`` real seconds (``--url`` measures a server already
running instead). One aiohttp process handles the requests that arrive together in one go, so at a
thousand in flight one server process, not the client, can set the ratio (``--server-processes 1``
measures that; the servers' CPU per request is printed). For each client, ``concurrency``
workers send chat requests back to back for ``--seconds`` after a warm-up; throughput is the
sum of the workers' own rates in that window (see :class:`Measurement`), the fraction of ideal
is ``throughput / (concurrency / latency)``, and CPU per request is this process's CPU time
over the window divided by the requests completed in it (the servers' CPU per request is
printed beside it).

Before measuring, the server's single-request latency is measured (:mod:`physics`): when it
answers sooner than the latency asked for (a time scale below 1) or far later, the ideal is not
this server's, and the command refuses (exit code 6, one line on stderr, no figure); so does a
ratio above 1. Below 0.95 the last line names the ``bottleneck``: ``sim-server`` (its processes
busy at least :data:`BUSY` of their cores), ``client`` (this process at least that busy), or
``machine`` (neither: other work on the machine's cores; the load average is printed).

httpx is ``httpx.AsyncClient(timeout=60.0)``: default transport and default pool limits (100
connections); only the timeout is raised so that slow answers count as slow, not as failures.

    python bench/throughput.py --concurrency 256 --latency 0.2

With ``--tracing``, ours is measured three times side by side instead (httpx is left out):
calling the client directly (``plain``), through the tracing hook every role call takes
(:func:`combee_fast.tracing.chat`) with no tracer provider configured (``off``), then with one (an
OpenTelemetry SDK ``TracerProvider``, a ``BatchSpanProcessor`` and an exporter that counts the
spans it is handed: ``on``). Its last line is ``cpu_us_per_request_plain=<us>
cpu_us_per_request_off=<us> cpu_us_per_request_on=<us> throughput_ratio_plain=<r>
throughput_ratio_off=<r> throughput_ratio_on=<r> spans_exported=<n> load1=<1-minute load
average>`` (``spans_exported`` counts the warm-up's too); a ratio above 1 is refused here too, and
so is an ``on`` run that exported fewer spans than it completed requests in its window.

The last line is ``throughput_ratio=<ours> httpx_default_ratio=<httpx> cpu_us_per_request=<ours>
server_cpu_us_per_request=<servers, ours> server_processes=<n> single_request_ms=<median>
bottleneck=<none|sim-server|client|machine> load1=<1-minute load average>`` (``--no-httpx``
measures ours only and leaves ``httpx_default_ratio`` out; with ``--url`` the servers' CPU is
unknown and printed as ``-``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import msgspec

from combee_fast import tracing
from combee_fast.config import TransportConfig
from combee_fast.endpoint.client import ChatRequest, EndpointClient, EndpointConfig
from combee_fast.engine.loop import run
from combee_fast.endpoint.wire import CompletionRequest, CompletionResponse
from combee_fast.schema import Message
from combee_fast.sim.server import REAL_TIME
from physics import WrongWorld, check_latency, guarded, physical_ratio, single_request_latency

PROMPT = (Message(role="user", content="Say something short."),)
BODY = msgspec.json.encode(CompletionRequest(model="sim", messages=PROMPT, max_tokens=64, temperature=0.0))
HEADERS = {"Content-Type": "application/json", "X-Combee-Role": "generator"}

SERVER_TIME_SCALE = REAL_TIME
"""The servers' ``--time-scale``: real time, so that they answer after the latency the ideal divides by."""

BUSY = 0.8
"""Share of a core above which a process (the client, or a server process on average) is the bottleneck."""

TARGET = 0.95
"""Fraction of ideal below which the last line names a bottleneck."""


class Measurement(msgspec.Struct, frozen=True):
    """What one client achieved in the measured window.

    ``rate`` sums each worker's own rate: (completions - 1) over the time from its first to its
    last completion in the window (a worker with fewer than two completions counts
    ``completions / window``). Unlike ``completed / window`` this is exact for one worker and
    is not skewed by requests that finish in waves.
    """

    client: str
    concurrency: int
    latency_s: float
    window_s: float
    completed: int
    failed: int
    rate: float
    cpu_s: float
    server_cpu_s: float

    @property
    def ratio(self) -> float:
        """Throughput as a fraction of the ideal ``concurrency / latency``."""
        return self.rate / (self.concurrency / self.latency_s)

    @property
    def cpu_us_per_request(self) -> float:
        return self.cpu_s / max(self.completed, 1) * 1e6

    @property
    def server_cpu_us_per_request(self) -> float:
        return self.server_cpu_s / max(self.completed, 1) * 1e6


def worker_rate(completions: list[float], window_s: float) -> float:
    """Requests per second of one worker from its completion times inside the window."""
    if len(completions) < 2:
        return len(completions) / window_s
    return (len(completions) - 1) / (completions[-1] - completions[0])


class ServerProcesses:
    """``count`` sim-server processes sharing one port (``SO_REUSEPORT``), each answering every
    request after ``latency_s``; :attr:`url` is their base URL, :meth:`cpu_s` their CPU time so far."""

    def __init__(self, latency_s: float, count: int) -> None:
        self.latency_s = latency_s
        self.count = count
        self.url = ""
        self._processes: list[subprocess.Popen[str]] = []

    def _spawn(self, port: int) -> str:
        process = subprocess.Popen(
            [sys.executable, "-m", "combee_fast.sim.cli", "sim-server", "--port", str(port),
             "--constant-latency", str(self.latency_s), "--time-scale", repr(SERVER_TIME_SCALE), "--reuse-port",
             "--world", "echo"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self._processes.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("listening on "):
            _, errors = process.communicate(timeout=10)
            raise RuntimeError(f"sim-server did not start (exit code {process.returncode}): {errors.strip()}")
        return line.removeprefix("listening on ").strip()

    def __enter__(self) -> ServerProcesses:
        try:
            self.url = self._spawn(0)
            port = int(self.url.rsplit(":", 1)[1].split("/")[0])
            for _ in range(self.count - 1):
                self._spawn(port)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        for process in self._processes:
            process.terminate()
        for process in self._processes:
            process.communicate(timeout=10)

    def cpu_s(self) -> float:
        """User plus system CPU seconds of the server processes so far (Linux ``/proc``)."""
        total = 0
        for process in self._processes:
            with open(f"/proc/{process.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
        return total / os.sysconf("SC_CLK_TCK")


def _no_server_cpu() -> float:
    return 0.0


async def _measure(name: str, send: Callable[[], Awaitable[bool]], concurrency: int, latency_s: float,
                   seconds: float, warmup_s: float, server_cpu: Callable[[], float]) -> Measurement:
    completions: list[list[float]] = [[] for _ in range(concurrency)]
    failures: list[float] = []

    async def worker(mine: list[float]) -> None:
        while True:
            ok = await send()
            (mine if ok else failures).append(time.perf_counter())

    workers = [asyncio.create_task(worker(mine)) for mine in completions]
    try:
        await asyncio.sleep(warmup_s)
        window_start, cpu_start, server_start = time.perf_counter(), time.process_time(), server_cpu()
        await asyncio.sleep(seconds)
        window_end, cpu_end, server_end = time.perf_counter(), time.process_time(), server_cpu()
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    window = window_end - window_start
    in_window = [[t for t in mine if window_start <= t <= window_end] for mine in completions]
    return Measurement(
        client=name, concurrency=concurrency, latency_s=latency_s, window_s=window,
        completed=sum(len(mine) for mine in in_window),
        failed=sum(1 for t in failures if window_start <= t <= window_end),
        rate=sum(worker_rate(mine, window) for mine in in_window),
        cpu_s=cpu_end - cpu_start,
        server_cpu_s=server_end - server_start,
    )


async def measure_ours(url: str, concurrency: int, latency_s: float, seconds: float, warmup_s: float = 1.0,
                       server_cpu: Callable[[], float] = _no_server_cpu, *, name: str = "ours",
                       traced: bool = False) -> Measurement:
    """Our :class:`EndpointClient` (aiohttp transport) at ``concurrency`` requests in flight;
    ``traced``: each call through the tracing hook of role calls (:func:`combee_fast.tracing.chat`)."""
    config = EndpointConfig(name="sim", base_url=url, model="sim",
                            transport=TransportConfig(concurrency=concurrency, timeout_s=60.0, max_retries=0))
    request = ChatRequest(role="generator", messages=PROMPT, max_tokens=64)
    async with EndpointClient(config) as client:
        async def send() -> bool:
            return (await client.chat(request)).error is None

        async def send_traced() -> bool:
            return (await tracing.chat(client, request, "serve")).error is None

        return await _measure(name, send_traced if traced else send, concurrency, latency_s, seconds, warmup_s,
                              server_cpu)


class CountingExporter:
    """An OpenTelemetry span exporter that only counts the spans it is handed (bounded memory)."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def measure_tracing(url: str, args: argparse.Namespace, server_cpu: Callable[[], float]) -> int:
    """``--tracing`` (module docstring): plain, off, on, side by side; the last line."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    measured = {}
    for name, traced in (("plain", False), ("off", True)):
        measured[name] = run(measure_ours(url, args.concurrency, args.latency, args.seconds, args.warmup, server_cpu,
                                          name=name, traced=traced))
        print(_report(measured[name]), flush=True)
    if tracing.tracer() is not None:
        raise WrongWorld("a tracer provider is configured already (OTEL_EXPORTER_OTLP_ENDPOINT?): 'off' was traced")
    exporter = CountingExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    measured["on"] = run(measure_ours(url, args.concurrency, args.latency, args.seconds, args.warmup, server_cpu,
                                      name="on", traced=True))
    print(_report(measured["on"]), flush=True)
    provider.shutdown()  # flushes what the batch processor holds
    if exporter.spans < measured["on"].completed:
        raise WrongWorld(f"tracing on exported {exporter.spans} spans for {measured['on'].completed} requests "
                         "completed in its window: the calls were not traced")
    ratios = {name: physical_ratio(f"throughput_ratio_{name}", m.ratio) for name, m in measured.items()}
    print(" ".join([*(f"cpu_us_per_request_{name}={m.cpu_us_per_request:.0f}" for name, m in measured.items()),
                    *(f"throughput_ratio_{name}={ratio:.3f}" for name, ratio in ratios.items()),
                    f"spans_exported={exporter.spans}",
                    f"load1={os.getloadavg()[0]:.2f}"]))
    return 0


async def measure_httpx_default(url: str, concurrency: int, latency_s: float, seconds: float, warmup_s: float = 1.0,
                                server_cpu: Callable[[], float] = _no_server_cpu) -> Measurement:
    """Plain ``httpx.AsyncClient`` (default transport) doing the same requests."""
    decoder = msgspec.json.Decoder(CompletionResponse)
    async with httpx.AsyncClient(timeout=60.0) as client:
        async def send() -> bool:
            try:
                response = await client.post(f"{url}/chat/completions", content=BODY, headers=HEADERS)
            except httpx.HTTPError:
                return False
            decoder.decode(response.content)
            return response.status_code == 200

        return await _measure("httpx-default", send, concurrency, latency_s, seconds, warmup_s, server_cpu)


def _report(m: Measurement) -> str:
    return (f"{m.client:>14}  concurrency={m.concurrency:<5} completed={m.completed:<6} failed={m.failed:<3} "
            f"req/s={m.rate:8.1f}  ideal={m.concurrency / m.latency_s:8.1f}  "
            f"ratio={m.ratio:.3f}  cpu_us/req={m.cpu_us_per_request:.0f}  server_cpu_us/req={m.server_cpu_us_per_request:.0f}")


def bottleneck(m: Measurement, processes: int | None) -> str:
    """What held ``m`` below :data:`TARGET` of ideal (module docstring); ``none`` at or above it.
    ``processes``: the servers' count (None: unknown, a server given by ``--url``)."""
    if m.ratio >= TARGET:
        return "none"
    if processes and m.server_cpu_s / (m.window_s * processes) >= BUSY:
        return "sim-server"
    if m.cpu_s / m.window_s >= BUSY:
        return "client"
    return "machine"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--latency", type=float, default=0.2, help="server latency in seconds")
    parser.add_argument("--seconds", type=float, default=4.0, help="measured window per client")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--no-httpx", action="store_true", help="measure our client only")
    parser.add_argument("--server-processes", type=int, default=2, help="sim-server processes sharing the port")
    parser.add_argument("--url", help="measure the server already running at this base URL (answering after "
                                      "--latency) instead of starting sim-servers")
    parser.add_argument("--tracing", action="store_true",
                        help="our client's CPU per request plain, through the tracing hook untraced, and traced")
    args = parser.parse_args(argv)
    return guarded(lambda: _measured(args), "bench/throughput.py")


def _measured(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as stack:
        if args.url:
            url, server_cpu, processes = args.url.rstrip("/"), _no_server_cpu, None
        else:
            servers = stack.enter_context(ServerProcesses(args.latency, args.server_processes))
            url, server_cpu, processes = servers.url, servers.cpu_s, args.server_processes
        single_s = check_latency(single_request_latency(url, BODY, HEADERS), args.latency, where=url)
        if args.tracing:
            return measure_tracing(url, args, server_cpu)
        ours = run(measure_ours(url, args.concurrency, args.latency, args.seconds, args.warmup, server_cpu))
        print(_report(ours), flush=True)
        theirs = None
        if not args.no_httpx:
            theirs = run(measure_httpx_default(url, args.concurrency, args.latency, args.seconds,
                                               args.warmup, server_cpu))
            print(_report(theirs), flush=True)
    ratio = physical_ratio("throughput_ratio", ours.ratio)
    httpx_ratio = f" httpx_default_ratio={physical_ratio('httpx_default_ratio', theirs.ratio):.3f}" \
        if theirs is not None else ""
    server_cpu_us = "-" if processes is None else f"{ours.server_cpu_us_per_request:.0f}"
    print(f"throughput_ratio={ratio:.3f}{httpx_ratio} cpu_us_per_request={ours.cpu_us_per_request:.0f} "
          f"server_cpu_us_per_request={server_cpu_us} server_processes={processes or '-'} "
          f"single_request_ms={1e3 * single_s:.1f} bottleneck={bottleneck(ours, processes)} "
          f"load1={os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
