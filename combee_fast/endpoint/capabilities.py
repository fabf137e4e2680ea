"""What one endpoint can do, found out at start-up and adjusted when a reply says otherwise.

Structured-output forms, strongest first (:data:`FORMS`):

- ``json_schema``: OpenAI's ``{"type": "json_schema", "json_schema": {"name", "schema"}}`` (vLLM,
  SGLang, the native llama.cpp ``llama-server``, OpenAI);
- ``json_object_schema``: ``{"type": "json_object", "schema": {...}}`` (llama-cpp-python's
  server, which answers the first form with HTTP 500 "Input should be 'text' or 'json_object'");
- ``json_object``: plain ``{"type": "json_object"}`` (JSON, no schema);
- ``none``: no ``response_format`` at all (the schema is only in the prompt).

:func:`probe` proves a form with one small call (a reply that parses into a tiny schema) and reads
the context length and slot count where the server tells them (llama.cpp ``GET /props``, vLLM's
``max_model_len`` in ``GET /v1/models``). :class:`FormState` holds the form an endpoint's client
uses and steps down ONCE per rejected form (:func:`rejects_form`), with a warning.

OpenAI tool calling is probed the same way, only when an agent asks for it (:func:`probe_tools`):
one call offering one tool; a reply calling it with arguments of its schema proves it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import aiohttp
import msgspec

from combee_fast.endpoint.capped import BadEncoding, ReplyTooLarge, read_capped
from combee_fast.endpoint.structured import parse_structured
from combee_fast.endpoint.wire import ROLE_HEADER, CompletionRequest, CompletionResponse, JsonSchemaFormat, ResponseFormat
from combee_fast.config import RESPONSE_FORMATS
from combee_fast.errors import ConfigError
from combee_fast.schema import CallError, Message

RESPONSE_FORMAT_CHOICES = RESPONSE_FORMATS
"""Values of ``--response-format`` / ``endpoints.<role>.response_format``; ``auto`` probes."""

FORMS = tuple(form for form in RESPONSE_FORMATS if form != "auto")
"""Structured-output forms, strongest first."""

PROBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["answer"],
}
"""The tiny schema of the probe call: any form that constrains decoding answers it in a few tokens."""

PROBE_MESSAGES = (
    Message(role="system", content='Reply with a JSON object {"answer": "yes"} or {"answer": "no"} and nothing else.'),
    Message(role="user", content="Is 2 greater than 1?"),
)

_REJECTION_MARKERS = (
    "input should be 'text' or 'json_object'",  # llama-cpp-python (pydantic) on json_schema
    "response_format",
    "json_schema",
    "json_object",
    "unsupported format",
    "not supported",
)
_VALIDATION_MARKERS = ("input should be", "validation error", "extra inputs are not permitted",
                       "field required", "invalid request")


class Capabilities(msgspec.Struct, kw_only=True):
    """One endpoint as found at start-up; written to ``capabilities.json`` of the run directory.

    ``form``: the structured-output form in use; ``probed``: whether a probe call chose it (else
    it was configured or assumed); ``tried``: each probed form and what happened;
    ``context_length``/``slots``: as the server reported them (``None``: it did not say);
    ``tokenize``: the server answers ``POST /tokenize`` (llama.cpp); ``fallbacks``: forms left
    during the run because a reply rejected them; ``tools``: whether a tool-calling probe was
    answered with a call of its tool (None: not probed).
    """

    endpoint: str
    model: str
    form: str
    probed: bool = False
    tried: dict[str, str] = msgspec.field(default_factory=dict)
    context_length: int | None = None
    slots: int | None = None
    tokenize: bool = False
    server: str | None = None
    fallbacks: list[str] = msgspec.field(default_factory=list)
    tools: bool | None = None  # OpenAI tool calling works (None: not probed)


def check_form(value: str) -> str:
    """``value`` if it is a known ``response_format`` setting, else :class:`ConfigError`."""
    if value not in RESPONSE_FORMAT_CHOICES:
        raise ConfigError(f"response_format must be one of {', '.join(RESPONSE_FORMAT_CHOICES)}; got {value!r}")
    return value


def response_format(form: str, name: str, schema: dict[str, Any] | None) -> ResponseFormat | None:
    """The ``response_format`` of a request in ``form`` (``None`` for free text or form ``none``)."""
    if schema is None or form == "none":
        return None
    if form == "json_schema":
        return ResponseFormat(type="json_schema", json_schema=JsonSchemaFormat(name=name, schema=schema))
    if form == "json_object_schema":
        return ResponseFormat(type="json_object", schema=schema)
    return ResponseFormat(type="json_object")


def weaker(form: str) -> str:
    """The next form after ``form`` (``none`` stays ``none``)."""
    return FORMS[min(FORMS.index(form) + 1, len(FORMS) - 1)]


def is_validation_error(status: int | None, body: str) -> bool:
    """True when an error reply says the request itself is invalid (e.g. a pydantic 500 from
    llama-cpp-python): sending it again cannot help, so it is not retried as an outage."""
    if status is None or status < 400:
        return False
    low = body.lower()
    return status in (400, 422) or any(marker in low for marker in _VALIDATION_MARKERS)


def rejects_form(error: CallError) -> bool:
    """True when ``error`` is an HTTP error whose body blames the request's ``response_format``."""
    if error.kind != "http_status" or error.status is None or error.status < 400 or error.status == 429:
        return False
    low = (error.raw or error.message).lower()
    return is_validation_error(error.status, low) and any(marker in low for marker in _REJECTION_MARKERS)


class FormState:
    """The structured-output form one client sends, stepping down once per rejected form.

    :meth:`fall_back` is called with the form a failed request used: if that form is still the
    current one it steps to the next weaker form and warns (``warn``, default: a line on stderr);
    concurrent failures of the same form step down only once.
    """

    def __init__(self, capabilities: Capabilities, *, warn: Callable[[str], None] | None = None) -> None:
        self.capabilities = capabilities
        self._warn = warn or _stderr

    @property
    def form(self) -> str:
        return self.capabilities.form

    def fall_back(self, used: str, error: CallError) -> bool:
        """After ``error`` on a request sent in form ``used``: True when the request should be
        sent again in the (now) current form, which is weaker than ``used``."""
        if used == "none" or not rejects_form(error):
            return False
        caps = self.capabilities
        if caps.form == used:
            caps.form = weaker(used)
            caps.fallbacks.append(used)
            self._warn(f"warning: endpoint {caps.endpoint!r} rejected response_format form {used!r} "
                       f"({error.message[:160]}); using {caps.form!r} from now on")
        return FORMS.index(caps.form) > FORMS.index(used)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def root_url(base_url: str) -> str:
    """The server root of an OpenAI base URL (``http://h:p/v1`` -> ``http://h:p``)."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


async def probe(session: aiohttp.ClientSession, *, name: str, base_url: str, model: str,
                headers: dict[str, str], timeout_s: float, forms: tuple[str, ...] | None = None,
                limit: int) -> Capabilities:
    """Find the strongest form of ``forms`` the endpoint honours, and what it says of itself.
    No reply is read past ``limit`` bytes (before or after decoding).

    ``forms`` (default: all of :data:`FORMS`) are tried in order; each gets one call (``max_tokens`` 24, temperature 0) until one answers 200 with a reply
    that parses into :data:`PROBE_SCHEMA`. If none does, the strongest form answered with 200 is
    used (the server accepted it, the model just did not comply), else ``none``. Never raises for
    endpoint failures: what went wrong is in :attr:`Capabilities.tried`.
    """
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    caps = Capabilities(endpoint=name, model=model, form="none", probed=True)
    await _server_facts(session, caps, base_url, headers, timeout, limit)
    url = base_url.rstrip("/") + "/chat/completions"
    accepted: str | None = None
    for form in FORMS if forms is None else forms:
        body = msgspec.json.encode(CompletionRequest(
            model=model, messages=PROBE_MESSAGES, max_tokens=24, temperature=0.0,
            response_format=response_format(form, "probe", PROBE_SCHEMA)))
        try:
            async with session.post(url, data=body, headers={**headers, ROLE_HEADER: "probe"},
                                    timeout=timeout) as response:
                status, raw = response.status, await read_capped(response, limit)
        except (TimeoutError, aiohttp.ClientError) as exc:
            caps.tried[form] = f"no answer: {type(exc).__name__}"
            continue
        except (ReplyTooLarge, BadEncoding) as exc:
            caps.tried[form] = f"unreadable answer: {exc}"
            continue
        text = raw.decode("utf-8", errors="replace")
        if status != 200:
            caps.tried[form] = f"HTTP {status}: {' '.join(text.split())[:160]}"
            continue
        try:
            choice = msgspec.json.decode(raw, type=CompletionResponse).choices[0]
        except (msgspec.MsgspecError, IndexError):
            caps.tried[form] = "200 but not a chat completion"
            continue
        accepted = accepted or form
        _, problem = parse_structured(choice.message.content, choice.finish_reason, PROBE_SCHEMA)
        if problem is None:
            caps.tried[form] = "honoured: the reply matched the probe schema"
            caps.form = form
            return caps
        caps.tried[form] = f"accepted, reply did not match ({problem.kind})"
    caps.form = accepted or "none"
    return caps


PROBE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {"name": "answer", "description": "Give the answer to the question.",
                 "parameters": {"type": "object", "properties": PROBE_SCHEMA["properties"], "required": ["answer"]}},
}
"""The one tool of the tool-calling probe."""

PROBE_TOOL_MESSAGES = (
    Message(role="system", content="Answer by calling the tool 'answer' with yes or no."),
    Message(role="user", content="Is 2 greater than 1?"),
)


async def probe_tools(session: aiohttp.ClientSession, *, base_url: str, model: str, headers: dict[str, str],
                      timeout_s: float) -> tuple[bool, str]:
    """Whether the endpoint answers a request offering :data:`PROBE_TOOL` with a call of it whose
    arguments match its schema, and what happened. Never raises for endpoint failures."""
    body = msgspec.json.encode(CompletionRequest(model=model, messages=PROBE_TOOL_MESSAGES, max_tokens=48,
                                                 temperature=0.0, tools=(PROBE_TOOL,), tool_choice="auto"))
    try:
        async with session.post(base_url.rstrip("/") + "/chat/completions", data=body,
                                headers={**headers, ROLE_HEADER: "probe"},
                                timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
            status, raw = response.status, await response.read()
    except (TimeoutError, aiohttp.ClientError) as exc:
        return False, f"no answer: {type(exc).__name__}"
    if status != 200:
        return False, f"HTTP {status}: {' '.join(raw.decode('utf-8', errors='replace').split())[:160]}"
    try:
        calls = msgspec.json.decode(raw, type=CompletionResponse).choices[0].message.tool_calls or ()
    except (msgspec.MsgspecError, IndexError):
        return False, "200 but not a chat completion"
    for call in calls:
        if call.function.name == "answer":
            _, problem = parse_structured(call.function.arguments, None, PROBE_SCHEMA)
            if problem is None:
                return True, "honoured: the reply called the tool"
            return False, f"the reply called the tool with unusable arguments ({problem.kind})"
    return False, "the reply called no tool"


async def _server_facts(session: aiohttp.ClientSession, caps: Capabilities, base_url: str,
                        headers: dict[str, str], timeout: aiohttp.ClientTimeout, limit: int) -> None:
    """Context length, slots and tokenizer from llama.cpp ``/props`` or vLLM ``/models``."""
    root = root_url(base_url)
    props = await _get_json(session, root + "/props", headers, timeout, limit)
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        n_ctx = n_ctx if isinstance(n_ctx, int) else props.get("n_ctx")
        slots = props.get("total_slots")
        if isinstance(n_ctx, int) and n_ctx > 0:
            caps.context_length = n_ctx
        if isinstance(slots, int) and slots > 0:
            caps.slots = slots
        caps.server = "llama.cpp"
    models = await _get_json(session, base_url.rstrip("/") + "/models", headers, timeout, limit)
    if isinstance(models, dict) and isinstance(models.get("data"), list):
        for card in models["data"]:
            if isinstance(card, dict) and card.get("id") == caps.model:
                length = card.get("max_model_len")
                if isinstance(length, int) and length > 0 and caps.context_length is None:
                    caps.context_length = length
                    caps.server = caps.server or "vllm"
                meta = card.get("meta")
                if isinstance(meta, dict) and caps.context_length is None:
                    n_ctx = meta.get("n_ctx_train")
                    if isinstance(n_ctx, int) and n_ctx > 0:
                        caps.context_length = n_ctx
    if caps.server == "llama.cpp":
        caps.tokenize = await tokenize(session, base_url, "ping", headers=headers, timeout=timeout,
                                       limit=limit) is not None


async def tokenize(session: aiohttp.ClientSession, base_url: str, text: str, *, headers: dict[str, str],
                   timeout: aiohttp.ClientTimeout, limit: int) -> list[Any] | None:
    """The tokens of ``text`` by the server's own tokenizer (llama.cpp ``POST /tokenize`` at the
    server root, no special tokens added), or ``None`` when it does not answer 200 with a token
    list (of at most ``limit`` bytes). Never raises for endpoint failures."""
    try:
        async with session.post(root_url(base_url) + "/tokenize", json={"content": text}, headers=headers,
                                timeout=timeout) as response:
            if response.status != 200:
                return None
            body = msgspec.json.decode(await read_capped(response, limit))
    except (TimeoutError, aiohttp.ClientError, msgspec.MsgspecError, ReplyTooLarge, BadEncoding):
        return None
    tokens = body.get("tokens") if isinstance(body, dict) else None
    return tokens if isinstance(tokens, list) else None


async def _get_json(session: aiohttp.ClientSession, url: str, headers: dict[str, str],
                    timeout: aiohttp.ClientTimeout, limit: int) -> Any:
    try:
        async with session.get(url, headers=headers, timeout=timeout) as response:
            if response.status != 200:
                return None
            return msgspec.json.decode(await read_capped(response, limit))
    except (TimeoutError, aiohttp.ClientError, msgspec.MsgspecError, ReplyTooLarge, BadEncoding):
        return None
