"""TextGrad as what the generic methods learn: the :class:`~combee_fast.protocols.Learner` of a
prompt variable.

- map (``run_item``): forward, loss and gradient of one example against the step's frozen
  variable (:class:`GradientTrace`; the chain stops at its first failed call; on a task solved
  by acting the forward pass is an agent episode, whose trajectory the loss and the gradient read);
- record: the example's :class:`~combee_fast.textgrad.calls.Gradient`; propose: one optimizer
  step over a set of gradients; merge: one reduce call over steps proposed against the same
  variable;
- apply: the merged line edits, applied once (:meth:`PromptVariable.edited`).

So :mod:`combee_fast.methods` gives TextGrad's three loops: ``sequential`` is TextGrad's own (one
optimizer step per example), ``naive`` its batched mode (one step over the whole batch's
gradients), ``combee`` the batch's gradients through the augmented shuffle into groups, one step
per group, merged by the reduce tree.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any

import msgspec

from combee_fast.methods.base import Applied
from combee_fast.schema import CallError, Example, GradedAnswer, Proposal, Trajectory, Usage
from combee_fast.textgrad.calls import Gradient, Loss, TextGradCalls
from combee_fast.textgrad.variable import LineEdit, PromptVariable


class GradientTrace(msgspec.Struct, frozen=True):
    """Everything one example's chain produced (a :class:`~combee_fast.protocols.Trace`): its
    forward call, then the loss and the gradient when the calls before them succeeded."""

    forward: GradedAnswer
    loss: Loss | None = None
    gradient: Gradient | None = None

    @property
    def item_id(self) -> str:
        return self.forward.example.id

    @property
    def reward(self) -> float:
        return self.forward.score

    def _calls(self) -> list[GradedAnswer | Loss | Gradient]:
        return [call for call in (self.forward, self.loss, self.gradient) if call is not None]

    @property
    def sim_seconds(self) -> float:
        """The chain's duration: its calls one after another (the forward episode's environment
        seconds too)."""
        return sum(call.usage.effective_latency_s for call in self._calls()) + self.forward.env_seconds

    def call_outcomes(self) -> list[tuple[Usage, CallError | None]]:
        """Every model call's ``(usage, error)``, in order (a forward episode's: each of its turns)."""
        after = [(call.usage, call.error) for call in (self.loss, self.gradient) if call is not None]
        return [*self.forward.call_outcomes(), *after]

    def episodes(self) -> list[Trajectory]:
        """The forward pass's agent episode, if it was one."""
        return self.forward.episodes()

    def errors(self) -> list[tuple[str, CallError]]:
        return [(f"{self.item_id}:{kind}", call.error) for kind, call in
                zip(("forward", "loss", "gradient"), self._calls()) if call.error is not None]


async def run_chain(calls: TextGradCalls, example: Example, prompt: str, *, epoch: int,
                    version: int = 0) -> GradientTrace:
    """The forward pass, loss and gradient of ``example`` under ``prompt`` (the variable's
    ``version``), each after the one before succeeded."""
    forward = await calls.forward(example, prompt, epoch=epoch, version=version)
    if forward.error is not None:
        return GradientTrace(forward)
    loss = await calls.loss(forward, epoch=epoch)
    if loss.error is not None:
        return GradientTrace(forward, loss)
    return GradientTrace(forward, loss, await calls.gradient(prompt, forward, loss, epoch=epoch))


class TextGradLearner:
    """The prompt-variable learner on ``calls`` (module docstring). Its chains have no rounds to
    run on after their step."""

    def __init__(self, calls: TextGradCalls) -> None:
        self.calls = calls

    async def render(self, artifact: PromptVariable) -> str:
        return artifact.render()

    async def run_item(self, item: Example, artifact: PromptVariable, text: str, *, epoch: int,
                       rounds: int) -> GradientTrace:
        return await run_chain(self.calls, item, text, epoch=epoch, version=artifact.version)

    def continuation(self, trace: GradientTrace, artifact: PromptVariable, text: str, *,
                     epoch: int) -> Awaitable[GradientTrace] | None:
        return None

    def record(self, trace: GradientTrace) -> Gradient | None:
        gradient = trace.gradient
        return gradient if gradient is not None and gradient.error is None else None

    def insight(self, record: Gradient) -> str:
        return record.change

    async def propose(self, records: Sequence[Gradient], artifact: PromptVariable, text: str, *, source: str,
                      seed_path: tuple[int | str, ...]) -> Proposal[LineEdit]:
        """One optimizer step of ``artifact`` over ``records``."""
        update = await self.calls.step(artifact, records, seed_path=seed_path)
        return Proposal(source=source, edits=update.edits, usage=update.usage, error=update.error)

    async def merge(self, proposals: Sequence[Sequence[LineEdit]], text: str, *, source: str,
                    seed_path: tuple[int | str, ...]) -> Proposal[LineEdit]:
        """One reduce call over ``proposals`` (the parts are the ones their edits name)."""
        names = tuple(dict.fromkeys(edit.part for edits in proposals for edit in edits))
        update = await self.calls.reduce(text, names, proposals, seed_path=seed_path)
        return Proposal(source=source, edits=update.edits, usage=update.usage, error=update.error)

    def edit_text(self, edit: LineEdit) -> str:
        return edit.line

    def edit_target(self, edit: LineEdit) -> str | None:
        return edit.line if edit.remove else None

    async def apply(self, artifact: PromptVariable, traces: Sequence[Any], edits: Sequence[LineEdit],
                    source: str) -> Applied[PromptVariable]:
        variable, change, delta = artifact.edited(edits, source)
        return Applied(variable, change, change.added_ids, () if delta is None else (delta,))
