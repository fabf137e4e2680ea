"""A simulated OpenAI-compatible inference server on loopback, for tests and benchmarks.

It speaks ``POST /v1/chat/completions`` (with ``usage`` and ``response_format`` JSON schema;
``stream`` answers with the whole completion as server-sent events once it is done) and ``GET /v1/models``; ``GET /v1/combee/counters`` returns :class:`SimCounters` as JSON.
Answers come from a :class:`Responder`; timing comes from the continuous-batching
:class:`~combee_fast.sim.latency.BatchModel`. The server sleeps ``simulated seconds *
time_scale`` of real time and reports the simulated seconds of each request (queue wait +
prefill + decode) in the ``X-Combee-Sim-Latency`` response header, and its time scale in
``X-Combee-Time-Scale`` (so a client can count its retry waits in simulated seconds).

Token counts use :func:`combee_fast.tokens.estimate_tokens` over the concatenated message
contents (prompt) and the completion text; a completion longer than ``max_tokens`` is cut to
``max_tokens`` tokens with ``finish_reason="length"``.

Built on aiohttp's low-level ``web.Server`` (no router, no middlewares): one handler coroutine
per request, with handler cancellation on so a client that goes away frees its slot.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import math
import random
import time
from typing import Any

import msgspec
from aiohttp import web

from combee_fast.sim.fault_draws import FaultDraws
from combee_fast.sim.latency import (
    PRESETS,
    BatchModel,
    Job,
    LatencyPreset,
    job_for,
    resolve_preset,
)
from combee_fast.sim.responders import (
    EchoResponder,
    Responder,
    SimReply,
    SimRequest,
    TemplateResponder,
)
from combee_fast.endpoint.wire import (
    ROLE_HEADER,
    SIM_LATENCY_HEADER,
    TIME_SCALE_HEADER,
    AssistantMessage,
    Choice,
    CompletionRequest,
    CompletionResponse,
    CompletionUsage,
    ModelCard,
    ModelList,
    FunctionCall,
    ReceivedRequest,
    WireToolCall,
)
from combee_fast.config import FaultConfig
from combee_fast.endpoint.streamed import stream_body
from combee_fast.errors import ConfigError
from combee_fast.tokens import CHARS_PER_TOKEN, estimate_tokens

__all__ = [
    "PRESETS",
    "EchoResponder",
    "FaultConfig",
    "LatencyPreset",
    "Responder",
    "SimCounters",
    "SimRequest",
    "SimServer",
    "TemplateResponder",
]

LLAMA_CPP_PYTHON_REJECTION = (
    "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n  Input should be 'text' or "
    "'json_object' [type=literal_error, input_value='json_schema', input_type=str]"
)
"""What llama-cpp-python's server (0.3.x) answers, with HTTP 500, to ``response_format`` json_schema;
sent by a server made with ``reject_json_schema=True``."""

REAL_TIME = 1.0
"""One real second per simulated second."""

TIME_SCALE_MAX = 100.0
"""The most real seconds a simulated second may take (a run's sleeps are bounded: 1e308 slept for
ever, and no signal could end the run)."""

SIM_MODEL = "sim"
"""The model name a simulated server lists at ``GET /v1/models`` unless told another."""


SPANS_KEPT = 100_000
"""Request spans a server keeps (a few MB): a long-lived server's memory stays bounded."""
STOP_GRACE_S = 0.05
"""Seconds :meth:`SimServer.stop` lets the requests in flight end before it drops them (aiohttp's
own default, a minute, kept a test that stops a replica mid-run waiting that long twice)."""


class SimCounters(msgspec.Struct):
    """Server-side counters. ``in_flight`` counts HTTP requests inside the handler; ``running``
    and ``queued`` are the latency model's sequence slots and FIFO queue; ``busy_s`` is the
    simulated seconds so far during which the latency model had a sequence running (the GPU's
    busy time)."""

    requests: int = 0
    completed: int = 0
    prompt_tokens: int = 0  # of the completed requests (the usage each reply reports)
    completion_tokens: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    running: int = 0
    queued: int = 0
    queue_peak: int = 0
    open_connections: int = 0
    requests_by_role: dict[str, int] = msgspec.field(default_factory=dict)
    faults_injected: dict[str, int] = msgspec.field(default_factory=dict)
    responder_calls: int = 0
    responder_total_s: float = 0.0
    responder_max_s: float = 0.0
    busy_s: float = 0.0


_request_decoder = msgspec.json.Decoder(ReceivedRequest)
_encoder = msgspec.json.Encoder()


def _error_response(status: int, message: str, kind: str,
                    headers: dict[str, str] | None = None) -> web.Response:
    body = _encoder.encode({"error": {"message": message, "type": kind, "code": status}})
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


class SimServer:
    """A loopback HTTP server simulating a continuous-batching GPU inference server.

    Use ``async with SimServer(responder) as server:`` and point a client at ``server.url``.
    With ``api_key`` set, requests without ``Authorization: Bearer <api_key>`` get a 401. With
    ``reject_json_schema`` it behaves like llama-cpp-python's server: a ``response_format`` of type
    ``json_schema`` gets HTTP 500 :data:`LLAMA_CPP_PYTHON_REJECTION`, ``json_object`` with a
    ``schema`` is honoured. With ``reuse_port`` (``SO_REUSEPORT``) several server processes can
    listen on one port and the kernel spreads connections over them; each keeps its own latency
    model and counters, so only a capacity-free preset (e.g. :meth:`LatencyPreset.constant`)
    behaves as one server. ``model`` is the one model ``GET /v1/models`` lists (chat requests
    are answered whatever model they name; the client's start-up check refuses an unlisted one).
    ``worlds``: the tasks whose worlds it plays, named in that listing (``worlds``), so a run of
    another task is refused at start-up (None: not said); ``roles`` likewise the request roles it
    answers, so a run of a learner it does not know is refused (None: any role).
    """

    def __init__(
        self,
        responder: Responder,
        *,
        preset: str | LatencyPreset = "flat",
        time_scale: float = REAL_TIME,
        faults: FaultConfig | None = None,
        seed: int = 0,
        latency_jitter: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        reject_json_schema: bool = False,
        reuse_port: bool = False,
        model: str = SIM_MODEL,
        worlds: tuple[str, ...] | None = None,
        roles: tuple[str, ...] | None = None,
    ) -> None:
        if not 0 < time_scale <= TIME_SCALE_MAX:
            raise ConfigError(f"time_scale must be a number of real seconds per simulated second in (0, "
                              f"{TIME_SCALE_MAX:g}], got {time_scale!r}")
        if not 0.0 <= latency_jitter < 1.0:
            raise ConfigError(f"latency_jitter must be in [0, 1), got {latency_jitter!r}")
        self._responder = responder
        self.preset = resolve_preset(preset)
        self._time_scale = time_scale
        self._faults = faults or FaultConfig()
        self._latency_jitter = latency_jitter
        self._fault_draws = FaultDraws(self._faults, seed)
        self._jitter_rng = random.Random(f"{seed}/jitter")
        self._host = host
        self._port = port
        self._authorization = None if api_key is None else f"Bearer {api_key}"
        self._reject_json_schema = reject_json_schema
        self._reuse_port = reuse_port
        self.model = model
        self.worlds, self.roles = worlds, roles
        self._model = BatchModel(self.preset)
        self._counters = SimCounters()
        self._spans: collections.deque[tuple[float, float]] = collections.deque(maxlen=SPANS_KEPT)
        self._spans_total = 0  # completed requests ever, kept or not
        self._waiters: dict[Job, asyncio.Future[None]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._t0 = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._web_server: web.Server | None = None
        self._runner: web.ServerRunner | None = None
        self._url: str | None = None

    async def __aenter__(self) -> SimServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        """Base URL ending in ``/v1``; only after :meth:`start`."""
        if self._url is None:
            raise RuntimeError("SimServer.url is only known after start()")
        return self._url

    async def start(self) -> None:
        """Bind and start serving; ``port=0`` picks a free port (see :attr:`url`)."""
        self._loop = asyncio.get_running_loop()
        self._t0 = self._loop.time()
        self._web_server = web.Server(self._handle, handler_cancellation=True, access_log=None)
        self._runner = web.ServerRunner(self._web_server, shutdown_timeout=STOP_GRACE_S)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port, backlog=4096, reuse_port=self._reuse_port or None)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self._url = f"http://{host}:{port}/v1"

    async def stop(self) -> None:
        """Stop listening and close every connection within :data:`STOP_GRACE_S`: a request still
        in flight then is dropped, as a server that dies drops it."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def set_preset(self, preset: str | LatencyPreset) -> None:
        """Serve with ``preset``'s latency model from now on (a slower or faster endpoint mid-run);
        work already admitted keeps its prefill time, decoding continues at the new rate."""
        if self._loop is not None:
            self._wake(self._model.advance(max(self._sim_now(), self._model.now)))
        self.preset = resolve_preset(preset)
        self._model.preset = self.preset
        if self._loop is not None:
            self._reschedule()

    def counters(self) -> SimCounters:
        """A snapshot of the server-side counters."""
        snapshot = msgspec.structs.replace(
            self._counters,
            running=self._model.running,
            queued=self._model.queued,
            open_connections=len(self._web_server.connections) if self._web_server else 0,
            requests_by_role=dict(self._counters.requests_by_role),
            faults_injected=dict(self._counters.faults_injected),
            busy_s=self.busy_s(),
        )
        return snapshot

    def spans(self, since: int = 0) -> list[tuple[float, float]]:
        """``(arrival, finish)`` in simulated seconds of every completed request from the
        ``since``-th on (counting from the server's start), in completion order; only the latest
        :data:`SPANS_KEPT` are kept. :meth:`span_count` marks a point to start from."""
        first_kept = self._spans_total - len(self._spans)
        return list(itertools.islice(self._spans, max(0, since - first_kept), None))

    def span_count(self) -> int:
        """Requests completed so far (the ``since`` of :meth:`spans` for what comes next)."""
        return self._spans_total

    def busy_s(self) -> float:
        """Simulated seconds so far during which the latency model had a sequence running."""
        now = self._model.now if self._loop is None else max(self._sim_now(), self._model.now)
        return self._model.busy_until(now)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        if self._authorization is not None and request.headers.get("Authorization") != self._authorization:
            return _error_response(401, "missing or wrong API key", "invalid_api_key")
        if request.method == "POST" and request.path == "/v1/chat/completions":
            response = await self._chat(request)
            response.headers[TIME_SCALE_HEADER] = repr(self._time_scale)
            return response
        if request.method == "GET" and request.path == "/v1/models":
            return web.Response(body=_encoder.encode(ModelList(data=(ModelCard(id=self.model, worlds=self.worlds, roles=self.roles),))),
                                content_type="application/json")
        if request.method == "GET" and request.path == "/v1/combee/counters":
            return web.Response(body=_encoder.encode(self.counters()), content_type="application/json")
        return _error_response(404, f"no route for {request.method} {request.path}", "not_found")

    async def _chat(self, request: web.BaseRequest) -> web.StreamResponse:
        counters = self._counters
        counters.requests += 1
        counters.in_flight += 1
        counters.peak_in_flight = max(counters.peak_in_flight, counters.in_flight)
        role = request.headers.get(ROLE_HEADER, "")
        counters.requests_by_role[role] = counters.requests_by_role.get(role, 0) + 1
        try:
            raw_body = await request.read()
            try:
                wire = _request_decoder.decode(raw_body)
            except msgspec.MsgspecError as exc:
                return _error_response(400, f"invalid chat-completions body: {exc}",
                                       "invalid_request_error")
            fmt = wire.response_format
            if self._reject_json_schema and fmt is not None and fmt.type not in ("text", "json_object"):
                return _error_response(500, LLAMA_CPP_PYTHON_REJECTION, "server_error")
            json_schema = _schema_of(wire)
            fault, fault_rng = self._fault_draws.draw(raw_body, is_json=json_schema is not None)
            if fault is not None:
                counters.faults_injected[fault] = counters.faults_injected.get(fault, 0) + 1
            if fault == "429":
                return self._rate_limited()
            if fault == "500":
                return _error_response(500, "injected internal error", "server_error")
            if fault in ("drop", "stall"):
                if fault == "stall":
                    await asyncio.sleep(self._faults.stall_s * self._time_scale)
                return _dropped(request)
            sim_request = SimRequest(
                role=role,
                model=wire.model,
                messages=wire.schema_messages(),
                max_tokens=wire.max_tokens if wire.max_tokens is not None else 1 << 30,
                temperature=wire.temperature if wire.temperature is not None else 1.0,
                seed=wire.seed,
                json_schema=json_schema,
                tools=wire.tools,
            )
            reply = self._call_responder(sim_request)
            calls: tuple[WireToolCall, ...] | None = None
            if isinstance(reply, SimReply):
                text = reply.content
                calls = tuple(WireToolCall(FunctionCall(c.name, c.arguments), c.id or f"call_{i}")
                              for i, c in enumerate(reply.tool_calls)) or None
            else:
                text = reply
            text, finish_reason = _shape_completion(text, sim_request.max_tokens, fault, fault_rng)
            if calls is not None and finish_reason == "stop":
                finish_reason = "tool_calls"
            prompt_tokens = estimate_tokens("".join(m.content or "" for m in wire.messages))
            completion_tokens = estimate_tokens(text + "".join(c.function.name + c.function.arguments
                                                               for c in calls or ()))
            sim_latency = await self._run_in_model(prompt_tokens, completion_tokens)
            body = CompletionResponse(
                id=f"sim-{counters.requests}",
                model=wire.model,
                choices=(Choice(message=AssistantMessage(content=text, tool_calls=calls),
                                finish_reason=finish_reason),),
                usage=CompletionUsage(prompt_tokens, completion_tokens, prompt_tokens + completion_tokens),
            )
            counters.completed += 1
            counters.prompt_tokens += prompt_tokens
            counters.completion_tokens += completion_tokens
            headers = {SIM_LATENCY_HEADER: _microseconds(sim_latency)}
            if wire.stream:
                include_usage = wire.stream_options is not None and wire.stream_options.include_usage
                streamed = web.Response(body=stream_body(body, include_usage=include_usage),
                                        content_type="text/event-stream", headers=headers)
                streamed.enable_chunked_encoding()
                return streamed
            return web.Response(body=_encoder.encode(body), content_type="application/json", headers=headers)
        finally:
            counters.in_flight -= 1

    def _rate_limited(self) -> web.Response:
        seconds = self._faults.retry_after_s * self._time_scale
        headers = {"Retry-After": str(math.ceil(seconds)), "retry-after-ms": f"{seconds * 1000:.0f}"}
        return _error_response(429, "injected rate limit", "rate_limit_exceeded", headers)

    def _call_responder(self, sim_request: SimRequest) -> str | SimReply:
        started = time.perf_counter()
        text = self._responder.respond(sim_request)
        elapsed = time.perf_counter() - started
        counters = self._counters
        counters.responder_calls += 1
        counters.responder_total_s += elapsed
        counters.responder_max_s = max(counters.responder_max_s, elapsed)
        return text

    async def _run_in_model(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Wait until the latency model finishes this request; its simulated seconds."""
        assert self._loop is not None
        scale = 1.0
        if self._latency_jitter:
            scale += self._jitter_rng.uniform(-self._latency_jitter, self._latency_jitter)
        now = max(self._sim_now(), self._model.now)
        job = job_for(self.preset, now, prompt_tokens, completion_tokens, scale)
        done: asyncio.Future[None] = self._loop.create_future()
        self._waiters[job] = done
        try:
            self._wake(self._model.submit(job, now))
            self._counters.queue_peak = max(self._counters.queue_peak, self._model.queued)
            self._reschedule()
            await done
        except asyncio.CancelledError:
            self._wake(self._model.cancel(job, max(self._sim_now(), self._model.now)))
            self._reschedule()
            raise
        finally:
            del self._waiters[job]
        assert job.finished_at is not None
        self._spans.append((job.arrival, job.finished_at))
        self._spans_total += 1
        return job.finished_at - job.arrival

    def _sim_now(self) -> float:
        assert self._loop is not None
        return (self._loop.time() - self._t0) / self._time_scale

    def _wake(self, finished: list[Job]) -> None:
        for job in finished:
            waiter = self._waiters.get(job)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def _reschedule(self) -> None:
        assert self._loop is not None
        next_time = self._model.next_event_time()
        if self._timer is not None:
            if next_time == self._timer_at:
                return
            self._timer.cancel()
            self._timer = None
        if next_time is not None:
            self._timer_at = next_time
            self._timer = self._loop.call_at(self._t0 + next_time * self._time_scale, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._wake(self._model.advance(max(self._sim_now(), self._timer_at)))
        self._reschedule()


def _schema_of(wire: CompletionRequest) -> dict[str, Any] | None:
    """The schema a request constrains its answer to: OpenAI's ``json_schema`` form or
    llama-cpp-python's ``{"type": "json_object", "schema": ...}``."""
    fmt = wire.response_format
    if fmt is None:
        return None
    if fmt.type == "json_schema" and fmt.json_schema is not None:
        return fmt.json_schema.schema
    if fmt.type == "json_object" and fmt.schema is not None:
        return fmt.schema
    return None


def _shape_completion(text: str, max_tokens: int, fault: str | None,
                      fault_rng: random.Random | None) -> tuple[str, str]:
    """The completion as sent and its finish reason: cut by an injected ``truncated`` fault (at
    a fraction drawn from ``fault_rng``) or ``malformed`` one, then to ``max_tokens``."""
    finish_reason = "stop"
    if fault == "truncated" and fault_rng is not None:
        keep = int(len(text) * fault_rng.uniform(0.2, 0.8))
        text, finish_reason = text[:keep], "length"
    elif fault == "malformed":
        text = "Sure! Here it is: " + text[: len(text) // 2]
    if estimate_tokens(text) > max_tokens:
        text, finish_reason = text[: max_tokens * CHARS_PER_TOKEN], "length"
    return text, finish_reason


def _microseconds(seconds: float) -> str:
    """Simulated seconds to the microsecond: the model's clock runs on real time, so its float
    noise (1e-13 s) would otherwise make equal latencies differ from run to run."""
    return f"{seconds:.6f}"


def _dropped(request: web.BaseRequest) -> web.StreamResponse:
    """Abort the connection without answering; the returned response is never sent."""
    transport = request.transport
    if transport is not None:
        transport.abort()
    return web.Response(status=499)
