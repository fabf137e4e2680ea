"""The extension points, declared once. Each is a small Protocol; one strategy per module.

- :class:`Task`: where examples come from and how an answer is scored (``combee_fast.tasks``).
- :class:`RolloutSource`: a task whose rollouts already exist (collected traces): the map only
  reflects. A task says so by returning itself from :meth:`Task.rollout_source`.
- :class:`Learner`: what is learned. Combee's mechanisms (``combee_fast.combee``) are generic;
  the learner says which role calls produce a proposal, how proposals merge, and how merged
  edits are applied to the artifact. ACE's playbook learner is :mod:`combee_fast.ace.learner`;
  GEPA's rewrite learner (:mod:`combee_fast.gepa.learner`) implements the parts that the shuffle
  and the reduce tree call (propose, merge, record, insight, edit_text, edit_target).
- :class:`Method`: one learning step over a batch (sequential, naive, combee), looked up by name
  in :data:`combee_fast.methods.METHODS`.
- :class:`BatchPlan`: chooses each step's batch size (fixed, or the controller).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from combee_fast.methods.base import Applied, StepResult, StepShape
    from combee_fast.schema import Example, Op, Proposal, Rollout
    from combee_fast.tasks.base import Score, Split


@runtime_checkable
class Task(Protocol):
    """A source of examples and a grader of answers.

    ``load(split)`` accepts a split name (one of :meth:`split_names`) optionally followed by a
    slice of its rows, e.g. ``"val[0:200]"``; sliced examples keep their row index within the
    named split, so example ids stay stable. ``score`` never raises for a bad answer: an
    unusable answer (``None`` included) scores 0 with feedback saying why. It raises
    ``ValueError`` only for an example without a target (e.g. a trace without ground truth).
    """

    name: str

    def split_names(self) -> tuple[str, ...]: ...

    def load(self, split: str) -> Split: ...

    def score(self, example: Example, answer: str | None) -> Score: ...

    def rollout_source(self) -> RolloutSource | None:
        """This task's collected rollouts, when it learns from them instead of generating."""
        ...


class RolloutSource(Protocol):
    """Rollouts that already exist, by split (the map reflects on them, no generation)."""

    def load_rollouts(self, split: str) -> tuple[Rollout, ...]: ...


class Learner(Protocol):
    """The learner-specific half of a step; the Combee mechanisms call it and nothing else.

    A *trace* is what the map made of one item (rollouts and reflections); a *record* is what a
    curator reads of one trace; *edits* are what a proposal holds (ACE: playbook ops). Calls
    never raise for a bad endpoint or reply: failures are recorded on what they return.
    """

    async def render(self, artifact: Any) -> str:
        """The artifact's prompt text, as every call of a step sees it (off the event loop)."""
        ...

    async def run_item(self, item: Any, artifact: Any, text: str, *, epoch: int, rounds: int) -> Any:
        """The map for one item against the frozen snapshot: its trace, ``rounds`` retries at most."""
        ...

    def continuation(self, trace: Any, artifact: Any, text: str, *, epoch: int) -> Awaitable[Any] | None:
        """The rest of a chain still retrying after its step's rounds (None: nothing left to do)."""
        ...

    def record(self, trace: Any) -> Any | None:
        """What a curator reads of ``trace`` (ACE: its last usable reflection), or None."""
        ...

    def insight(self, record: Any) -> str:
        """The one-line lesson of ``record``: what retention checks for in the artifact."""
        ...

    async def propose(
        self, records: Sequence[Any], artifact: Any, text: str, *, source: str, seed_path: tuple[int | str, ...]
    ) -> Proposal:
        """One proposer (curator) call over ``records`` against ``artifact``."""
        ...

    async def merge(
        self, proposals: Sequence[Sequence[Op]], text: str, *, source: str, seed_path: tuple[int | str, ...]
    ) -> Proposal:
        """One merge (reducer) call over proposals made against the same base artifact."""
        ...

    def edit_text(self, edit: Op) -> str:
        """The text of one edit (for the topic split of the reduce)."""
        ...

    def edit_target(self, edit: Op) -> str | None:
        """What one edit changes, when it names an existing part (edits of one part merge together)."""
        ...

    async def apply(self, artifact: Any, traces: Sequence[Any], edits: Sequence[Op], source: str) -> Applied:
        """Everything the traces and edits say, as one change applied once (off the event loop)."""
        ...


class Method(Protocol):
    """One learning step over a batch, from one artifact version to the next."""

    name: str

    async def step(
        self, items: Sequence[Any], playbook: Any, *, epoch: int, step: int, shape: StepShape | None = None
    ) -> StepResult:
        """Learn from ``items`` (examples, or rollouts for reflect-only tasks) starting at ``playbook``;
        ``shape`` (from the batch plan) overrides the method's group shape for this step."""
        ...

    def pending(self) -> int:
        """Chains carried into the next step; a step with no items curates them."""
        ...


class BatchPlan(Protocol):
    """Chooses each step's batch size (and shape) and learns from what the step cost."""

    def next_size(self, remaining: int) -> tuple[int, str]:
        """The next batch size and the reason for it; ``remaining`` items wait in the epoch."""
        ...

    def step_shape(self) -> StepShape | None:
        """The shape of the step just sized (None: the method's configured shape)."""
        ...

    async def observe(self, batch_size: int, result: StepResult, samples_in_epoch: int) -> None:
        """Learn from the step just run at ``batch_size``."""
        ...
