"""TextGrad learning online (:mod:`combee_fast.embedded`): :class:`TextGradOnline`, the
:class:`~combee_fast.protocols.OnlineLearning` :meth:`TextGradKind.online_learner
<combee_fast.textgrad.kind.TextGradKind.online_learner>` gives.

- map: each submitted rollout is its forward pass (its answer, the host's score and feedback,
  never generated again); the loss and the gradient are computed on it, seeded by the rollout
  (its example and round), the chain stopping at its first failed call. A rollout without a
  score, or whose call failed, teaches nothing (:class:`Unlearned`: no call made).
- propose, merge, apply: TextGrad's own (:class:`~combee_fast.textgrad.learner.TextGradLearner`): one
  optimizer step per shuffled group of gradients, the reduce tree over the steps, the line edits
  applied once.
- its one-step attempt (:class:`ForwardAttempts`): one forward call, scored by the task.
- its artifact, a :class:`~combee_fast.textgrad.variable.PromptVariable`, travels as the kind's
  checkpoints keep it (:class:`~combee_fast.engine.kept.StructArtifact`: MessagePack).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any

import msgspec

from combee_fast.engine.kept import StructArtifact
from combee_fast.errors import ConfigError
from combee_fast.methods.base import Applied
from combee_fast.roles.calls import RoleCalls
from combee_fast.schema import CallError, Example, GradedAnswer, Proposal, Rollout, Usage
from combee_fast.textgrad.calls import Gradient, TextGradCalls, forward_messages
from combee_fast.textgrad.learner import GradientTrace, TextGradLearner
from combee_fast.textgrad.variable import LineEdit, PromptVariable


def seed_epoch(epoch: int | str, round_: int) -> int | str:
    """The epoch a call of round ``round_`` is seeded by (TextGrad's calls are seeded by epoch
    and example): round 0 is the epoch itself, as offline; a later round its own node."""
    return epoch if round_ == 0 else f"{epoch}:r{round_}"


class Unlearned(msgspec.Struct, frozen=True):
    """The trace of a submitted rollout that teaches nothing (no score, or its call failed)."""

    item_id: str
    reward: float | None = None
    sim_seconds: float = 0.0

    def call_outcomes(self) -> list[tuple[Usage, CallError | None]]:
        return []

    def errors(self) -> list[tuple[str, CallError]]:
        return []


class ForwardAttempts:
    """TextGrad's one-step attempt (:class:`~combee_fast.protocols.Attempts`): one forward call
    under the context, scored by the task; a retry's ``previous`` and ``feedback`` are not read
    (TextGrad learns by steps, not by retries)."""

    def __init__(self, calls: TextGradCalls) -> None:
        self.calls = calls

    async def attempt(self, example: Example, context: str, *, version: int, epoch: int | str, round_: int = 0,
                      previous: Rollout | None = None, feedback: str | None = None) -> Rollout:
        forward = await self.calls.forward(example, context, epoch=seed_epoch(epoch, round_))
        return Rollout(example=example, round=round_, messages=forward_messages(example.input, context),
                       answer=forward.answer, reasoning="", cited=(), score=forward.score,
                       feedback=forward.feedback, usage=forward.usage, error=forward.error)


class TextGradOnline(StructArtifact):
    """The prompt-variable learner of submitted rollouts on the role calls ``calls``, whose task
    scores its attempts (module docstring): its map here, the rest TextGrad's own learner's."""

    artifact_type = PromptVariable

    def __init__(self, calls: RoleCalls) -> None:
        if calls.task is None:
            raise ConfigError("learner textgrad learns online through calls that grade its attempts: "
                              "its role calls need a task")
        self.calls = TextGradCalls(calls.task, calls)
        self.steps = TextGradLearner(self.calls)
        self.attempts = ForwardAttempts(self.calls)

    async def render(self, artifact: PromptVariable) -> str:
        return artifact.render()

    async def run_item(self, item: Rollout, artifact: PromptVariable, text: str, *, epoch: int,
                       rounds: int) -> GradientTrace | Unlearned:
        if item.score is None or item.error is not None:
            return Unlearned(item.id, item.score)
        forward = GradedAnswer(item.example, item.answer, item.score, item.feedback, item.usage)
        node = seed_epoch(epoch, item.round)
        loss = await self.calls.loss(forward, epoch=node)
        if loss.error is not None:
            return GradientTrace(forward, loss)
        return GradientTrace(forward, loss, await self.calls.gradient(text, forward, loss, epoch=node))

    def continuation(self, trace: GradientTrace | Unlearned, artifact: PromptVariable, text: str, *,
                     epoch: int) -> Awaitable[GradientTrace] | None:
        return None

    def record(self, trace: GradientTrace | Unlearned) -> Gradient | None:
        return None if isinstance(trace, Unlearned) else self.steps.record(trace)

    def insight(self, record: Gradient) -> str:
        return self.steps.insight(record)

    async def propose(self, records: Sequence[Gradient], artifact: PromptVariable, text: str, *, source: str,
                      seed_path: tuple[int | str, ...]) -> Proposal[LineEdit]:
        return await self.steps.propose(records, artifact, text, source=source, seed_path=seed_path)

    async def merge(self, proposals: Sequence[Sequence[LineEdit]], text: str, *, source: str,
                    seed_path: tuple[int | str, ...]) -> Proposal[LineEdit]:
        return await self.steps.merge(proposals, text, source=source, seed_path=seed_path)

    def edit_text(self, edit: LineEdit) -> str:
        return self.steps.edit_text(edit)

    def edit_target(self, edit: LineEdit) -> str | None:
        return self.steps.edit_target(edit)

    async def apply(self, artifact: PromptVariable, traces: Sequence[Any], edits: Sequence[LineEdit],
                    source: str) -> Applied[PromptVariable]:
        return await self.steps.apply(artifact, traces, edits, source)
