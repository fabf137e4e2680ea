"""Held-out evaluation of a playbook: one generator call per example, in parallel, scored."""

from __future__ import annotations

import asyncio
from collections import Counter

import msgspec

from combee_fast.engine.stream import indexed_map
from combee_fast.roles.agents import Agents
from combee_fast.engine.timing import finish_times
from combee_fast.playbook import Playbook
from combee_fast.schema import Example, Rollout


class EvalResult(msgspec.Struct, frozen=True):
    """Accuracy of one playbook on one split, with every rollout and the critical-path time.

    ``accuracy`` is the mean score over the *answered* examples (0.0 when none was): an example
    whose generator call failed (``rollout.error`` set: HTTP error, timeout, unparseable reply,
    replay miss...) is not a wrong answer but an unanswered one, counted in ``unanswered`` and
    by failure kind (:attr:`~combee_fast.schema.CallError.label`) in ``unanswered_by_kind``.
    ``answered + unanswered == examples``.
    """

    accuracy: float
    examples: int
    answered: int
    unanswered: int
    unanswered_by_kind: dict[str, int]
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
    scores = [r.score or 0.0 for r in rollouts if r.error is None]
    failed = Counter(r.error.label for r in rollouts if r.error is not None)
    finished = finish_times([r.usage.effective_latency_s for r in rollouts], concurrency)
    return EvalResult(
        accuracy=sum(scores) / len(scores) if scores else 0.0,
        examples=len(rollouts),
        answered=len(scores),
        unanswered=len(rollouts) - len(scores),
        unanswered_by_kind=dict(sorted(failed.items())),
        sim_seconds=max(finished, default=0.0),
        rollouts=tuple(rollouts),
    )
