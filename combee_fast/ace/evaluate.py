"""Held-out evaluation of a playbook: one generator call per example, in parallel, scored."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence

from combee_fast.engine.stream import indexed_map
from combee_fast.engine.timing import finish_times
from combee_fast.methods.base import EvalResult
from combee_fast.playbook import Playbook
from combee_fast.roles.agents import Agents
from combee_fast.schema import Example, Rollout


async def evaluate(agents: Agents, playbook: Playbook, examples: Sequence[Example], *, concurrency: int) -> EvalResult:
    """Score ``playbook`` on ``examples`` (see :class:`~combee_fast.methods.base.EvalResult`).
    Requests use the seed path ("eval", example id)."""
    text = await asyncio.to_thread(playbook.render)

    async def one(_: int, example: Example) -> Rollout:
        return await agents.generate(example, text, epoch="eval")

    rollouts = await indexed_map(examples, one, concurrency=concurrency)
    answered = [r.score or 0.0 for r in rollouts if r.error is None]
    failed = Counter(r.error.label for r in rollouts if r.error is not None)
    finished = finish_times([r.usage.effective_latency_s for r in rollouts], concurrency)
    return EvalResult(
        accuracy=sum(answered) / len(answered) if answered else 0.0,
        examples=len(rollouts),
        answered=len(answered),
        unanswered=len(rollouts) - len(answered),
        unanswered_by_kind=dict(sorted(failed.items())),
        sim_seconds=max(finished, default=0.0),
        scores=tuple(float(r.score or 0.0) if r.error is None else 0.0 for r in rollouts),
        outcomes=tuple((r.usage, r.error) for r in rollouts),
    )
