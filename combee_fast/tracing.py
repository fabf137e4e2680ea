"""OpenTelemetry spans of the engine's work, after the GenAI semantic conventions (the ``otel`` extra).

With a tracer provider configured (``opentelemetry.trace.set_tracer_provider``), or with
``OTEL_EXPORTER_OTLP_ENDPOINT`` set and none configured (an SDK provider exporting over OTLP/HTTP
is then set up, once, by :func:`tracer`), the work is traced as::

    combee learn <learner> <method>    one span per training run (the run loop, run/train.py)
      combee start                      the method's opening work (GEPA grades its seed)
      combee step <n>                   one span per step: a ledger row
        chat <model>                    one span per model call (CLIENT), its role's calls
    combee online step <n>             a step of an embedded learner: its parent is the span its first
      chat <model>                      rollout was submitted under (the host's trace), the others' linked

A model call's span (:func:`chat`, every role call of :class:`~combee_fast.roles.calls.RoleCalls`)
carries the GenAI attributes: ``gen_ai.operation.name`` (``chat``), ``gen_ai.provider.name``
(``openai``: the API every endpoint speaks), ``gen_ai.request.model`` and
``gen_ai.response.model`` (what the server said answered), ``gen_ai.request.max_tokens``,
``temperature`` and ``seed``, ``gen_ai.output.type`` (``json`` when a schema was asked for, else
``text``), ``gen_ai.usage.input_tokens`` and ``output_tokens`` (the call's, as ``calls.json`` and
the summary count them), ``gen_ai.response.finish_reasons``, ``server.address`` and
``server.port``, and ``error.type`` (the failure's label) with an error status when it failed;
and the project's: ``combee.role``, ``combee.pool``, ``combee.endpoint``, ``combee.retries``,
``combee.cached`` and, inside a run, ``combee.learner``, ``combee.method``, ``combee.step`` and
``combee.cost_usd`` (at the role's price; absent when unknown). A span's parent is the span
current where the call was started: work an asynchronous method started in one step (an
``async-gepa`` proposal's later stages) stays under that step.

An embedded learner's rollout is stamped, when submitted, with the W3C ``traceparent`` of the
host's current span (:func:`stamp`); it travels with the rollout to the learner's thread or
process, so the learner's step joins the host's trace.

No provider configured and no ``OTEL_EXPORTER_OTLP_ENDPOINT``, or opentelemetry not installed:
every function here returns at once after one read of the global provider
(``python bench/throughput.py --tracing`` measures the client's CPU per request with and without).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import msgspec

from combee_fast.endpoint.calls import ChatRequest, ChatResult
from combee_fast.schema import Rollout

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
except ImportError:  # the otel extra is not installed: nothing is traced
    trace = None  # type: ignore[assignment]

TRACER_NAME = "combee_fast"
OTLP_ENDPOINT_VARIABLE = "OTEL_EXPORTER_OTLP_ENDPOINT"
PROVIDER = "openai"
"""``gen_ai.provider.name``: the chat-completions API every endpoint the engine calls speaks."""


class _Scope(NamedTuple):
    """What a model call's span says of the run it was made in."""

    learner: str
    method: str
    step: int | None
    prices: Mapping[str, Any]


_SCOPE: ContextVar[_Scope | None] = ContextVar("combee_trace_scope", default=None)
_cached: tuple[Any, Any] = (None, None)  # (provider, its tracer)


def tracer() -> Any:
    """The tracer of the configured provider (module docstring), or None: nothing is traced."""
    global _cached
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if provider is _cached[0]:
        return _cached[1]
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        if not os.environ.get(OTLP_ENDPOINT_VARIABLE):
            return None
        provider = _otlp_provider()
    _cached = (provider, provider.get_tracer(TRACER_NAME))
    return _cached[1]


def _otlp_provider() -> Any:
    """An SDK provider exporting over OTLP/HTTP to ``OTEL_EXPORTER_OTLP_ENDPOINT``, set as the global one."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return trace.get_tracer_provider()


@contextlib.contextmanager
def run_span(learner: str, method: str, prices: Mapping[str, Any]) -> Iterator[None]:
    """The span of one training run; ``prices``: each role's price (an object with
    ``dollars(prompt_tokens, completion_tokens)``; None: unknown), for its calls' cost."""
    found = tracer()
    if found is None:
        yield
        return
    token = _SCOPE.set(_Scope(learner, method, None, prices))
    try:
        with found.start_as_current_span(f"combee learn {learner} {method}",
                                         attributes={"combee.learner": learner, "combee.method": method}):
            yield
    finally:
        _SCOPE.reset(token)


@contextlib.contextmanager
def step_span(step: int, *, opening: bool = False, **attributes: Any) -> Iterator[None]:
    """The span of step ``step`` of the current run (``opening``: the method's work before the
    first step); ``attributes`` added as ``combee.<name>``."""
    found, scope = tracer(), _SCOPE.get()
    if found is None or scope is None:
        yield
        return
    token = _SCOPE.set(scope._replace(step=step))
    try:
        with found.start_as_current_span("combee start" if opening else f"combee step {step}",
                                         attributes={"combee.step": step, **_ours(attributes)}):
            yield
    finally:
        _SCOPE.reset(token)


async def chat(client: Any, request: ChatRequest, pool: str | None = None) -> ChatResult:
    """``client.chat(request)`` (an endpoint client or pool), in a span of its own when tracing
    (module docstring); ``pool``: the role's pool."""
    found = tracer()
    if found is None:
        return await client.chat(request)
    config = client.config
    url = urlsplit(config.base_url)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": PROVIDER, "gen_ai.request.model": config.model,
        "gen_ai.request.max_tokens": request.max_tokens, "gen_ai.request.temperature": request.temperature,
        "gen_ai.output.type": "text" if request.json_schema is None else "json",
        "server.address": url.hostname or "", "combee.role": request.role, "combee.endpoint": config.name,
    }
    if url.port is not None:
        attributes["server.port"] = url.port
    if request.seed is not None:
        attributes["gen_ai.request.seed"] = request.seed
    if pool is not None:
        attributes["combee.pool"] = pool
    scope = _SCOPE.get()
    if scope is not None:
        attributes.update({"combee.learner": scope.learner, "combee.method": scope.method})
        if scope.step is not None:
            attributes["combee.step"] = scope.step
    with found.start_as_current_span(f"chat {config.model}", kind=trace.SpanKind.CLIENT,
                                     attributes=attributes) as span:
        result: ChatResult = await client.chat(request)
        span.set_attributes(_outcome(result, scope))
        if result.error is not None:
            span.set_status(trace.Status(trace.StatusCode.ERROR, result.error.message))
    return result


def _outcome(result: ChatResult, scope: _Scope | None) -> dict[str, Any]:
    """The attributes a call's result gives its span."""
    usage = result.usage
    found: dict[str, Any] = {"gen_ai.usage.input_tokens": usage.prompt_tokens,
                             "gen_ai.usage.output_tokens": usage.completion_tokens,
                             "combee.retries": usage.retries, "combee.cached": usage.cached}
    if result.response_model:
        found["gen_ai.response.model"] = result.response_model
    if result.finish_reason is not None:
        found["gen_ai.response.finish_reasons"] = (result.finish_reason,)
    if result.error is not None:
        found["error.type"] = result.error.label
    price = scope.prices.get(usage.role) if scope is not None else None
    if price is not None:
        found["combee.cost_usd"] = price.dollars(usage.prompt_tokens, usage.completion_tokens)
    return found


def _ours(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {f"combee.{name}": value for name, value in attributes.items() if value is not None}


def stamp(rollout: Rollout) -> Rollout:
    """``rollout`` with the W3C ``traceparent`` of the current span (module docstring); as it was
    when not tracing, when it carries one already, or when it is not a rollout at all (what a
    host submits is checked after, and refused there)."""
    if tracer() is None or not isinstance(rollout, Rollout) or rollout.trace is not None:
        return rollout
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    parent = carrier.get("traceparent")
    return rollout if parent is None else msgspec.structs.replace(rollout, trace=parent)


@contextlib.contextmanager
def online_step(step: int, rollouts: Sequence[Rollout], *, learner: str) -> Iterator[None]:
    """The span of an embedded learner's step over ``rollouts``: a child of the span the first of
    them was submitted under, linked to the others' (module docstring)."""
    found = tracer()
    if found is None:
        yield
        return
    parents = [otel_context.get_current() if r.trace is None else propagate.extract({"traceparent": r.trace})
               for r in rollouts] or [otel_context.get_current()]
    links = [trace.Link(trace.get_current_span(parent).get_span_context()) for parent in parents[1:]]
    token = _SCOPE.set(_Scope(learner, "online", step, {}))
    try:
        with found.start_as_current_span(f"combee online step {step}", context=parents[0], links=links,
                                         attributes={"combee.step": step, "combee.learner": learner,
                                                     "combee.rollouts": len(rollouts)}):
            yield
    finally:
        _SCOPE.reset(token)
