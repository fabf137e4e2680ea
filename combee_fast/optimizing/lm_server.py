"""A language-model callable served as an OpenAI-compatible endpoint on loopback.

``optimize(reflection_lm=...)`` takes a callable, as ``gepa.optimize`` does (a prompt in, the
reply's text out). Served here, the callable is one more endpoint: the engine's client sends it
the proposer's and aggregator's calls as it sends any endpoint's, so they are retried, counted,
cached, priced and traced like every other model call, with no second code path.

:class:`CallableEndpoint` speaks ``POST /v1/chat/completions`` and ``GET /v1/models``. A request's
messages become one prompt (their contents joined by blank lines, system first, as GEPA's
reflection prompt is one string); the callable runs on a thread of the run's
:class:`~combee_fast.optimizing.user_code.UserCode` (so never on the loop) and its reply is the
completion. A reply that is a list or tuple (DSPy's ``LM`` returns one) gives its first string.
Token counts are estimated from the text (:func:`~combee_fast.tokens.estimate_tokens`: a callable
says none), and the reply says how long the call lasts in the search's schedule (the simulated
server's ``X-Combee-Sim-Latency``): :func:`schedule_seconds`, from those tokens, not from the
seconds the callable took, which differ from run to run and would make a seed's decisions
differ with them (:mod:`combee_fast.gepa.pipeline`, **Time.**). A callable that raises is
answered HTTP 500 naming the exception, which the client records as the call's failure
(``errors.jsonl``). No ``response_format`` is honoured: the callers read replies leniently
(:func:`~combee_fast.gepa.interop.rewrite_text`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from aiohttp import web

from combee_fast.endpoint.wire import (SIM_LATENCY_HEADER, AssistantMessage, Choice, CompletionResponse,
                                       CompletionUsage, ModelCard, ModelList, ReceivedRequest)
from combee_fast.optimizing.user_code import UserCode
from combee_fast.sim.latency import FLAT
from combee_fast.tokens import estimate_tokens

LanguageModel = Callable[[str], Any]
"""A reflection LM as GEPA takes one: a prompt in, the reply's text (or a list of texts) out."""

MODEL = "callable"
"""The model name the endpoint lists and answers as."""

STOP_GRACE_S = 1.0
"""Seconds a call still in flight gets when the endpoint stops."""

_decoder = msgspec.json.Decoder(ReceivedRequest)
_encoder = msgspec.json.Encoder()


def reply_text(reply: Any) -> str:
    """The text of a callable's reply: a string, or the first string of a list or tuple."""
    if isinstance(reply, (list, tuple)) and reply:
        reply = reply[0]
    if not isinstance(reply, str):
        raise TypeError(f"returned {type(reply).__name__}, not a string")
    return reply


def schedule_seconds(prompt_tokens: int, completion_tokens: int) -> float:
    """The seconds a call of ``prompt_tokens`` in and ``completion_tokens`` out lasts in the
    search's schedule: the flat yardstick's (:data:`~combee_fast.sim.latency.FLAT`), whatever the
    callable took."""
    return FLAT.first_token_s(prompt_tokens) + completion_tokens * FLAT.time_per_token(1)


def _error(status: int, message: str) -> web.Response:
    body = _encoder.encode({"error": {"message": message, "type": "server_error", "code": status}})
    return web.Response(status=status, body=body, content_type="application/json")


class CallableEndpoint:
    """``lm`` served on ``127.0.0.1`` (module docstring); its calls run on ``code``. Use
    ``async with CallableEndpoint(lm, code) as endpoint`` and point a client at ``endpoint.url``.
    ``calls``: requests answered."""

    def __init__(self, lm: LanguageModel, code: UserCode) -> None:
        self.lm = lm
        self.code = code
        self.calls = 0
        self._runner: web.ServerRunner | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        """Base URL ending in ``/v1`` (known once started)."""
        if self._url is None:
            raise RuntimeError("CallableEndpoint.url is only known once it started")
        return self._url

    async def __aenter__(self) -> CallableEndpoint:
        self._runner = web.ServerRunner(web.Server(self._handle, access_log=None), shutdown_timeout=STOP_GRACE_S)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        host, port = self._runner.addresses[0][:2]
        self._url = f"http://{host}:{port}/v1"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.BaseRequest) -> web.Response:
        if request.method == "GET" and request.path == "/v1/models":
            return web.Response(body=_encoder.encode(ModelList(data=(ModelCard(id=MODEL),))),
                                content_type="application/json")
        if request.method != "POST" or request.path != "/v1/chat/completions":
            return _error(404, f"no route for {request.method} {request.path}")
        try:
            wire = _decoder.decode(await request.read())
        except msgspec.MsgspecError as exc:
            return _error(400, f"invalid chat-completions body: {exc}")
        if wire.stream:
            return _error(400, "this endpoint does not stream")
        prompt = "\n\n".join(m.content for m in wire.messages if m.content)
        try:
            text = reply_text(await self.code.run(self.lm, prompt))
        except Exception as exc:  # the user's model failed: the call fails, saying how
            return _error(500, f"reflection_lm raised {type(exc).__name__}: {exc}")
        self.calls += 1
        prompt_tokens, completion_tokens = estimate_tokens(prompt), estimate_tokens(text)
        body = CompletionResponse(
            choices=(Choice(message=AssistantMessage(content=text), finish_reason="stop"),), model=MODEL,
            id=f"callable-{self.calls}", usage=CompletionUsage(prompt_tokens, completion_tokens,
                                                               prompt_tokens + completion_tokens))
        seconds = schedule_seconds(prompt_tokens, completion_tokens)
        return web.Response(body=_encoder.encode(body), content_type="application/json",
                            headers={SIM_LATENCY_HEADER: f"{seconds:.6f}"})
