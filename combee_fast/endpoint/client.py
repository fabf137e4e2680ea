"""Async client for OpenAI-compatible ``/chat/completions`` endpoints, one per endpoint.

Transport: ``http://`` endpoints go through :mod:`combee_fast.endpoint.http1` (a keep-alive
pool writing a per-role pre-encoded head and the body in one call, parsing replies with
``bytes`` methods); ``https://`` goes through aiohttp. Not httpx: its default transport's
connection pool scans every connection on each request (encode/httpx#3215), which costs its
throughput at hundreds of requests in flight. ``python bench/throughput.py`` measures our client
against httpx side by side.

Behaviour:
- Attempts on the wire are counted per role (:mod:`.inflight`: the most at once, the
  time-weighted mean while busy), from the timestamps each attempt takes anyway.
- At most ``transport.concurrency`` requests are in flight (an :class:`~.gate.AdmissionGate` around
  each attempt, and a connection pool of the same size); a request waiting for its backoff does
  not hold a slot. A timeout is taken as overload: the gate halves its limit and grows it back
  one answer window at a time (an :class:`~combee_fast.engine.events.Overloaded` event each time
  it goes down).
- A call has ``transport.timeout_s`` seconds for all its attempts, the waits between them and its
  repair request (time spent waiting for a slot of the admission gate is not counted); one attempt
  has at most ``transport.attempt_timeout_s`` of them (default: all). The time to the first byte
  and between bytes is inside these: a server that trickles its reply cannot stretch a call.
  408/409/429/5xx, connection errors and timeouts are retried up to ``max_retries`` times with
  exponential backoff and jitter, or after the server's ``Retry-After``/``retry-after-ms``, while
  the call's time lasts (a :class:`~combee_fast.engine.events.RetryAfter` event before each wait a
  server asked for). A plain-http request whose reused keep-alive connection the server closes
  before a byte of answer is sent once more on a new connection within the same attempt: not a
  retry (:mod:`.http1`; counted in :attr:`EndpointClient.resent`). With ``transport.stream``
  replies are streamed, so an attempt given up on is cancelled on the server when its connection
  closes (:mod:`.streamed`). A server asking to wait longer than ``backoff_max_s`` (the run's
  patience) is not retried: the call fails at once, saying how long it was asked to wait.
- JSON output: the schema goes in ``response_format`` in the endpoint's structured-output form
  (:mod:`.capabilities`); the text is parsed either way and, if unusable, ONE repair request is
  sent (the bad answer plus what was wrong), except for a reply cut at ``max_tokens``, which is
  reported as ``truncated`` (repeating the request would loop into the same limit). A result that still fails carries a typed ``CallError``; :meth:`EndpointClient.chat`
  never raises for endpoint or response failures. ``asyncio.CancelledError`` propagates, and
  the connection of a cancelled request is closed, not returned to the pool.
- A free-text answer cut at ``max_tokens`` keeps its text and carries a ``truncated`` error.
- A reply larger than ``transport.max_reply_bytes`` is not read past that size, before or after
  decoding its ``Content-Encoding``: a ``too_large`` error, not retried (:mod:`.capped`); the
  start-up check and every probe read at most as much. A reply breaking HTTP's framing (a
  negative or non-hex chunk size...) or its encoding is a ``malformed`` error, not retried.
- Header values a server sends (``Retry-After``, token counts, the simulator's latency) are used
  only when they are finite and not negative; a ``Retry-After`` of ``nan`` or a past date is
  taken as no ``Retry-After``.
- ``Usage.latency_s`` is the wall time of the whole call (slot wait, attempts, backoff, repair);
  ``Usage.sim_latency_s`` sums the ``X-Combee-Sim-Latency`` headers of the answers used plus,
  once the server has sent ``X-Combee-Time-Scale``, the real time spent in failed attempts and
  backoff converted to simulated seconds (simulated server only; ``None`` for real endpoints).
  Tokens and retries add up over the call and its repair; the repair request counts as a retry
  of the kind that called for it (``malformed``, ``truncated``...), so every request sent is a
  call or a retry in the accounting.
"""

from __future__ import annotations

import asyncio
import base64
import math
import os
import random
import time
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import aiohttp
import msgspec

from combee_fast.endpoint.cache import ReplayCache, request_key
from combee_fast.endpoint.http1 import BodyReader, Http1Pool, MalformedResponse
from combee_fast.endpoint.capabilities import (Capabilities, FormState, check_form, is_validation_error, probe,
                                              probe_tools, response_format, tokenize)
from combee_fast.endpoint.calls import ChatRequest, ChatResult, ReplyCut
from combee_fast.endpoint.retry import RETRYABLE_STATUSES, backoff_s, header_number, retry_after_s
from combee_fast.endpoint.server_work import ServerWork, read_server_work
from combee_fast.endpoint.capped import ACCEPT_ENCODING, BadEncoding, ReplyTooLarge, read_capped, read_streamed
from combee_fast.endpoint.gate import AdmissionGate
from combee_fast.endpoint.inflight import InFlight, Meters
from combee_fast.endpoint.streamed import StreamFailed, StreamReader
from combee_fast.endpoint.structured import parse_structured, repair_messages
from combee_fast.endpoint.wire import with_extra_body
from combee_fast.endpoint.wire import (
    ROLE_HEADER,
    SIM_LATENCY_HEADER,
    TIME_SCALE_HEADER,
    CompletionRequest,
    CompletionResponse,
    ModelCard,
    ModelList,
    ResponseFormat,
    StreamOptions,
    tool_calls_of,
    wire_messages,
)
from combee_fast.config import TransportConfig
from combee_fast.engine.events import Events, Overloaded, RetryAfter
from combee_fast.errors import ConfigError, EndpointUnreachable
from combee_fast.redact import scrub, strip_userinfo
from combee_fast.schema import CallError, Message, ToolCall, Usage
from combee_fast.tokens import estimate_tokens

__all__ = ["ChatRequest", "ChatResult", "EndpointClient", "EndpointConfig", "UsageTotals"]


class EndpointConfig(msgspec.Struct, frozen=True):
    """One endpoint: where it is, which model, and how hard to push it (``transport``)."""

    name: str
    base_url: str
    model: str
    api_key_env: str | None = None
    json_schema: bool = True
    transport: TransportConfig = msgspec.field(default_factory=TransportConfig)
    response_format: str = "auto"  # a form of capabilities.FORMS, or auto: probed by detect()

    def __post_init__(self) -> None:
        check_form(self.response_format)
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"endpoint {self.name!r}: base_url must start with http:// or https://, "
                              f"got {strip_userinfo(self.base_url)!r}")


class UsageTotals(msgspec.Struct):
    """Sums over calls of one (role, model, endpoint). ``cached`` counts calls answered by the
    replay cache (their tokens and simulated seconds are included, as recorded)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    sim_latency_s: float = 0.0
    retries: int = 0
    errors: int = 0
    cached: int = 0


class _Answer(msgspec.Struct):
    """The answer of one HTTP exchange that returned a chat completion."""

    text: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    sim_latency_s: float | None
    tool_calls: tuple[ToolCall, ...] = ()
    cut: bool = False
    model: str = ""  # the model the reply names
    cached_prompt_tokens: int = 0  # of prompt_tokens, those the server's prompt cache spared it


class _AttemptFailed(Exception):
    def __init__(self, error: CallError, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.retryable = retryable
        self.retry_after = retry_after


class _Tally:
    """Accumulates usage over the attempts and the repair of one call."""

    __slots__ = ("prompt_tokens", "completion_tokens", "cached_prompt_tokens", "sim_latency_s", "retry_kinds", "failed_s",
                 "left_s", "cut", "model")

    def __init__(self, left_s: float = 0.0) -> None:
        self.left_s = left_s  # seconds the call has left for attempts and waits
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_prompt_tokens = 0
        self.sim_latency_s: float | None = None
        self.retry_kinds: list[str] = []  # label of each retried attempt
        self.failed_s = 0.0  # real seconds in failed attempts and their backoff
        self.cut = False  # the answer last taken was cut by the request's ReplyCut
        self.model: str | None = None  # the model the last answer named

    def add(self, answer: _Answer) -> None:
        self.cut = answer.cut
        self.model = answer.model or self.model
        self.prompt_tokens += answer.prompt_tokens
        self.completion_tokens += answer.completion_tokens
        self.cached_prompt_tokens += answer.cached_prompt_tokens
        if answer.sim_latency_s is not None:
            self.sim_latency_s = (self.sim_latency_s or 0.0) + answer.sim_latency_s


CHECK_TIMEOUT_S = 10.0
"""Most seconds each request of the start-up check waits (never more than the transport timeout)."""

_response_decoder = msgspec.json.Decoder(CompletionResponse)
_request_encoder = msgspec.json.Encoder()
_MAX_FORMATS = 64  # distinct response formats kept encoded per client
_STREAM_OPTIONS = StreamOptions(include_usage=True)


class EndpointClient:
    """Chat completions against one endpoint; use as ``async with EndpointClient(cfg) as c``."""

    def __init__(self, config: EndpointConfig, *, cache: ReplayCache | None = None,
                 capabilities: Capabilities | None = None, events: Events | None = None,
                 meters: Meters | None = None) -> None:
        """``capabilities``: what :meth:`detect` found of this endpoint before (another client's,
        e.g. in another thread or process), adopted without probing again. ``events``: the hub
        its waits and overloads are emitted on (the session's; default: a hub of its own).
        ``meters``: where its attempts in flight are counted per role (:mod:`.inflight`; shared
        by the replicas of one pool; default: its own)."""
        self.config = config
        self._cache = cache
        self._recording: dict[str, asyncio.Future[None]] = {}  # requests in flight by cache key
        # Credentials in the URL authenticate as HTTP Basic; the URL itself is used without them.
        self._url = strip_userinfo(config.base_url).rstrip("/") + "/chat/completions"
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        parts = urlsplit(config.base_url)
        password = parts.password
        self._secrets: tuple[str, ...] = (password,) if password else ()  # scrubbed from every error kept
        if parts.username is not None:
            basic = base64.b64encode(f"{unquote(parts.username)}:{unquote(password or '')}".encode()).decode()
            self._headers["Authorization"] = f"Basic {basic}"
            self._secrets += (basic,)
        if config.api_key_env is not None:
            key = os.environ.get(config.api_key_env)
            if not key:
                raise ConfigError(
                    f"endpoint {config.name!r}: environment variable {config.api_key_env} "
                    "(api_key_env) is not set"
                )
            if password is not None or urlsplit(config.base_url).username is not None:
                raise ConfigError(f"endpoint {config.name!r}: credentials in the URL and api_key_env "
                                  f"({config.api_key_env}) both authenticate; give one of them")
            self._headers["Authorization"] = f"Bearer {key}"
            self._secrets += (key,)
        self.gate = AdmissionGate(config.transport.concurrency)
        """Requests let onto the wire at once (lowered on timeouts; see :mod:`.gate`)."""
        self._session: aiohttp.ClientSession | None = None
        self._pool: Http1Pool | None = None  # plain-http requests; https goes through aiohttp
        self._resent = 0  # Http1Pool.resent of the pools closed
        self._request_heads: dict[str, bytes] = {}  # per role: the pre-encoded request head
        self._role_headers: dict[str, dict[str, str]] = {}  # per role: aiohttp's headers
        self._formats: dict[tuple[str, str, int], tuple[dict[str, Any], msgspec.Raw | None]] = {}  # response_format bytes
        self._rng = random.Random(config.name)
        self._totals: dict[tuple[str, str, str], UsageTotals] = {}
        self._in_flight = 0
        self.meters: Meters = meters if meters is not None else {}
        """Attempts in flight per role (:class:`~.inflight.InFlight`), made at a role's first attempt."""
        self._time_scale: float | None = None  # real s per simulated s, if the server says
        self.sim_worlds: tuple[str, ...] | None = None
        self.sim_roles: tuple[str, ...] | None = None  # the request roles a combee sim-server answers
        """The tasks a ``combee sim-server`` said (at :meth:`check`) it plays; None: not said."""
        self.events = events if events is not None else Events()
        """Where :class:`~combee_fast.engine.events.RetryAfter` (before each wait a server asked
        for) and :class:`~combee_fast.engine.events.Overloaded` (each time a timeout lowers the
        requests in flight) are emitted."""
        first = "none" if not config.json_schema else (
            "json_schema" if config.response_format == "auto" else config.response_format)
        self.forms = FormState(Capabilities(endpoint=config.name, model=config.model, form=first))
        if capabilities is not None:  # a copy of its own: a form left later is this client's alone
            self._adopt(msgspec.json.decode(msgspec.json.encode(capabilities), type=Capabilities))

    @property
    def capabilities(self) -> Capabilities:
        """What this endpoint was found to do (see :meth:`detect`), and the form in use."""
        return self.forms.capabilities

    async def detect(self) -> Capabilities:
        """Probe the endpoint (:func:`~combee_fast.endpoint.capabilities.probe`): with
        ``response_format`` auto (and ``json_schema`` on) the strongest structured-output form a
        one-call probe proves is used from now on; otherwise the configured form is kept and only
        the server's context length and slots are read. A server reporting fewer slots than
        ``transport.concurrency`` gets at most that many requests at once (``transport.slots_cap``)."""
        config = self.config
        auto = config.json_schema and config.response_format == "auto"
        found = await probe(self._open_session(), name=config.name, base_url=strip_userinfo(config.base_url), model=config.model,
                            headers=self._headers, timeout_s=min(CHECK_TIMEOUT_S * 6, config.transport.timeout_s),
                            forms=None if auto else (), limit=config.transport.max_reply_bytes)
        if not auto:
            found.form, found.probed = self.forms.form, False
        found.tried = {form: scrub(what, self._secrets) for form, what in found.tried.items()}  # bodies may echo keys
        self._adopt(found)
        return found

    async def server_work(self) -> ServerWork | None:
        """The server's own count of its work so far (:mod:`.server_work`), asked with this
        endpoint's credentials, when :meth:`detect` found a llama.cpp server here (else None, and
        nothing is sent); None too when it serves no counters (started without ``--metrics``)."""
        if self.capabilities.server != "llama.cpp":
            return None
        return await read_server_work(strip_userinfo(self.config.base_url), headers=self._headers)

    async def detect_tools(self) -> bool:
        """Whether the endpoint does OpenAI tool calling (:func:`~.capabilities.probe_tools`),
        probed once and kept in :attr:`capabilities` (``tools``, and what it answered in ``tried``)."""
        caps = self.capabilities
        if caps.tools is None:
            config = self.config
            supported, what = await probe_tools(self._open_session(), base_url=strip_userinfo(config.base_url),
                                                model=config.model, headers=self._headers,
                                                timeout_s=min(CHECK_TIMEOUT_S * 6, config.transport.timeout_s))
            caps.tools, caps.tried["tools"] = supported, scrub(what, self._secrets)
        return caps.tools

    def _adopt(self, found: Capabilities) -> None:
        """Use ``found``: its form from now on; a server reporting fewer slots than
        ``transport.concurrency`` gets at most that many requests at once (``transport.slots_cap``)."""
        transport = self.config.transport
        self.forms.capabilities = found
        if found.slots is not None and transport.slots_cap and found.slots < transport.concurrency:
            self.gate.set_ceiling(found.slots)  # more would only queue on the server, inside our timeout

    async def __aenter__(self) -> EndpointClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def resent(self) -> int:
        """Plain-http requests sent once more, transparently, because the reused keep-alive
        connection they went out on closed before answering (:mod:`.http1`); not retries."""
        return self._resent + (self._pool.resent if self._pool is not None else 0)

    @property
    def in_flight(self) -> int:
        """HTTP requests of this client currently on the wire."""
        return self._in_flight

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.config.transport.concurrency, limit_per_host=0,
                                             ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(  # bodies are decoded under the reply cap (.capped)
                connector=connector, timeout=aiohttp.ClientTimeout(total=self.config.transport.timeout_s),
                auto_decompress=False, headers={"Accept-Encoding": ACCEPT_ENCODING},
            )
        return self._session

    async def aclose(self) -> None:
        """Close every pooled connection. The client may be used again afterwards."""
        if self._pool is not None:
            self._pool.close()
            self._resent += self._pool.resent
            self._pool = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def check(self) -> None:
        """Prove the endpoint serves :attr:`EndpointConfig.model`, or raise
        :class:`EndpointUnreachable` with one line saying why.

        Proof is ``GET {base_url}/models`` answering 200 with JSON that lists the model (OpenAI's
        ``{"data": [{"id": ...}]}``), or else one chat completion of at most one token answering
        200 with a chat-completion body. A 404/501, an HTML page, prose or a model list without
        the model fails both; 401/403 on either is reported as rejected credentials.
        """
        where = f"endpoint {self.config.name!r} at {strip_userinfo(self.config.base_url)}"
        model = self.config.model
        timeout = aiohttp.ClientTimeout(total=min(CHECK_TIMEOUT_S, self.config.transport.timeout_s))
        limit = self.config.transport.max_reply_bytes
        session = self._open_session()
        models_url = strip_userinfo(self.config.base_url).rstrip("/") + "/models"
        try:
            async with session.get(models_url, headers=self._headers, timeout=timeout) as response:
                status, body = response.status, await read_capped(response, limit)
        except TimeoutError:
            raise EndpointUnreachable(f"{where} is unreachable: no answer within {timeout.total:g} s") from None
        except aiohttp.ClientError as exc:
            raise EndpointUnreachable(f"{where} is unreachable: {scrub(_one_line(exc), self._secrets)}") from None
        except (ReplyTooLarge, BadEncoding) as exc:
            raise EndpointUnreachable(f"{where}: GET /models answered an unusable body: {exc}") from None
        if status in (401, 403):
            raise EndpointUnreachable(f"{where} rejected the credentials: HTTP {status} on GET /models")
        listed = _listed_models(body) if status == 200 else None
        if listed is not None and model in listed:
            card = _sim_card(body, model)
            self.sim_worlds, self.sim_roles = card.worlds, card.roles
            return
        if listed:  # the server says what it serves: another name would be answered by no model of ours
            raise EndpointUnreachable(f"{where} does not serve model {model!r}: GET /models does not list model "
                                      f"{model!r}; it lists {', '.join(sorted(map(repr, listed)))}")
        if listed is None and (hint := await self._versioned_hint(session, timeout)) is not None:
            raise EndpointUnreachable(f"{where} does not serve model {model!r}: GET /models answered HTTP {status}; "
                                      f"{hint}")
        if status != 200:
            models_problem = f"GET /models answered HTTP {status}"
        elif listed is None:
            models_problem = "GET /models answered no JSON model list"
        else:
            models_problem = f"GET /models does not list model {model!r}"
        probe = _request_encoder.encode(CompletionRequest(
            model=model, messages=(Message(role="user", content="ping"),), max_tokens=1, temperature=0.0))
        try:
            async with session.post(self._url, data=probe, headers={**self._headers, ROLE_HEADER: "check"},
                                    timeout=timeout) as response:
                status, body = response.status, await read_capped(response, limit)
        except TimeoutError:
            raise EndpointUnreachable(f"{where}: {models_problem}, and a one-token chat completion got no answer "
                                      f"within {timeout.total:g} s") from None
        except aiohttp.ClientError as exc:
            raise EndpointUnreachable(f"{where} is unreachable: {scrub(_one_line(exc), self._secrets)}") from None
        except (ReplyTooLarge, BadEncoding) as exc:
            raise EndpointUnreachable(f"{where}: {models_problem}, and a one-token chat completion answered an "
                                      f"unusable body: {exc}") from None
        if status in (401, 403):
            raise EndpointUnreachable(f"{where} rejected the credentials: HTTP {status} on POST /chat/completions")
        if status == 200 and _is_completion(body):
            return
        answer = f"HTTP {status}" if status != 200 else "a body that is not a chat completion"
        raise EndpointUnreachable(
            f"{where} does not serve model {model!r}: {models_problem}, and a one-token chat completion "
            f"answered {answer}"
        )

    async def _versioned_hint(self, session: Any, timeout: aiohttp.ClientTimeout) -> str | None:
        """For a base URL without ``/v1`` whose ``/v1/models`` answers a model list: the sentence
        saying which URL to give; else None (never raises)."""
        base = strip_userinfo(self.config.base_url).rstrip("/")
        if base.endswith("/v1"):
            return None
        try:
            async with session.get(base + "/v1/models", headers=self._headers, timeout=timeout) as response:
                listed = _listed_models(await response.read()) if response.status == 200 else None
        except (TimeoutError, aiohttp.ClientError):
            return None
        if listed is None:
            return None
        return f"{base}/v1/models lists {', '.join(sorted(map(repr, listed))) or 'no model'}: give the base URL {base}/v1"

    @property
    def time_scale(self) -> float | None:
        """Real seconds per simulated second, once a simulated server said so (None: real time)."""
        return self._time_scale

    def usage_totals(self) -> dict[tuple[str, str, str], UsageTotals]:
        """A copy of the running totals, keyed by (role, model, endpoint)."""
        return {key: msgspec.structs.replace(totals) for key, totals in self._totals.items()}

    async def count_tokens(self, text: str) -> int | None:
        """Tokens in ``text`` by the server's own tokenizer (llama.cpp ``POST /tokenize``), or
        ``None`` when the endpoint has none (:attr:`Capabilities.tokenize`, found by :meth:`detect`)
        or the call fails; waits at most :data:`CHECK_TIMEOUT_S` and never raises for endpoint failures."""
        if not self.capabilities.tokenize:
            return None
        timeout = aiohttp.ClientTimeout(total=min(CHECK_TIMEOUT_S, self.config.transport.timeout_s))
        tokens = await tokenize(self._open_session(), strip_userinfo(self.config.base_url), text,
                                headers=self._headers, timeout=timeout, limit=self.config.transport.max_reply_bytes)
        return None if tokens is None else len(tokens)

    @property
    def cache(self) -> ReplayCache | None:
        """The replay cache this client reads and records through, if any."""
        return self._cache

    async def chat(self, request: ChatRequest) -> ChatResult:
        """One call, through the replay cache if any; failures come back in ``.error``.

        With a cache, a request it holds is answered from it, and a request identical to one in
        flight waits for that one's result instead of calling again (the cache module: a recorded
        run and its replay see the same answers)."""
        cache = self._cache
        if cache is None:
            return self._accounted(await self._call(request))
        key = request_key(self.config.model, request)
        while True:
            hit = cache.get(key)
            if hit is not None:
                return self._accounted(hit)
            if not cache.records:
                return self._accounted(ChatResult(text=None, usage=self._usage(request, _Tally(), 0.0),
                                                  error=cache.miss(key)))
            in_flight = self._recording.get(key)
            if in_flight is None:
                break
            await asyncio.shield(in_flight)  # then its recorded result, or (a transport failure) a call of our own
        done = self._recording[key] = asyncio.get_running_loop().create_future()
        try:
            result = await self._call(request)
            cache.put(key, result)
        finally:
            del self._recording[key]
            done.set_result(None)
        return self._accounted(result)

    async def _call(self, request: ChatRequest) -> ChatResult:
        started = time.perf_counter()
        tally = _Tally(self.config.transport.timeout_s)
        text, data, error, finish_reason, tool_calls = await self._answer(request, tally)
        if error is not None:  # error bodies may echo the request's headers; URLs may carry credentials
            error = msgspec.structs.replace(error, message=scrub(error.message, self._secrets),
                                            raw=None if error.raw is None else scrub(error.raw, self._secrets))
        return ChatResult(text=text, data=data, usage=self._usage(request, tally, time.perf_counter() - started),
                          error=error, finish_reason=finish_reason, tool_calls=tool_calls, cut=tally.cut,
                          response_model=tally.model)

    async def _answer(self, request: ChatRequest,
                      tally: _Tally) -> tuple[str | None, Any, CallError | None, str | None, tuple[ToolCall, ...]]:
        """``(text, data, error, finish_reason, tool_calls)`` of the call, with at most one repair
        request."""
        answer = await self._exchange(request, request.messages, tally)
        if isinstance(answer, CallError):
            return None, None, answer, None, ()
        if request.json_schema is None or answer.tool_calls:
            error = None
            if answer.finish_reason == "length":
                error = CallError(kind="truncated", message=f"answer cut at max_tokens={request.max_tokens}",
                                  raw=answer.text)
            return answer.text, None, error, answer.finish_reason, answer.tool_calls
        data, problem = parse_structured(answer.text, answer.finish_reason, request.json_schema)
        if problem is None:
            return answer.text, data, None, answer.finish_reason, ()
        if problem.kind == "truncated":  # the same request would run into max_tokens again: reported, not repaired
            return answer.text, None, msgspec.structs.replace(problem, message=(
                f"{problem.message} (cut at max_tokens={request.max_tokens}; not repaired)")), answer.finish_reason, ()
        tally.retry_kinds.append(problem.label)  # the repair request is counted as a retry of its kind
        repair = await self._exchange(request, repair_messages(request.messages, answer.text, problem), tally)
        if isinstance(repair, CallError):
            message = f"{problem.message}; repair request failed: {repair.message}"
            return answer.text, None, msgspec.structs.replace(problem, message=message), answer.finish_reason, ()
        data, still = parse_structured(repair.text, repair.finish_reason, request.json_schema)
        if still is not None:
            still = msgspec.structs.replace(still, message=f"{still.message} (after one repair request)")
        return repair.text, data, still, repair.finish_reason, ()

    def _usage(self, request: ChatRequest, tally: _Tally, latency_s: float) -> Usage:
        sim_latency_s = tally.sim_latency_s
        if self._time_scale and tally.failed_s:
            sim_latency_s = (sim_latency_s or 0.0) + tally.failed_s / self._time_scale
        return Usage(
            role=request.role,
            model=self.config.model,
            endpoint=self.config.name,
            prompt_tokens=tally.prompt_tokens,
            completion_tokens=tally.completion_tokens,
            latency_s=latency_s,
            sim_latency_s=sim_latency_s,
            retries=len(tally.retry_kinds),
            retry_kinds=tuple(tally.retry_kinds),
            cached_prompt_tokens=tally.cached_prompt_tokens,
        )

    def _response_format(self, request: ChatRequest, form: str) -> msgspec.Raw | None:
        """The request's ``response_format`` in structured-output ``form``, encoded once per
        (form, name, schema object)."""
        schema = request.json_schema
        if schema is None or form == "none":
            return None
        key = (form, request.schema_name, id(schema))
        cached = self._formats.get(key)
        if cached is None or cached[0] is not schema:  # an id reused by another dict is re-encoded
            if len(self._formats) >= _MAX_FORMATS:
                self._formats.clear()
            value = response_format(form, request.schema_name, schema)
            cached = self._formats[key] = (schema, None if value is None else msgspec.Raw(_request_encoder.encode(value)))
        return cached[1]

    def _encode(self, request: ChatRequest, messages: tuple[Message, ...], form: str) -> bytes:
        if request.extra_body:
            return with_extra_body(self._encode(msgspec.structs.replace(request, extra_body=None), messages, form),
                                   request.extra_body)
        stream = self.config.transport.stream
        return _request_encoder.encode(CompletionRequest(
            model=self.config.model,
            messages=wire_messages(messages),
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            seed=request.seed,
            # the form encoded once (a Raw, which msgspec writes as is) in place of a ResponseFormat
            response_format=cast(ResponseFormat | None, self._response_format(request, form)),
            stream=stream,
            stream_options=_STREAM_OPTIONS if stream else None,
            tools=request.tools,
            tool_choice=request.tool_choice,
        ))

    async def _exchange(self, request: ChatRequest, messages: tuple[Message, ...],
                        tally: _Tally) -> _Answer | CallError:
        """Send in the current structured-output form; if the reply rejects that form, send once
        more in the weaker form :class:`FormState` steps down to."""
        form = self.forms.form
        answer = await self._send(self._encode(request, messages, form), request, messages, tally)
        if isinstance(answer, CallError) and request.json_schema is not None and self.forms.fall_back(
                form, msgspec.structs.replace(answer, message=scrub(answer.message, self._secrets))):
            answer = await self._send(self._encode(request, messages, self.forms.form), request, messages, tally)
        return answer

    async def _send(self, body: bytes, request: ChatRequest, messages: tuple[Message, ...],
                    tally: _Tally) -> _Answer | CallError:
        """Send ``body`` (``request`` with ``messages``, encoded) until answered, out of retries or
        out of the call's time; adds to ``tally``."""
        role = request.role
        config = self.config
        transport = config.transport
        for attempt in range(transport.max_retries + 1):
            if tally.left_s <= 0:
                return CallError(kind="timeout", message=f"no answer within the call's transport.timeout_s="
                                                         f"{transport.timeout_s:g} s ({attempt} attempt(s))")
            attempt_started = 0.0
            episode = -1
            try:
                async with self.gate as episode:
                    attempt_started = time.perf_counter()
                    self._in_flight += 1
                    meter = self.meters.get(role) or self.meters.setdefault(role, InFlight())
                    meter.enter(attempt_started)
                    try:
                        answer = await self._post(body, role, min(transport.attempt_timeout_s or math.inf, tally.left_s),
                                                  request.cut)
                    finally:
                        self._in_flight -= 1
                        attempt_ended = time.perf_counter()
                        meter.leave(attempt_ended)
                        tally.left_s -= attempt_ended - attempt_started
            except _AttemptFailed as failure:
                if failure.error.kind == "timeout" and self.gate.overloaded(episode):
                    self.events.emit(Overloaded(config.name, self.gate.limit))
                if not failure.retryable or attempt == transport.max_retries:
                    tally.failed_s += time.perf_counter() - attempt_started
                    return failure.error
                patience = transport.backoff_max_s
                if failure.retry_after is not None and failure.retry_after > patience:  # not worth waiting for
                    tally.failed_s += time.perf_counter() - attempt_started
                    return msgspec.structs.replace(failure.error, message=(
                        f"{failure.error.message} (not retried: the server asked to wait {failure.retry_after:g} s, "
                        f"more than transport.backoff_max_s={patience:g} s)"))
                wait = backoff_s(attempt, base_s=transport.backoff_base_s, max_s=patience,
                                 retry_after=failure.retry_after, rng=self._rng)
                if wait >= tally.left_s:
                    tally.failed_s += time.perf_counter() - attempt_started
                    return msgspec.structs.replace(failure.error, message=(
                        f"{failure.error.message} (not retried: waiting {wait:.3g} s would pass the call's "
                        f"transport.timeout_s={transport.timeout_s:g} s)"))
                tally.retry_kinds.append(failure.error.label)
                if failure.retry_after is not None:
                    self.events.emit(RetryAfter(config.name, failure.retry_after))
                await asyncio.sleep(wait)
                tally.left_s -= wait
                tally.failed_s += time.perf_counter() - attempt_started
                continue
            self.gate.answered()
            if answer.prompt_tokens == 0:  # a server that counted nothing, or a reply cut before its usage
                prompt = "".join(m.content for m in messages)
                answer.prompt_tokens = (await self.count_tokens(prompt) if answer.cut else None) or estimate_tokens(prompt)
            if answer.completion_tokens == 0:
                answer.completion_tokens = estimate_tokens(answer.text or "")
            tally.add(answer)
            return answer
        raise AssertionError("unreachable: the loop returns on its last attempt")

    def _request_head(self, role: str) -> bytes:
        """``POST`` line and headers (all but ``Content-Length``) of ``role``'s requests, encoded once."""
        head = self._request_heads.get(role)
        if head is None:
            parts = urlsplit(self._url)
            lines = [f"POST {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1",
                     f"Host: {parts.netloc}", *(f"{k}: {v}" for k, v in self._headers.items()), f"{ROLE_HEADER}: {role}"]
            head = self._request_heads[role] = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")
        return head

    async def _transmit(self, body: bytes, role: str, timeout_s: float,
                        on_body: BodyReader | None = None) -> tuple[int, bytes, Any, bool]:
        """``(status, body, headers, fed)`` of one exchange of at most ``timeout_s``: plain http on
        the keep-alive pool, https through aiohttp; ``on_body`` reads a ``200`` reply's body as it
        arrives (``fed``: it did; it may end the reading, and the connection, early). Raises
        ``TimeoutError``, ``aiohttp.ClientError``, ``OSError``, :class:`ReplyTooLarge` or
        :class:`BadEncoding`."""
        if self._url.startswith("http://"):
            if self._pool is None:
                parts = urlsplit(self._url)
                self._pool = Http1Pool(parts.hostname or "localhost", parts.port or 80,
                                       limit=self.config.transport.concurrency)
            head = self._request_head(role)
            transport = self.config.transport
            response = await self._pool.post(b"%b%d\r\n\r\n%b" % (head, len(body), body), timeout_s,
                                             transport.max_reply_bytes, on_body)
            return response.status, response.body, response.headers, response.fed
        headers = self._role_headers.get(role)
        if headers is None:
            headers = self._role_headers[role] = {**self._headers, ROLE_HEADER: role}
        async with asyncio.timeout(timeout_s), self._open_session().post(
                self._url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s)) as reply:
            limit = self.config.transport.max_reply_bytes
            if on_body is not None and reply.status == 200 and "Content-Encoding" not in reply.headers:
                return reply.status, await read_streamed(reply, limit, on_body), reply.headers, True
            return reply.status, await read_capped(reply, limit), reply.headers, False

    async def _post(self, body: bytes, role: str, timeout_s: float, cut: ReplyCut | None = None) -> _Answer:
        """One HTTP exchange of at most ``timeout_s``; raises :class:`_AttemptFailed` for anything
        but a chat completion. ``cut`` watches the reply's content: a streamed reply is read as it
        arrives and the connection closed at the cut, a whole one is cut after the fact."""
        reader = StreamReader(cut.watch() if cut is not None else None) if self.config.transport.stream else None
        try:
            status, raw, headers, fed = await self._transmit(body, role, timeout_s,
                                                             None if reader is None else reader.feed)
        except ReplyTooLarge as exc:
            raise _AttemptFailed(CallError(kind="too_large", message=str(exc)), retryable=False) from None
        except (MalformedResponse, BadEncoding) as exc:
            raise _AttemptFailed(CallError(kind="malformed_json", message=f"malformed reply: {exc}"),
                                 retryable=False) from None
        except TimeoutError:
            raise _AttemptFailed(CallError(kind="timeout", message=f"no answer within {timeout_s:.3g} s"),
                                 retryable=True) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise _AttemptFailed(CallError(kind="connection", message=_one_line(exc)), retryable=True) from None
        sim_latency = headers.get(SIM_LATENCY_HEADER)
        time_scale = _parse_float(headers.get(TIME_SCALE_HEADER))
        if time_scale is not None and time_scale > 0:
            self._time_scale = time_scale
        retry_after = retry_after_s(headers) if status != 200 else None
        if status != 200:
            error_text = raw.decode("utf-8", errors="replace")
            raise _AttemptFailed(
                CallError(kind="http_status", message=f"HTTP {status}: {error_text[:200]}", status=status,
                          raw=error_text),
                retryable=status in RETRYABLE_STATUSES and not is_validation_error(status, error_text),
                retry_after=retry_after,
            )
        try:
            if reader is not None:
                if not fed:
                    reader.feed(raw)
                decoded = reader.response()
            else:
                decoded = _response_decoder.decode(raw)
            choice = decoded.choices[0]
        except StreamFailed as exc:
            raise _AttemptFailed(
                CallError(kind="http_status", message=f"HTTP {exc.status}: {exc}", status=exc.status,
                          raw=raw.decode("utf-8", errors="replace")),
                retryable=exc.status in RETRYABLE_STATUSES,
            ) from None
        except (msgspec.MsgspecError, ValueError, IndexError) as exc:
            raise _AttemptFailed(
                CallError(kind="malformed_json", message=f"response is not a chat completion: {exc}",
                          status=status, raw=raw.decode("utf-8", errors="replace")),
                retryable=False,
            ) from None
        usage = decoded.usage
        text = choice.message.content
        completion_tokens, was_cut = usage.completion_tokens if usage else 0, False
        if reader is not None and reader.kept is not None:  # cut as it streamed: each event read, a token made
            text, completion_tokens, was_cut = reader.kept, completion_tokens or reader.events, True
        elif reader is None and cut is not None and text is not None:  # read whole: cut after the fact
            kept = cut.watch().feed(text)
            text, was_cut = (text, False) if kept is None else (kept, True)
        return _Answer(
            text=text,
            finish_reason=choice.finish_reason,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=completion_tokens,
            sim_latency_s=_parse_float(sim_latency),
            tool_calls=tool_calls_of(choice.message.tool_calls or ()),
            cut=was_cut,
            model=decoded.model,
            cached_prompt_tokens=min(usage.cached_tokens, usage.prompt_tokens) if usage else 0,
        )

    def _accounted(self, result: ChatResult) -> ChatResult:
        """``result``, added to the running totals of its (role, model, endpoint)."""
        usage = result.usage
        totals = self._totals.setdefault((usage.role, usage.model, usage.endpoint), UsageTotals())
        totals.calls += 1
        totals.prompt_tokens += usage.prompt_tokens
        totals.completion_tokens += usage.completion_tokens
        totals.latency_s += usage.latency_s
        totals.sim_latency_s += usage.sim_latency_s or 0.0
        totals.retries += usage.retries
        totals.errors += result.error is not None
        totals.cached += usage.cached
        return result


def _sim_card(body: bytes, model: str) -> ModelCard:
    """The listing's card of ``model``: a ``combee sim-server`` says there which tasks it plays
    and which roles it answers (None each: not said)."""
    listing = msgspec.json.decode(body, type=ModelList)
    return next(card for card in listing.data if card.id == model)


def _listed_models(body: bytes) -> set[str] | None:
    """The model ids of an OpenAI ``/models`` answer; ``None`` if ``body`` is not one."""
    try:
        listing = msgspec.json.decode(body, type=ModelList)
    except msgspec.MsgspecError:
        return None
    return {card.id for card in listing.data}


def _is_completion(body: bytes) -> bool:
    try:
        return bool(_response_decoder.decode(body).choices)
    except msgspec.MsgspecError:
        return False


def _parse_float(value: str | None) -> float | None:
    """A header's number, when it is one, finite and not negative."""
    number = header_number(value)
    return number if number is not None and math.isfinite(number) and number >= 0 else None


def _one_line(exc: BaseException) -> str:
    """``exc`` in one line, its type first; a refused connection says host, port and the OS's
    reason (aiohttp's own text says ``ssl:default`` even of a plain-HTTP URL)."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        error = exc.os_error
        reason = os.strerror(error.errno) if error.errno else str(error) or type(error).__name__
        return f"{type(exc).__name__}: cannot connect to {exc.host}:{exc.port}: {reason}"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


