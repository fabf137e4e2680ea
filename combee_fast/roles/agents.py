"""The four ACE roles as async calls: prompt -> endpoint -> parsed record.

Every call carries its role, and its seed is derived from the run's seed tree by the call's
identity (role, epoch, example, round), never by call order, so a replayed run sends the same
requests whatever order they complete in. No call raises for a bad endpoint or a bad response:
the failure is recorded on the returned record.
"""

from __future__ import annotations

import collections
import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from combee_fast.config import SamplingConfig, HISTORY_KEPT
from combee_fast.endpoint.client import ChatRequest, ChatResult
from combee_fast.engine.rng import derive_seed
from combee_fast.playbook import Playbook
from combee_fast.roles import curator, generator, reducer, reflector
from combee_fast.roles.budget import PLAYBOOK_ROLES, TokenCounts, cut_playbook, fit_playbook, is_context_error
from combee_fast.roles.base import no_answer
from combee_fast.roles.clients import RoleClients, RoleMap
from combee_fast.roles.ops import ops_schema, parse_ops
from combee_fast.roles.curator import playbook_stats_text
from combee_fast.roles.reflector import cited_bullets_text
from combee_fast.schema import CallError, Example, Message, Op, Proposal, Reflection, Rollout, Usage
from combee_fast.protocols import Task


_ROLE_OUTPUT: dict[str, tuple[int, dict[str, Any], str]] = {
    "generator": (generator.GENERATOR_MAX_TOKENS, generator.GENERATOR_SCHEMA, "generator_output"),
    "reflector": (reflector.REFLECTOR_MAX_TOKENS, reflector.REFLECTOR_SCHEMA, "reflection"),
    "curator": (curator.CURATOR_MAX_TOKENS, curator.CURATOR_SCHEMA, "operations"),
    "reducer": (reducer.REDUCER_MAX_TOKENS, reducer.REDUCER_SCHEMA, "reduction"),
}
"""Per role: completion token limit, JSON Schema of the reply, and the schema's name."""


class Agents:
    """Calls the roles for one run: ``task`` scores answers, ``seed`` roots the request seeds."""

    def __init__(
        self,
        task: Task,
        clients: RoleClients,
        *,
        seed: int,
        temperature: float = 0.0,
        use_ground_truth: bool = True,
        sampling: Callable[[str], SamplingConfig] | None = None,
    ) -> None:
        self.task = task
        self.clients = clients
        self.seed = seed
        self.temperature = temperature
        self.reflect_temperature: float | None = None  # set by a diversity remedy; None: ``temperature``
        self.use_ground_truth = use_ground_truth
        self.sampling = {role: sampling(role) if sampling is not None else SamplingConfig() for role in _ROLE_OUTPUT}
        # the latest failed or unusable calls, raw reply kept (bounded: a long-lived learner's memory stays flat)
        self.failures: collections.deque[dict[str, Any]] = collections.deque(maxlen=HISTORY_KEPT)
        self.failures_total = 0  # failed or unusable calls ever, kept or not
        self.on_failure: Callable[[dict[str, Any]], None] | None = None  # e.g. a run directory's errors.jsonl
        self.calls: dict[str, int] = dict.fromkeys(_ROLE_OUTPUT, 0)
        # per role: calls sent again with half the playbook after exceeding the context (calls.json's trimmed)
        self.trimmed: dict[str, int] = dict.fromkeys(PLAYBOOK_ROLES, 0)
        self.token_counts = TokenCounts()  # prompt texts counted by the endpoints' tokenizers

    @classmethod
    def on(cls, role_map: RoleMap, task: Task | None, clients: RoleClients) -> Agents:
        """The role calls ``role_map`` describes, through ``clients`` (built from it), scored by ``task``."""
        return cls(task, clients, seed=role_map.seed, temperature=role_map.temperature,  # type: ignore[arg-type]
                   use_ground_truth=role_map.use_ground_truth, sampling=role_map.sampling_for())

    def role_map(self) -> RoleMap:
        """What rebuilds these role calls elsewhere (:func:`~combee_fast.roles.clients.open_role_clients`):
        every endpoint with its replicas and what start-up found of them, the seed, the sampling."""
        return RoleMap.of_clients(self.clients, seed=self.seed, temperature=self.temperature,
                                  use_ground_truth=self.use_ground_truth, sampling=self.sampling)

    def _note(self, role: str, error: CallError | None, text: str | None) -> None:
        """Count a call of ``role``; keep its failure (kind, message, raw reply) if it failed, and
        hand it to :attr:`on_failure`."""
        self.calls[role] = self.calls.get(role, 0) + 1
        if error is not None:
            self.record_failure(role, error, text)

    def record_failure(self, role: str, error: CallError, text: str | None) -> None:
        """Keep one failed or unusable call of ``role`` (kind, message, raw reply) and hand it to
        :attr:`on_failure`; for role calls made outside these agents (another learner's roles)."""
        self.failures_total += 1
        failure = {"role": role, "kind": error.kind, "label": error.label, "message": error.message,
                   "status": error.status, "raw": error.raw if error.raw is not None else text}
        self.failures.append(failure)
        if self.on_failure is not None:
            self.on_failure(failure)

    def note_call(self, role: str, error: CallError | None, text: str | None) -> None:
        """Count a call another learner's role made through these clients (GEPA's), as the
        roles' own are: in :attr:`calls`, and its failure in :attr:`failures` and :attr:`on_failure`."""
        self._note(role, error, text)

    def effective_sampling(self) -> dict[str, dict[str, Any]]:
        """What each role sends: temperature, max tokens and the extra body fields (for the run
        directory's ``sampling.json``)."""
        return {role: {"temperature": self._temperature(role), "max_tokens": self._max_tokens(role),
                       **(self._extra_body(role) or {})} for role in _ROLE_OUTPUT}

    def _temperature(self, role: str) -> float:
        chosen = self.sampling[role].temperature
        return self.temperature if chosen is None else chosen

    def _max_tokens(self, role: str) -> int:
        chosen = self.sampling[role].max_completion_tokens
        return _ROLE_OUTPUT[role][0] if chosen is None else chosen

    def _extra_body(self, role: str) -> dict[str, Any] | None:
        settings = self.sampling[role]
        extra = {name: value for name in ("frequency_penalty", "presence_penalty", "top_p")
                 if (value := getattr(settings, name)) is not None}
        extra.update(settings.extra)
        return extra or None

    async def generate(
        self,
        example: Example,
        playbook_text: str,
        *,
        epoch: int | str,
        round_: int = 0,
        previous: Rollout | None = None,
        reflection: Reflection | None = None,
    ) -> Rollout:
        """One generator attempt, scored by the task. A failed call gives a rollout with ``error``.

        The playbook is cut to fit the endpoint's context and trimmed on a context error
        (:meth:`_chat_fitted`)."""
        def build(text: str) -> ChatRequest:
            messages = generator.generator_messages(
                example.input,
                text,
                previous_answer=previous.answer if previous is not None else None,
                reflection=reflection,
            )
            return self._request("generator", messages, epoch, example.id, round_,
                                 schema=generator.generator_schema(text))

        request, result = await self._chat_fitted("generator", playbook_text, build)
        messages = request.messages
        parsed = _parsed(result, generator.parse_generator)
        if not isinstance(parsed, CallError):
            parsed = no_answer(parsed.final_answer, role="generator", question=example.input) or parsed
        self._note("generator", parsed if isinstance(parsed, CallError) else None, result.text)
        if isinstance(parsed, CallError):
            score = self.task.score(example, None)
            return Rollout(
                example=example, round=round_, messages=messages, answer=None, reasoning="",
                bullet_ids=(), score=score.value, feedback=score.feedback, usage=result.usage,
                error=parsed, raw=result.text,
            )
        score = self.task.score(example, parsed.final_answer)
        return Rollout(
            example=example, round=round_, messages=messages, answer=parsed.final_answer,
            reasoning=parsed.reasoning, bullet_ids=parsed.bullet_ids, score=score.value,
            feedback=score.feedback, usage=result.usage, raw=result.text,
        )

    async def reflect(self, rollout: Rollout, playbook: Playbook, *, epoch: int) -> Reflection:
        """Diagnose one rollout. A failed call gives a reflection with ``error`` and no tags."""
        cited = [bullet for bid in rollout.bullet_ids if (bullet := playbook.get(bid)) is not None]
        ground_truth = rollout.example.target if self.use_ground_truth else None
        messages = reflector.reflector_messages(rollout, cited_bullets_text(cited), ground_truth=ground_truth)
        schema = reflector.reflector_schema([bullet.id for bullet in cited])
        request = self._request("reflector", messages, epoch, rollout.id, schema=schema)
        if self.reflect_temperature is not None:
            request = msgspec.structs.replace(request, temperature=self.reflect_temperature)
        result = await self.clients.reflector.chat(request)
        if result.error is not None:
            self._note("reflector", result.error, result.text)
            return _failed_reflection(rollout.id, result.usage, result.error)
        parsed = reflector.parse_reflector(result.data, result.text, rollout_id=rollout.id, usage=result.usage)
        self._note("reflector", parsed.error, result.text)
        return parsed

    async def curate(
        self,
        reflections: Sequence[Reflection],
        playbook: Playbook,
        playbook_text: str,
        *,
        source: str,
        seed_path: tuple[int | str, ...],
    ) -> Proposal:
        """One curator call over ``reflections`` against ``playbook`` (its text cut to fit the
        endpoint's context and trimmed on a context error: :meth:`_chat_fitted`)."""
        stats = playbook_stats_text(playbook.bullets())

        def build(text: str) -> ChatRequest:
            return self._request("curator", curator.curator_messages(text, stats, reflections), *seed_path,
                                 schema=ops_schema(curator.CURATOR_SCHEMA, text))

        return await self._propose("curator", playbook_text, build, source, parse_ops)

    async def reduce(
        self,
        proposals: Sequence[Sequence[Op]],
        playbook_text: str,
        *,
        source: str,
        seed_path: tuple[int | str, ...],
    ) -> Proposal:
        """One reducer call merging ``proposals`` made against the same base playbook (its text cut
        to fit the endpoint's context and trimmed on a context error: :meth:`_chat_fitted`)."""
        def build(text: str) -> ChatRequest:
            return self._request("reducer", reducer.reducer_messages(text, proposals), *seed_path,
                                 schema=ops_schema(reducer.REDUCER_SCHEMA, text))

        def parse(data: Any, text: str | None) -> tuple[Op, ...] | CallError:
            return reducer.parse_reduction(data, text, proposals)

        return await self._propose("reducer", playbook_text, build, source, parse)

    async def _chat_fitted(self, role: str, playbook_text: str,
                           build: Callable[[str], ChatRequest]) -> tuple[ChatRequest, ChatResult]:
        """The call ``build(text)`` of a role of :data:`PLAYBOOK_ROLES`, with ``playbook_text`` cut
        to fit the role's endpoint (:meth:`_fit`). A reply saying the context was exceeded halves
        the playbook and sends the call once more (counted in :attr:`trimmed`, a warning the first
        time per role). Returns the request last sent and its result."""
        client = getattr(self.clients, role)
        playbook_text = await self._fit(role, playbook_text, build)
        request = build(playbook_text)
        result = await client.chat(request)
        if is_context_error(result.error) and playbook_text:
            playbook_text = cut_playbook(playbook_text, len(playbook_text) // 2)
            self.trimmed[role] += 1
            if self.trimmed[role] == 1:
                print(f"warning: the {role}'s prompt exceeded the context of endpoint {client.config.name!r}; "
                      f"the playbook is cut to {len(playbook_text)} characters and the call sent again "
                      f"(counted in calls.json as trimmed.{role})", file=sys.stderr)
            request = build(playbook_text)
            result = await client.chat(request)
        return request, result

    async def _fit(self, role: str, playbook_text: str, build: Callable[[str], ChatRequest]) -> str:
        """``playbook_text`` cut so that the prompt of ``build(text)`` plus the role's reply fits the
        context the role's endpoint reported, counted by its tokenizer if it has one (unchanged
        when it reported none; :func:`combee_fast.roles.budget.fit_playbook`)."""
        client = getattr(self.clients, role)
        capabilities = client.capabilities
        if capabilities.context_length is None or not playbook_text:
            return playbook_text
        count = functools.partial(self.token_counts.count, client) if capabilities.tokenize else None
        return await fit_playbook(playbook_text, build("").messages,
                                  capabilities.context_length - self._max_tokens(role), count)

    def _request(self, role: str, messages: tuple[Message, ...], *seed_path: int | str,
                 schema: dict[str, Any] | None = None) -> ChatRequest:
        """A request for ``role`` whose seed is the node ``(role, *seed_path)`` of the run's seed tree;
        ``schema``: the role's schema with the prompt's ids enumerated (default: the role's own)."""
        _, role_schema, schema_name = _ROLE_OUTPUT[role]
        schema = role_schema if schema is None else schema
        return ChatRequest(
            role=role,
            messages=messages,
            max_tokens=self._max_tokens(role),
            temperature=self._temperature(role),
            seed=derive_seed(self.seed, role, *seed_path),
            json_schema=schema,
            schema_name=schema_name,
            extra_body=self._extra_body(role),
        )

    async def _propose(
        self,
        role: str,
        playbook_text: str,
        build: Callable[[str], ChatRequest],
        source: str,
        parse: Callable[[Any, str | None], tuple[Op, ...] | CallError],
    ) -> Proposal:
        """The proposal of one curator or reducer call ``build(playbook_text)`` (:meth:`_chat_fitted`)."""
        _, result = await self._chat_fitted(role, playbook_text, build)
        parsed = _parsed(result, parse)
        self._note(role, parsed if isinstance(parsed, CallError) else None, result.text)
        if isinstance(parsed, CallError):
            return Proposal(source=source, edits=(), usage=result.usage, error=parsed)
        return Proposal(source=source, edits=parsed, usage=result.usage)


def _parsed(result: ChatResult, parse: Callable[[Any, str | None], Any]) -> Any:
    """The call's error if it failed, else what ``parse(data, text)`` makes of the response."""
    if result.error is not None:
        return result.error
    return parse(result.data, result.text)


def _failed_reflection(rollout_id: str, usage: Usage, error: CallError) -> Reflection:
    return Reflection(
        rollout_id=rollout_id, reasoning="", error_identification="", root_cause="",
        correct_approach="", key_insight="", bullet_tags=(), usage=usage, error=error,
    )
