"""The generic call kit every learner's role calls are made with: :class:`RoleCalls`.

It knows the run's roles only as declared (:class:`~combee_fast.roles.spec.Role`) and does what
every role call needs, whoever makes it (ACE's :class:`~combee_fast.ace.calls.AceCalls`, GEPA's
and TextGrad's calls, an agent's turns):

- **requests**: each role's sampling (its ``[sampling.<role>]`` table over its pool's and the
  default, over the role's own max tokens and temperature), its seed derived from the run's seed
  tree by the call's identity (role, then a path the caller gives), never by call order, so a
  replayed run sends the same requests whatever order they complete in;
- **accounting**: calls per role, failed or unusable calls with their raw reply (the latest
  :data:`~combee_fast.config.HISTORY_KEPT` kept in memory, every one a
  :class:`~combee_fast.engine.events.CallFailed` on :attr:`RoleCalls.events`: a run's
  ``errors.jsonl`` is its subscriber), calls sent again with a cut context;
- **bounded prompts**: a role whose prompt holds the learned context gets it cut to fit its
  endpoint's context length, and halved once more on a context error (:meth:`RoleCalls.chat_fitted`).

No call raises for a bad endpoint or reply: the failure is on the returned result.
"""

from __future__ import annotations

import collections
import functools
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from combee_fast import tracing
from combee_fast.config import HISTORY_KEPT, SamplingConfig
from combee_fast.endpoint.calls import ChatRequest, ChatResult
from combee_fast.engine.events import CallFailed, CallReplied, Events
from combee_fast.engine.rng import derive_seed
from combee_fast.roles.budget import REPLY_GIVES_WAY_TO, TokenCounts, cut_context, fit_context, is_context_error
from combee_fast.roles.clients import Client, RoleClients, RoleMap
from combee_fast.roles.spec import Role, first_of
from combee_fast.schema import CallError, Message

if TYPE_CHECKING:
    from combee_fast.protocols.tasks import Task

Parse = Callable[[Any, str | None], Any]
"""What a caller makes of a reply: ``parse(data, text)`` -> a record, or a :class:`CallError`."""


class RoleCalls:
    """The role calls of one run over ``clients`` for the declared ``roles`` (module docstring).
    ``task`` scores answers (None: an embedded learner that only learns from submitted
    rollouts); ``seed`` roots the request seeds; ``temperature`` is the base temperature of a
    role with none of its own; ``use_ground_truth``: whether reflections see the target;
    ``events``: the hub the calls' failures are emitted on (the session's; default: a hub of
    their own)."""

    def __init__(
        self,
        task: Task | None,
        clients: RoleClients,
        roles: Sequence[Role],
        *,
        seed: int,
        temperature: float = 0.0,
        use_ground_truth: bool = True,
        sampling: dict[str, SamplingConfig] | None = None,
        events: Events | None = None,
    ) -> None:
        self.task = task
        self.clients = clients
        self.roles: dict[str, Role] = {role.key: role for role in roles}
        self.seed = seed
        self.temperature = temperature
        self.use_ground_truth = use_ground_truth
        self.sampling = {key: (sampling or {}).get(key) or SamplingConfig() for key in self.roles}
        self.diverse_temperature: float | None = None  # set by a diversity remedy, for the ``diverse`` roles
        # the latest failed or unusable calls, raw reply kept (bounded: a long-lived learner's memory stays flat)
        self.failures: collections.deque[dict[str, Any]] = collections.deque(maxlen=HISTORY_KEPT)
        self.failures_total = 0  # failed or unusable calls ever, kept or not
        self.events = events if events is not None else Events()
        self.calls: dict[str, int] = dict.fromkeys(self.roles, 0)
        # per role whose prompt holds the context: calls sent again with half of it (calls.json's trimmed)
        self.trimmed: dict[str, int] = {key: 0 for key, role in self.roles.items() if role.fits_context}
        self.token_counts = TokenCounts()  # prompt texts counted by the endpoints' tokenizers

    @classmethod
    def on(cls, role_map: RoleMap, task: Task | None, clients: RoleClients, *,
           events: Events | None = None) -> RoleCalls:
        """The role calls ``role_map`` describes, through ``clients`` (built from it), scored by
        ``task``, their failures emitted on ``events``."""
        return cls(task, clients, role_map.specs, seed=role_map.seed, temperature=role_map.temperature,
                   use_ground_truth=role_map.use_ground_truth, sampling=role_map.sampling, events=events)

    def role_map(self) -> RoleMap:
        """What rebuilds these role calls elsewhere (:func:`~combee_fast.roles.clients.open_role_clients`):
        every endpoint with its replicas and what start-up found of them, the seed, the sampling."""
        return RoleMap.of_clients(tuple(self.roles.values()), self.clients, seed=self.seed,
                                  temperature=self.temperature, use_ground_truth=self.use_ground_truth,
                                  sampling=self.sampling)

    def role(self, key: str) -> Role:
        return self.roles[key]

    def serving(self) -> Role:
        """The first role of the ``serve`` pool: the one an agent's turns are made as."""
        return first_of(tuple(self.roles.values()), "serve")

    def client(self, key: str) -> Client:
        return self.clients[key]

    # -- sampling ---------------------------------------------------------------------------------

    def sampling_of(self, key: str) -> tuple[float, int, dict[str, Any] | None]:
        """``(temperature, max_tokens, extra body fields)`` role ``key`` sends."""
        return self.temperature_of(key), self.max_tokens_of(key), self.extra_body_of(key)

    def effective_sampling(self) -> dict[str, dict[str, Any]]:
        """What each role sends: temperature, max tokens and the extra body fields (for the run
        directory's ``sampling.json``)."""
        return {key: {"temperature": self.temperature_of(key), "max_tokens": self.max_tokens_of(key),
                      **(self.extra_body_of(key) or {})} for key in self.roles}

    def temperature_of(self, key: str) -> float:
        chosen = self.sampling[key].temperature
        if chosen is not None:
            return chosen
        role = self.roles[key]
        if role.diverse and self.diverse_temperature is not None:
            return self.diverse_temperature
        return self.temperature if role.temperature is None else role.temperature

    def max_tokens_of(self, key: str) -> int:
        chosen = self.sampling[key].max_completion_tokens
        return self.roles[key].max_tokens if chosen is None else chosen

    def extra_body_of(self, key: str) -> dict[str, Any] | None:
        settings = self.sampling[key]
        extra = {name: value for name in ("frequency_penalty", "presence_penalty", "top_p")
                 if (value := getattr(settings, name)) is not None}
        extra.update(settings.extra)
        return extra or None

    def request(self, key: str, messages: Sequence[Message], *seed_path: int | str,
                schema: dict[str, Any] | None = None, schema_name: str = "reply",
                max_tokens: int | None = None, **fields: Any) -> ChatRequest:
        """A request of role ``key`` whose seed is the node ``(key, *seed_path)`` of the run's seed
        tree, sampled as the role is; ``fields``: more :class:`ChatRequest` fields (tools...)."""
        return ChatRequest(
            role=key, messages=tuple(messages), max_tokens=max_tokens or self.max_tokens_of(key),
            temperature=self.temperature_of(key), seed=derive_seed(self.seed, key, *seed_path),
            json_schema=schema, schema_name=schema_name, extra_body=self.extra_body_of(key), **fields,
        )

    # -- calls and their accounting -----------------------------------------------------------------

    async def send(self, request: ChatRequest) -> ChatResult:
        """``request`` through its role's client, not yet accounted (see :meth:`note`)."""
        return await self._chat(self.clients[request.role], request)

    async def _chat(self, client: Client, request: ChatRequest) -> ChatResult:
        """One call of ``client``: a span of its own when tracing (:func:`combee_fast.tracing.chat`)."""
        role = self.roles.get(request.role)
        return await tracing.chat(client, request, role.pool if role is not None else None)

    async def call(self, request: ChatRequest, parse: Parse | None = None) -> tuple[ChatResult, Any]:
        """``request`` sent and accounted: its result and what ``parse`` made of the reply (the
        call's error when it failed; ``None`` without ``parse``). A reply ``parse`` finds unusable
        (a :class:`CallError`) is accounted as a failed call with its raw text, and so is a reply
        whose every text is the role's own name echoed back (``placeholder``: a server that does
        not know the role, not a model's answer)."""
        result = await self.send(request)
        parsed = _parsed(result, parse) if not echoes_role(result, request.role) else \
            CallError("placeholder", f"the reply only echoes the role's name {request.role!r}: the endpoint does not "
                                     "play this role", raw=result.text)
        self.note(request.role, parsed if isinstance(parsed, CallError) else result.error, result.text)
        return result, parsed

    def note(self, key: str, error: CallError | None, text: str | None) -> None:
        """Count a call of role ``key`` and emit its reply (a
        :class:`~combee_fast.engine.events.CallReplied`); keep its failure (kind, message, raw
        reply) if it failed, and emit it."""
        self.calls[key] = self.calls.get(key, 0) + 1
        self.events.emit(CallReplied.of(key, text, error.label if error is not None else ""))
        if error is not None:
            self.record_failure(key, error, text)

    def record_failure(self, key: str, error: CallError, text: str | None) -> None:
        """Keep one failed or unusable call of role ``key`` (kind, message, raw reply) and emit it
        (a :class:`~combee_fast.engine.events.CallFailed`)."""
        self.failures_total += 1
        failed = CallFailed(key, error.label, error.message, error.kind, error.status,
                            error.raw if error.raw is not None else text)
        self.failures.append(failed.record())
        self.events.emit(failed)

    def note_unusable(self, key: str, error: CallError, raw: str | None) -> None:
        """Keep a reply of role ``key`` that its caller found unusable (an agent's reply it could
        not parse) as a failure: its call was counted, and its reply emitted, when it came
        (:meth:`note`); one call is one reply line."""
        self.record_failure(key, error, raw)

    # -- prompts that hold the learned context --------------------------------------------------------

    async def chat_fitted(self, key: str, context_text: str,
                          build: Callable[[str], ChatRequest]) -> tuple[ChatRequest, ChatResult]:
        """The call ``build(text)`` of role ``key`` (a role that ``fits_context``), with
        ``context_text`` cut to fit the role's endpoint (:meth:`fit`). A reply saying the context
        was exceeded halves the context and sends the call once more (counted in
        :attr:`trimmed`, a warning the first time per role). Returns the request last sent and
        its result, not yet accounted."""
        client = self.clients[key]
        context_text, max_tokens = await self.fit(key, context_text, build)
        request = _replying_in(build(context_text), max_tokens)
        result = await self._chat(client, request)
        if is_context_error(result.error) and context_text:
            context_text = cut_context(context_text, len(context_text) // 2)
            self.trimmed[key] = self.trimmed.get(key, 0) + 1
            if self.trimmed[key] == 1:
                print(f"warning: the {key}'s prompt exceeded the context of endpoint {client.config.name!r}; "
                      f"the learned context is cut to {len(context_text)} characters and the call sent again "
                      f"(counted in calls.json as trimmed.{key})", file=sys.stderr)
            request = _replying_in(build(context_text), max_tokens)
            result = await self._chat(client, request)
        return request, result

    async def fit(self, key: str, context_text: str,
                  build: Callable[[str], ChatRequest]) -> tuple[str, int | None]:
        """``context_text``, and the reply's ``max_tokens`` when it must be less than ``build`` sets
        (None: as built), such that the prompt of ``build(text)`` plus the reply fit the context
        the role's endpoint reported, counted by its tokenizer if it has one
        (:func:`combee_fast.roles.budget.fit_context`). The reply gives way first: a context that
        does not fit beside the whole ``max_tokens`` is given the room of all but
        :data:`~combee_fast.roles.budget.REPLY_GIVES_WAY_TO` of it, and is cut only if it does not
        fit even then. Unchanged when the endpoint reported no context length."""
        client = self.clients[key]
        capabilities = client.capabilities
        if capabilities.context_length is None or not context_text:
            return context_text, None
        count = functools.partial(self.token_counts.count, client) if capabilities.tokenize else None
        bare = build("")  # the prompt without the context, and the reply's max_tokens as built
        room = capabilities.context_length - bare.max_tokens
        fitted = await fit_context(context_text, bare.messages, room, count)
        if fitted == context_text:
            return context_text, None
        reply = max(1, int(bare.max_tokens * REPLY_GIVES_WAY_TO))
        return await fit_context(context_text, bare.messages, capabilities.context_length - reply, count), reply


def _replying_in(request: ChatRequest, max_tokens: int | None) -> ChatRequest:
    """``request`` with its reply bounded by ``max_tokens`` (None: as it is)."""
    return request if max_tokens is None else msgspec.structs.replace(request, max_tokens=max_tokens)


def echoes_role(result: ChatResult, role: str) -> bool:
    """Whether the reply's every text (its JSON's strings, or its plain text) is ``role``."""
    if result.error is not None or result.text is None:
        return False
    texts: list[str] = []
    pending: list[Any] = [result.data] if result.data is not None else [result.text]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            texts.append(value.strip())
        elif isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return bool(texts) and all(text == role for text in texts)


def _parsed(result: ChatResult, parse: Parse | None) -> Any:
    """The call's error if it failed, else what ``parse(data, text)`` makes of the response."""
    if result.error is not None:
        return result.error
    return parse(result.data, result.text) if parse is not None else None
