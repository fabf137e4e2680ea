"""GEPA's three role calls over the run's endpoints: prompt -> endpoint -> parsed record.

- **solve** (role ``solver``, requests ``gepa_solver``, pool ``serve``): the candidate's text as
  the system message, the question as the user message, graded by the task. One solve is one
  *metric call*. On a task solved by acting (``attempts``: agent episodes), a solve is one
  episode: the candidate's text is the agent's instructions (its context, with no citable parts),
  the environment's checks grade it, and the graded answer carries the trajectory.
- **propose** (``proposer``, ``gepa_proposer``, pool ``propose``): the reflection that rewrites
  one component from graded examples; from episodes, its reflective dataset holds each one's
  trajectory (steps, actions, observations) rendered by :mod:`combee_fast.roles.trajectory`
  within the proposer endpoint's context, with the checks' score and the checker's feedback.
- **aggregate** (``aggregator``, ``gepa_aggregator``, pool ``propose``): several proposed rewrites of
  one component, made from the same parent, merged into one. It reads each rewrite's line changes
  and keeps added lines by reference (:mod:`combee_fast.gepa.revisions`); the merged text is
  composed here, so its reply stays short however long the instruction grows.

Seeds come from the run's seed tree by the call's identity: a solve by the example alone (every
candidate is graded with the same draw on the same example: common random numbers, as a
temperature-0 model; an episode's seed is the node of its example under the epoch label
:data:`SOLVE_EPOCH`, whatever the iteration), a proposal or aggregation by its iteration and place. No call raises for a
bad endpoint or reply: the failure is recorded on what it returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import orjson

from combee_fast.endpoint.calls import ChatResult
from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.revisions import changes_text, compose
from combee_fast.protocols.rollouts import Attempts
from combee_fast.protocols.tasks import Task
from combee_fast.roles.calls import RoleCalls
from combee_fast.roles.base import convert, decode_json_object, fill, load_prompt, no_answer
from combee_fast.roles.spec import Role
from combee_fast.roles.trajectory import fitted_prompt, render_trajectory
from combee_fast.schema import CallError, Example, GradedAnswer, Message, Usage


SOLVER_ROLE = "gepa_solver"
PROPOSER_ROLE = "gepa_proposer"
AGGREGATOR_ROLE = "gepa_aggregator"
"""The names GEPA's requests carry (:attr:`Role.request_name <combee_fast.roles.spec.Role.request_name>`)."""

SOLVER_MAX_TOKENS = 1024
REWRITE_MAX_TOKENS = 8192
AGGREGATE_MAX_TOKENS = 2048

SOLVER = Role("solver", "serve", SOLVER_MAX_TOKENS, request_name=SOLVER_ROLE,
              prompts=("gepa/prompts/solver_user.txt",))
PROPOSER = Role("proposer", "propose", REWRITE_MAX_TOKENS, request_name=PROPOSER_ROLE, diverse=True,
                prompts=("gepa/prompts/proposer.txt", "gepa/prompts/proposer_user.txt",
                         "gepa/prompts/proposer_agent.txt", "gepa/prompts/proposer_agent_user.txt"))
AGGREGATOR = Role("aggregator", "propose", AGGREGATE_MAX_TOKENS, request_name=AGGREGATOR_ROLE,
                  prompts=("gepa/prompts/aggregator.txt", "gepa/prompts/aggregator_user.txt"))
ROLES = (SOLVER, PROPOSER, AGGREGATOR)
"""GEPA's roles, as it declares them (:class:`~combee_fast.roles.spec.Role`)."""

SOLVER_USER_TEMPLATE = load_prompt("solver_user.txt", beside=__file__)
PROPOSER_SYSTEM_PROMPT = load_prompt("proposer.txt", beside=__file__)
PROPOSER_USER_TEMPLATE = load_prompt("proposer_user.txt", beside=__file__)
PROPOSER_AGENT_SYSTEM_PROMPT = load_prompt("proposer_agent.txt", beside=__file__)
PROPOSER_AGENT_USER_TEMPLATE = load_prompt("proposer_agent_user.txt", beside=__file__)
AGGREGATOR_SYSTEM_PROMPT = load_prompt("aggregator.txt", beside=__file__)
AGGREGATOR_USER_TEMPLATE = load_prompt("aggregator_user.txt", beside=__file__)

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

SOLVE_EPOCH = "solve"
"""The epoch label of every solve made as an agent episode: its seed and key name the example
alone, whichever candidate and iteration (common random numbers)."""


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


def solver_messages(example: Example, system_prompt: str) -> tuple[Message, ...]:
    """A solve's messages: ``system_prompt`` (the candidate's text) as the system message, the question."""
    return Message("system", system_prompt), Message("user", fill(SOLVER_USER_TEMPLATE, question=example.input))


def reflective_dataset(evaluations: Sequence[GradedAnswer], trajectory_chars: int) -> str:
    """Graded episodes as the proposer reads them: one JSON object per line, the task, its
    trajectory rendered within ``trajectory_chars``, the checks' score and the checker's feedback."""
    return "\n".join(
        orjson.dumps({
            "question": e.example.input,
            "trajectory": render_trajectory(e.trajectory, trajectory_chars) if e.trajectory is not None else "",
            "score": e.score, "feedback": e.feedback,
        }).decode()
        for e in evaluations
    )


def proposer_messages(current: str, evaluations: Sequence[GradedAnswer], context_length: int | None,
                      reply_tokens: int) -> tuple[Message, ...]:
    """The reflection call's messages: ``current`` and the graded examples (episodes: their
    reflective dataset, the trajectories sharing what an endpoint of ``context_length`` tokens
    leaves once the rest of the prompt and a reply of ``reply_tokens`` are counted)."""
    if not any(e.trajectory is not None for e in evaluations):
        user = fill(PROPOSER_USER_TEMPLATE, instruction=current, examples=examples_text(evaluations))
        return Message("system", PROPOSER_SYSTEM_PROMPT), Message("user", user)

    def build(chars: int) -> tuple[Message, ...]:
        user = fill(PROPOSER_AGENT_USER_TEMPLATE, instruction=current, examples=reflective_dataset(evaluations, chars))
        return Message("system", PROPOSER_AGENT_SYSTEM_PROMPT), Message("user", user)

    return fitted_prompt(build, context_length, reply_tokens, count=len(evaluations))


class GepaCalls:
    """The GEPA role calls of one run on ``calls`` (the run's generic role calls, which sample,
    seed and account every call): ``task`` grades answers; ``attempts``: solves are agent
    episodes (None: one solver call each)."""

    def __init__(self, task: Task, calls: RoleCalls, attempts: Attempts | None = None) -> None:
        self.task = task
        self.calls = calls
        self.attempts = attempts

    async def solve(self, example: Example, system_prompt: str, *,
                    seed_path: tuple[int | str, ...] = ()) -> GradedAnswer:
        """One metric call: ``example`` answered under ``system_prompt``, graded (an agent
        episode with ``system_prompt`` as its context, when solves are attempts). Seeded by the
        example alone, or by ``seed_path`` and the example (a request served online: its own draw)."""
        if self.attempts is not None:
            rollout = await self.attempts.attempt(example, system_prompt, version=0, epoch=SOLVE_EPOCH)
            return GradedAnswer(example, rollout.answer, rollout.score or 0.0, rollout.feedback, rollout.usage,
                                rollout.error, rollout.trajectory)
        messages = solver_messages(example, system_prompt)
        result = await self.calls.send(self.calls.request(SOLVER_ROLE, messages, *seed_path, example.id,
                                                          schema=SOLVER_SCHEMA, schema_name="answer"))
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

    async def solve_candidate(self, example: Example, candidate: Candidate) -> GradedAnswer:
        """One metric call of a search: ``candidate`` graded on ``example`` (here, its rendered
        text as the system prompt of :meth:`solve`; a subclass may grade the components
        themselves, as :mod:`combee_fast.optimize` grades them with the user's metric)."""
        return await self.solve(example, candidate.render())

    async def propose(
        self, current: str, evaluations: Sequence[GradedAnswer], *, seed_path: tuple[int | str, ...], component: str,
    ) -> Rewrite:
        """One reflection call: a rewrite of ``current`` from the graded ``evaluations`` (from
        episodes: their reflective dataset, within the proposer endpoint's context).
        ``component``: the name of the component ``current`` is (this prompt does not need it;
        a subclass's reflective records may be kept per component)."""
        context_length = self.calls.client(PROPOSER_ROLE).capabilities.context_length
        messages = proposer_messages(current, evaluations, context_length, self.calls.max_tokens_of(PROPOSER_ROLE))
        return await self._rewrite(PROPOSER_ROLE, messages, seed_path)

    async def aggregate(self, current: str, texts: Sequence[str], *, seed_path: tuple[int | str, ...]) -> Rewrite:
        """One aggregation call: the rewrites ``texts`` of ``current`` merged into one, composed
        from the lines it removes, keeps by reference and writes anew."""
        user = fill(AGGREGATOR_USER_TEMPLATE, instruction=current, proposals=changes_text(current, texts))
        messages = (Message("system", AGGREGATOR_SYSTEM_PROMPT), Message("user", user))
        result = await self.calls.send(self.calls.request(AGGREGATOR_ROLE, messages, *seed_path,
                                                          schema=AGGREGATE_SCHEMA, schema_name="aggregation"))
        reply = _parsed(result, _AggregateReply, AGGREGATOR_ROLE)
        self._noted(AGGREGATOR_ROLE, result, reply)
        if isinstance(reply, CallError):
            return Rewrite(None, result.usage, reply)
        return Rewrite(compose(current, texts, reply.remove, reply.keep, reply.add), result.usage)

    async def _rewrite(self, role: str, messages: tuple[Message, ...], seed_path: tuple[int | str, ...]) -> Rewrite:
        """One call replying with a whole new text (the proposer's reflection)."""
        result = await self.calls.send(self.calls.request(role, messages, *seed_path, schema=REWRITE_SCHEMA,
                                                          schema_name="rewrite"))
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
        self.calls.note(role, reply if isinstance(reply, CallError) else None, result.text)


def _parsed(result: ChatResult, shape: type[Any], what: str) -> Any:
    """The call's error, or its reply validated into ``shape`` (a :class:`CallError` if unusable)."""
    if result.error is not None:
        return result.error
    obj = decode_json_object(result.data, result.text)
    if isinstance(obj, CallError):
        return obj
    return convert(obj, shape, result.text, what=what)
