"""ACE's four roles as async calls: prompt -> endpoint -> parsed record, on the run's
:class:`~combee_fast.roles.calls.RoleCalls` (which sample, seed and account every call).

Every call carries its role, and its seed is derived from the run's seed tree by the call's
identity (role, epoch, example, round), never by call order, so a replayed run sends the same
requests whatever order they complete in. No call raises for a bad endpoint or a bad response:
the failure is recorded on the returned record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from combee_fast.ace import curator, generator, reducer, reflector
from combee_fast.ace.curator import playbook_stats_text
from combee_fast.ace.ops import ops_schema
from combee_fast.ace.reflector import cited_bullets_text, diagnoses, failed_reflection
from combee_fast.ace.repeats import RepeatCut, lessons_in
from combee_fast.ace.roles import CURATOR, GENERATOR, REDUCER, REFLECTOR, ROLES
from combee_fast.config import SamplingConfig
from combee_fast.endpoint.calls import ChatRequest
from combee_fast.ace.playbook import Playbook
from combee_fast.roles.base import no_answer
from combee_fast.protocols.tasks import Task
from combee_fast.roles.calls import RoleCalls
from combee_fast.roles.clients import Client, RoleClients
from combee_fast.roles.trajectory import render_trajectory, trajectory_budget
from combee_fast.schema import CallError, Example, Proposal, Rollout
from combee_fast.ace.records import Op, Reflection


class AceCalls:
    """ACE's role calls over ``calls`` (the run's generic role calls: its task scores answers)."""

    def __init__(self, calls: RoleCalls) -> None:
        self.calls = calls

    @classmethod
    def on_client(cls, task: Task | None, client: Client, *, seed: int,
                  sampling: dict[str, SamplingConfig] | None = None) -> AceCalls:
        """ACE's calls with every role served by ``client`` (one endpoint, no session)."""
        return cls(RoleCalls(task, RoleClients.single(client, ROLES), ROLES, seed=seed, sampling=sampling))

    async def generate(
        self,
        example: Example,
        playbook_text: str,
        *,
        epoch: int | str,
        round_: int = 0,
        previous: Rollout | None = None,
        feedback: str | None = None,
    ) -> Rollout:
        """One generator attempt, scored by the task. A failed call gives a rollout with ``error``.

        The playbook is cut to fit the endpoint's context and trimmed on a context error
        (:meth:`~combee_fast.roles.calls.RoleCalls.chat_fitted`); ``feedback``: on a retry
        round, the reflection on ``previous``."""
        calls, task = self.calls, self.calls.task
        assert task is not None, "the generator's answers are scored by the run's task"

        def build(text: str) -> ChatRequest:
            messages = generator.generator_messages(
                example.input, text, retry=(previous.answer, feedback) if previous is not None else None)
            return calls.request(GENERATOR.key, messages, epoch, example.id, round_,
                                 schema=generator.generator_schema(text), schema_name="generator_output")

        request, result = await calls.chat_fitted(GENERATOR.key, playbook_text, build)
        messages = request.messages
        parsed: Any = result.error if result.error is not None else generator.parse_generator(result.data, result.text)
        if not isinstance(parsed, CallError):
            parsed = no_answer(parsed.final_answer, role=GENERATOR.key, question=example.input) or parsed
        calls.note(GENERATOR.key, parsed if isinstance(parsed, CallError) else None, result.text)
        if isinstance(parsed, CallError):
            score = task.score(example, None)
            return Rollout(
                example=example, round=round_, messages=messages, answer=None, reasoning="",
                cited=(), score=score.value, feedback=score.feedback, usage=result.usage,
                error=parsed, raw=result.text,
            )
        score = task.score(example, parsed.final_answer)
        return Rollout(
            example=example, round=round_, messages=messages, answer=parsed.final_answer,
            reasoning=parsed.reasoning, cited=parsed.bullet_ids, score=score.value,
            feedback=score.feedback, usage=result.usage, raw=result.text,
        )

    async def attempt(self, example: Example, context: str, *, version: int, epoch: int | str, round_: int = 0,
                      previous: Rollout | None = None, feedback: str | None = None) -> Rollout:
        """The one-step case of :class:`~combee_fast.protocols.Attempts`: one generator call
        (:meth:`generate`); ``version`` is not needed by it."""
        return await self.generate(example, context, epoch=epoch, round_=round_, previous=previous,
                                   feedback=feedback)

    async def reflect(self, rollout: Rollout, playbook: Playbook, *, epoch: int) -> Reflection:
        """Diagnose one rollout. A failed call gives a reflection with ``error`` and no tags."""
        calls = self.calls
        cited = [bullet for bid in rollout.cited if (bullet := playbook.get(bid)) is not None]
        ground_truth = rollout.example.target if calls.use_ground_truth else None
        if rollout.trajectory is not None:
            rollout = self._fitted_trajectory(rollout, cited_bullets_text(cited), ground_truth)
        messages = reflector.reflector_messages(rollout, cited_bullets_text(cited), ground_truth=ground_truth)
        schema = reflector.reflector_schema([bullet.id for bullet in cited])
        request = calls.request(REFLECTOR.key, messages, epoch, rollout.id, schema=schema, schema_name="reflection")
        result = await calls.send(request)
        if result.error is not None:
            calls.note(REFLECTOR.key, result.error, result.text)
            return failed_reflection(rollout.id, result.usage, result.error)
        parsed = reflector.parse_reflector(result.data, result.text, rollout_id=rollout.id, usage=result.usage)
        calls.note(REFLECTOR.key, parsed.error, result.text)
        return parsed

    def _fitted_trajectory(self, rollout: Rollout, cited: str, ground_truth: str | None) -> Rollout:
        """``rollout`` whose reasoning is its trajectory rendered to fit the reflector's context
        (:mod:`combee_fast.roles.trajectory`)."""
        assert rollout.trajectory is not None
        empty = msgspec.structs.replace(rollout, reasoning="")
        others = reflector.reflector_messages(empty, cited, ground_truth=ground_truth)
        budget = trajectory_budget(others, self.calls.client(REFLECTOR.key).capabilities.context_length,
                                   self.calls.max_tokens_of(REFLECTOR.key))
        return msgspec.structs.replace(rollout, reasoning=render_trajectory(rollout.trajectory, budget))

    async def curate(
        self,
        reflections: Sequence[Reflection],
        playbook: Playbook,
        playbook_text: str,
        *,
        source: str,
        seed_path: tuple[int | str, ...],
    ) -> Proposal[Op]:
        """One curator call over ``reflections`` against ``playbook`` (its text cut to fit the
        endpoint's context and trimmed on a context error), its reply stopped at its first repeat
        (:mod:`combee_fast.ace.repeats`). On an empty playbook, with a reflection
        that diagnoses something, the reply's schema asks for at least one ADD: small models
        answered an empty playbook with no operation whatever the prompt said (Qwen2.5-Coder-0.5B:
        "The playbook is empty, so no lessons are new."; the 1.5B: "The playbook already holds
        every lesson the reflections teach")."""
        stats = playbook_stats_text(playbook.bullets())
        must_add = any(map(diagnoses, reflections))  # a failed reflection's fields are all blank

        def build(text: str) -> ChatRequest:
            return self.calls.request(CURATOR.key, curator.curator_messages(text, stats, reflections), *seed_path,
                                      schema=ops_schema(curator.CURATOR_SCHEMA, text, must_add=must_add),
                                      schema_name="operations", cut=RepeatCut(lessons_in(text).values()))

        return await self._propose(CURATOR.key, playbook_text, build, source, curator.parse_curator)

    async def reduce(
        self,
        proposals: Sequence[Sequence[Op]],
        playbook_text: str,
        *,
        source: str,
        seed_path: tuple[int | str, ...],
    ) -> Proposal[Op]:
        """One reducer call merging ``proposals`` made against the same base playbook (its text cut
        to fit the endpoint's context and trimmed on a context error), its reply stopped at its
        first repeat (:mod:`combee_fast.ace.repeats`)."""
        references = reducer.proposal_references(proposals)

        def build(text: str) -> ChatRequest:
            return self.calls.request(REDUCER.key, reducer.reducer_messages(text, proposals), *seed_path,
                                      schema=reducer.reducer_schema(text, proposals), schema_name="reduction",
                                      cut=RepeatCut(lessons_in(text).values(), references))

        def parse(data: Any, text: str | None) -> tuple[Op, ...] | CallError:
            return reducer.parse_reduction(data, text, proposals)

        return await self._propose(REDUCER.key, playbook_text, build, source, parse)

    async def _propose(
        self,
        role: str,
        playbook_text: str,
        build: Callable[[str], ChatRequest],
        source: str,
        parse: Callable[[Any, str | None], tuple[Op, ...] | CallError],
    ) -> Proposal[Op]:
        """The proposal of one curator or reducer call ``build(playbook_text)``."""
        _, result = await self.calls.chat_fitted(role, playbook_text, build)
        parsed = result.error if result.error is not None else parse(result.data, result.text)
        self.calls.note(role, parsed if isinstance(parsed, CallError) else None, result.text)
        if isinstance(parsed, CallError):
            return Proposal(source=source, edits=(), usage=result.usage, error=parsed)
        return Proposal(source=source, edits=parsed, usage=result.usage)
