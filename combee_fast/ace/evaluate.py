"""Held-out evaluation of a playbook: one attempt per example (one generator call, or an agent
episode), in parallel, scored. An episode's critical path counts its environment seconds too."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence

from combee_fast.ace.calls import AceCalls
from combee_fast.engine.stream import indexed_map
from combee_fast.engine.timing import finish_times
from combee_fast.methods.base import EvalResult, Prediction
from combee_fast.ace.playbook import Playbook
from combee_fast.protocols.rollouts import Attempts
from combee_fast.schema import Example, Rollout


async def evaluate(calls: AceCalls, playbook: Playbook, examples: Sequence[Example], *, concurrency: int,
                   attempts: Attempts | None = None) -> EvalResult:
    """Score ``playbook`` on ``examples`` (see :class:`~combee_fast.methods.base.EvalResult`);
    ``attempts`` makes each attempt (default: ``calls``' one generator call). Requests use the
    seed path ("eval", example id)."""
    text = await asyncio.to_thread(playbook.render)
    attempts = attempts or calls

    async def one(_: int, example: Example) -> Rollout:
        return await attempts.attempt(example, text, version=playbook.version, epoch="eval")

    rollouts = await indexed_map(examples, one, concurrency=concurrency)
    answered = [r.score or 0.0 for r in rollouts if r.error is None]
    failed = Counter(r.error.label for r in rollouts if r.error is not None)
    finished = finish_times([_duration(r) for r in rollouts], concurrency)
    return EvalResult(
        accuracy=sum(answered) / len(answered) if answered else 0.0,
        examples=len(rollouts),
        answered=len(answered),
        unanswered=len(rollouts) - len(answered),
        unanswered_by_kind=dict(sorted(failed.items())),
        sim_seconds=max(finished, default=0.0),
        scores=tuple(float(r.score or 0.0) if r.error is None else 0.0 for r in rollouts),
        outcomes=tuple(o for r in rollouts for o in (r.trajectory.call_outcomes() if r.trajectory is not None
                                                     else [(r.usage, r.error)])),
        predictions=tuple(Prediction.of(r.example, r.answer, r.score, r.feedback, r.error) for r in rollouts),
    )


def _duration(rollout: Rollout) -> float:
    """An attempt's seconds: its call's, or its episode's model and environment seconds."""
    if rollout.trajectory is None:
        return rollout.usage.effective_latency_s
    return rollout.usage.effective_latency_s + rollout.trajectory.env_seconds
