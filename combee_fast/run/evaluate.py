"""Held-out evaluation of a playbook: one generator call per example, in parallel, scored."""

from __future__ import annotations

import asyncio

import msgspec

from combee_fast.engine.stream import indexed_map
from combee_fast.roles.agents import Agents
from combee_fast.engine.timing import finish_times
from combee_fast.playbook import Playbook
from combee_fast.schema import Example, Rollout


class EvalResult(msgspec.Struct, frozen=True):
    """Accuracy of one playbook on one split, with every rollout and the critical-path time."""

    accuracy: float  # mean score in [0, 1]; a failed call scores 0
    examples: int
    errors: int
    sim_seconds: float
    rollouts: tuple[Rollout, ...]


async def evaluate(
    agents: Agents, playbook: Playbook, examples: tuple[Example, ...], *, concurrency: int
) -> EvalResult:
    """Score ``playbook`` on ``examples``. Requests use the seed path ("eval", example id)."""
    text = await asyncio.to_thread(playbook.render)

    async def one(_: int, example: Example) -> Rollout:
        return await agents.generate(example, text, epoch="eval")

    rollouts = await indexed_map(examples, one, concurrency=concurrency)
    scores = [r.score or 0.0 for r in rollouts]
    finished = finish_times([r.usage.effective_latency_s for r in rollouts], concurrency)
    return EvalResult(
        accuracy=sum(scores) / len(scores) if scores else 0.0,
        examples=len(rollouts),
        errors=sum(r.error is not None for r in rollouts),
        sim_seconds=max(finished, default=0.0),
        rollouts=tuple(rollouts),
    )
