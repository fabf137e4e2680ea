"""Attempts made by agent episodes: :class:`EpisodeAttempts` (the multi-step case of
:class:`~combee_fast.protocols.Attempts`, for any learner; the one-step case is the learner's own
one model call, e.g. :meth:`~combee_fast.ace.calls.AceCalls.attempt`).

Each attempt is one :class:`~combee_fast.rollouts.episode.Episode` submitted to the executor:
seeded at the seed tree's node ``(role, epoch, example, round)``, ``role`` the learner's serving
role (the node a single-call attempt's request has), identified by
``epoch:example:r<round>:v<version>:<context hash>``. Its
trajectory comes back as a :class:`~combee_fast.schema.Rollout`: the trajectory rendered as its
reasoning (and as the assistant message), the answer, the reward as its score, the checker's
feedback, the summed usage of its model calls, the call error that left it unanswered (if any)
and the trajectory itself.
"""

from __future__ import annotations

import hashlib

from combee_fast.engine.rng import derive_seed
from combee_fast.protocols.rollouts import RolloutExecutor
from combee_fast.roles.trajectory import render_trajectory
from combee_fast.rollouts.episode import Episode
from combee_fast.schema import Example, Message, Rollout, Trajectory, Usage


def context_sha(text: str) -> str:
    """A short hash of a context text (which text produced a trajectory)."""
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def summed_usage(trajectory: Trajectory, role: str) -> Usage:
    """The usage of every model call of ``trajectory`` added up, as one usage of ``role`` (the
    role the agent's turns were made as)."""
    calls = [usage for usage, _ in trajectory.call_outcomes()]
    if not calls:
        return Usage(role=role)
    sim = [u.sim_latency_s for u in calls if u.sim_latency_s is not None]
    return Usage(
        role=role, model=calls[0].model, endpoint=calls[0].endpoint,
        prompt_tokens=sum(u.prompt_tokens for u in calls), completion_tokens=sum(u.completion_tokens for u in calls),
        latency_s=sum(u.latency_s for u in calls), sim_latency_s=sum(sim) if len(sim) == len(calls) else None,
        retries=sum(u.retries for u in calls), cached=all(u.cached for u in calls),
        retry_kinds=tuple(kind for u in calls for kind in u.retry_kinds),
    )


def rollout_of(example: Example, round_: int, trajectory: Trajectory, role: str) -> Rollout:
    """The rollout of ``trajectory`` (module docstring), its usage that of ``role``."""
    rendered = render_trajectory(trajectory)
    return Rollout(
        example=example, round=round_, messages=(Message("user", example.input), Message("assistant", rendered)),
        answer=trajectory.answer, reasoning=rendered, cited=trajectory.cited, score=trajectory.reward,
        feedback=trajectory.feedback, usage=summed_usage(trajectory, role), error=trajectory.call_error,
        trajectory=trajectory,
    )


class EpisodeAttempts:
    """:class:`~combee_fast.protocols.Attempts` run as episodes by ``executor``; ``seed`` is the
    run's seed (the root of the seed tree), ``role`` the learner's serving role (the agent's turns
    are made as it), ``citable``: the learner's context has parts the agent may cite."""

    def __init__(self, executor: RolloutExecutor, *, seed: int, role: str, citable: bool) -> None:
        self.executor = executor
        self.seed = seed
        self.role = role
        self.citable = citable

    def episode(self, example: Example, context: str, *, version: int, epoch: int | str, round_: int = 0,
                previous: Rollout | None = None, feedback: str | None = None) -> Episode:
        sha = context_sha(context)
        return Episode(
            key=f"{epoch}:{example.id}:r{round_}:v{version}:{sha}", example=example, context=context, version=version,
            context_sha=sha, seed=derive_seed(self.seed, self.role, epoch, example.id, round_), round=round_,
            previous_answer=previous.answer if previous is not None else None, feedback=feedback,
            citable=self.citable,
        )

    async def attempt(self, example: Example, context: str, *, version: int, epoch: int | str, round_: int = 0,
                      previous: Rollout | None = None, feedback: str | None = None) -> Rollout:
        episode = self.episode(example, context, version=version, epoch=epoch, round_=round_, previous=previous,
                               feedback=feedback)
        return rollout_of(example, round_, await self.executor.run(episode), self.role)
