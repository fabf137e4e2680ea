"""Held-out evaluation of a prompt variable: one forward call per example, in parallel, scored."""

from __future__ import annotations

from collections.abc import Sequence

from combee_fast.engine.stream import indexed_map
from combee_fast.engine.timing import finish_times
from combee_fast.methods.base import EvalResult
from combee_fast.schema import Example, GradedAnswer
from combee_fast.textgrad.calls import TextGradCalls
from combee_fast.textgrad.variable import PromptVariable


async def evaluate(calls: TextGradCalls, variable: PromptVariable, examples: Sequence[Example], *,
                   concurrency: int) -> EvalResult:
    """Score ``variable`` on ``examples`` (see :class:`~combee_fast.methods.base.EvalResult`);
    ``concurrency`` forward calls at once, seeded by ``("eval", example id)``."""
    prompt = variable.render()

    async def one(_: int, example: Example) -> GradedAnswer:
        return await calls.forward(example, prompt, epoch="eval")

    forwards = await indexed_map(examples, one, concurrency=concurrency)
    finished = finish_times([f.usage.effective_latency_s for f in forwards], concurrency)
    return EvalResult.graded([(f.score, f.usage, f.error) for f in forwards], max(finished, default=0.0))
