"""The task seam: where items come from and how answers are graded.

- :class:`Task`: examples by split and a grader (its value types: :class:`~combee_fast.schema.Example`,
  :class:`~combee_fast.tasks.base.Split`, :class:`~combee_fast.tasks.base.Score`).
- :class:`RolloutSource`: a task whose rollouts already exist (collected traces), returned by
  :meth:`Task.rollout_source`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from combee_fast.schema import Example, Rollout
    from combee_fast.tasks.base import Score, Split


@runtime_checkable
class Task(Protocol):
    """A source of examples and a grader of answers.

    ``load(split)`` accepts a split name (one of :meth:`split_names`) optionally followed by a
    slice of its rows, e.g. ``"val[0:200]"``; sliced examples keep their row index within the
    named split, so example ids stay stable. ``score`` never raises for a bad answer: an
    unusable answer (``None`` included) scores 0 with feedback saying why. It raises
    ``ValueError`` only for an example without a target (e.g. a trace without ground truth).

    A task may also name the world the simulated endpoint plays for it, ``sim_world``: a
    ``package.module:factory`` path (:data:`combee_fast.sim.worlds.WorldFactory`); without one
    it plays the calibrated world of the task's examples.
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
