"""GEPA's three role calls over the run's endpoints: prompt -> endpoint -> parsed record.

- **solve** (``gepa_solver``, on the generator's endpoint): the candidate's text as the system
  message, the question as the user message, graded by the task. One solve is one *metric call*.
- **propose** (``gepa_proposer``, on the reflector's endpoint): the reflection that rewrites one
  component from graded examples.
- **aggregate** (``gepa_aggregator``, on the reducer's endpoint): several proposed rewrites of
  one component, made from the same parent, merged into one. It reads each rewrite's line changes
  and keeps added lines by reference (:mod:`combee_fast.gepa.revisions`); the merged text is
  composed here, so its reply stays short however long the instruction grows.

Seeds come from the run's seed tree by the call's identity: a solve by the example alone (every
candidate is graded with the same draw on the same example: common random numbers, as a
temperature-0 model), a proposal or aggregation by its iteration and place. No call raises for a
bad endpoint or reply: the failure is recorded on what it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import orjson

from combee_fast.endpoint.calls import ChatRequest, ChatResult
from combee_fast.engine.rng import derive_seed
from combee_fast.gepa.candidate import load_prompt
from combee_fast.gepa.revisions import changes_text, compose
from combee_fast.protocols import Task
from combee_fast.roles.agents import RoleClients
from combee_fast.roles.base import convert, decode_json_object, fill, no_answer
from combee_fast.roles.names import GEPA_AGGREGATOR_ROLE as AGGREGATOR_ROLE
from combee_fast.roles.names import GEPA_PROPOSER_ROLE as PROPOSER_ROLE
from combee_fast.roles.names import GEPA_SOLVER_ROLE as SOLVER_ROLE
from combee_fast.schema import CallError, Example, GradedAnswer, Message, Usage


SOLVER_MAX_TOKENS = 1024
REWRITE_MAX_TOKENS = 8192
AGGREGATE_MAX_TOKENS = 2048

SOLVER_USER_TEMPLATE = load_prompt("solver_user.txt")
PROPOSER_SYSTEM_PROMPT = load_prompt("proposer.txt")
PROPOSER_USER_TEMPLATE = load_prompt("proposer_user.txt")
AGGREGATOR_SYSTEM_PROMPT = load_prompt("aggregator.txt")
AGGREGATOR_USER_TEMPLATE = load_prompt("aggregator_user.txt")

SOLVER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "final_answer": {"type": "string"}},
    "required": ["reasoning", "final_answer"],
    "additionalProperties": False,
}
REWRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "instruction": {"type": "string"}},
    "required": ["reasoning", "instruction"],
    "additionalProperties": False,
}
AGGREGATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "remove": {"type": "array", "items": {"type": "integer"}},
        "keep": {"type": "array", "items": {"type": "string"}},
        "add": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["reasoning", "remove", "keep", "add"],
    "additionalProperties": False,
}
"""JSON Schemas of the replies, for ``response_format``. Do not mutate."""


class Rewrite(msgspec.Struct, frozen=True):
    """A proposed or aggregated text for one component (``None`` when the call failed)."""

    text: str | None
    usage: Usage
    error: CallError | None = None


class _SolverReply(msgspec.Struct):
    reasoning: str
    final_answer: str | int | float


class _RewriteReply(msgspec.Struct):
    reasoning: str
    instruction: str


class _AggregateReply(msgspec.Struct):
    reasoning: str
    remove: list[int]
    keep: list[str]
    add: list[str]


def examples_text(evaluations: Sequence[GradedAnswer]) -> str:
    """Graded examples as the proposer reads them: one JSON object per line."""
    return "\n".join(
        orjson.dumps({
            "question": e.example.input, "answer": e.answer if e.answer is not None else "(no answer)",
            "score": e.score, "feedback": e.feedback,
        }).decode()
        for e in evaluations
    )


Noted = Callable[[str, CallError | None, str | None], None]
"""Told ``(role, error, reply text)`` of every call made (the run's call counts and errors.jsonl)."""


class GepaCalls:
    """The GEPA role calls of one run: ``task`` grades answers, ``seed`` roots the request seeds;
    ``note`` is told of every call and how it ended."""

    def __init__(self, task: Task, clients: RoleClients, *, seed: int, temperature: float = 0.0,
                 note: Noted | None = None) -> None:
        self.task = task
        self.clients = clients
        self.seed = seed
        self.temperature = temperature
        self.note = note

    async def solve(self, example: Example, system_prompt: str) -> GradedAnswer:
        """One metric call: ``example`` answered under ``system_prompt``, graded."""
        user = fill(SOLVER_USER_TEMPLATE, question=example.input)
        messages = (Message("system", system_prompt), Message("user", user))
        result = await self.clients.generator.chat(
            self._request(SOLVER_ROLE, messages, SOLVER_MAX_TOKENS, SOLVER_SCHEMA, "answer", example.id)
        )
        reply = _parsed(result, _SolverReply, "solver")
        answer = None
        if not isinstance(reply, CallError):
            answer = (reply.final_answer if isinstance(reply.final_answer, str) else str(reply.final_answer)).strip()
            if (problem := no_answer(answer, role=SOLVER_ROLE, question=example.input)) is not None:
                reply, answer = problem, None
        self._noted(SOLVER_ROLE, result, reply)
        score = self.task.score(example, answer)
        return GradedAnswer(
            example, answer, score.value, score.feedback, result.usage, reply if isinstance(reply, CallError) else None
        )

    async def propose(
        self, current: str, evaluations: Sequence[GradedAnswer], *, seed_path: tuple[int | str, ...]
    ) -> Rewrite:
        """One reflection call: a rewrite of ``current`` from the graded ``evaluations``."""
        user = fill(PROPOSER_USER_TEMPLATE, instruction=current, examples=examples_text(evaluations))
        messages = (Message("system", PROPOSER_SYSTEM_PROMPT), Message("user", user))
        return await self._rewrite(self.clients.reflector, PROPOSER_ROLE, messages, seed_path)

    async def aggregate(self, current: str, texts: Sequence[str], *, seed_path: tuple[int | str, ...]) -> Rewrite:
        """One aggregation call: the rewrites ``texts`` of ``current`` merged into one, composed
        from the lines it removes, keeps by reference and writes anew."""
        user = fill(AGGREGATOR_USER_TEMPLATE, instruction=current, proposals=changes_text(current, texts))
        messages = (Message("system", AGGREGATOR_SYSTEM_PROMPT), Message("user", user))
        result = await self.clients.reducer.chat(
            self._request(AGGREGATOR_ROLE, messages, AGGREGATE_MAX_TOKENS, AGGREGATE_SCHEMA, "aggregation", *seed_path)
        )
        reply = _parsed(result, _AggregateReply, AGGREGATOR_ROLE)
        self._noted(AGGREGATOR_ROLE, result, reply)
        if isinstance(reply, CallError):
            return Rewrite(None, result.usage, reply)
        return Rewrite(compose(current, texts, reply.remove, reply.keep, reply.add), result.usage)

    async def _rewrite(
        self, client: Any, role: str, messages: tuple[Message, ...], seed_path: tuple[int | str, ...]
    ) -> Rewrite:
        """One call replying with a whole new text (the proposer's reflection)."""
        request = self._request(role, messages, REWRITE_MAX_TOKENS, REWRITE_SCHEMA, "rewrite", *seed_path)
        result = await client.chat(request)
        reply = _parsed(result, _RewriteReply, role)
        if not isinstance(reply, CallError) and not reply.instruction.strip():
            reply = CallError("schema_mismatch", f"{role}: empty instruction", raw=result.text)
        elif not isinstance(reply, CallError):
            reply = no_answer(reply.instruction, role=role) or reply
        self._noted(role, result, reply)
        if isinstance(reply, CallError):
            return Rewrite(None, result.usage, reply)
        return Rewrite(reply.instruction.strip("\n"), result.usage)

    def _noted(self, role: str, result: ChatResult, reply: Any) -> None:
        if self.note is not None:
            self.note(role, reply if isinstance(reply, CallError) else None, result.text)

    def _request(
        self, role: str, messages: tuple[Message, ...], max_tokens: int, schema: dict[str, Any], schema_name: str,
        *seed_path: int | str,
    ) -> ChatRequest:
        return ChatRequest(
            role=role, messages=messages, max_tokens=max_tokens, temperature=self.temperature,
            seed=derive_seed(self.seed, role, *seed_path), json_schema=schema, schema_name=schema_name,
        )


def _parsed(result: ChatResult, shape: type[Any], what: str) -> Any:
    """The call's error, or its reply validated into ``shape`` (a :class:`CallError` if unusable)."""
    if result.error is not None:
        return result.error
    obj = decode_json_object(result.data, result.text)
    if isinstance(obj, CallError):
        return obj
    return convert(obj, shape, result.text, what=what)
