"""Held-out evaluation of a prompt variable: one forward pass per example (one call, or an agent
episode), in parallel, scored. An episode's critical path counts its environment seconds too."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from combee_fast.engine.stream import indexed_map
from combee_fast.engine.timing import finish_times
from combee_fast.methods.base import EvalResult, Prediction
from combee_fast.schema import Example, GradedAnswer
from combee_fast.textgrad.calls import TextGradCalls
from combee_fast.textgrad.variable import PromptVariable


async def evaluate(calls: TextGradCalls, variable: PromptVariable, examples: Sequence[Example], *,
                   concurrency: int) -> EvalResult:
    """Score ``variable`` on ``examples`` (see :class:`~combee_fast.methods.base.EvalResult`);
    ``concurrency`` forward passes at once, seeded by ``("eval", example id)``; an episode's
    outcomes are each of its model calls'."""
    prompt = variable.render()

    async def one(_: int, example: Example) -> GradedAnswer:
        return await calls.forward(example, prompt, epoch="eval", version=variable.version)

    forwards = await indexed_map(examples, one, concurrency=concurrency)
    finished = finish_times([f.sim_seconds for f in forwards], concurrency)
    result = EvalResult.graded([(f.score, f.usage, f.error) for f in forwards], max(finished, default=0.0))
    result = msgspec.structs.replace(result, predictions=tuple(
        Prediction.of(f.example, f.answer, f.score, f.feedback, f.error) for f in forwards))
    if not any(f.trajectory is not None for f in forwards):
        return result
    return msgspec.structs.replace(result, outcomes=tuple(outcome for f in forwards for outcome in f.call_outcomes()))
