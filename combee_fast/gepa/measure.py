"""What one GEPA iteration measured, for the live planner (:mod:`.planner`): its shape, each
stage's simulated seconds, how much of what its reflections proposed the child kept, and how it
ended. Built from the iteration's own records only, so a replayed run measures the same.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from combee_fast.gepa.revisions import changes


class ProposalMeasure(msgspec.Struct, frozen=True):
    """One iteration (``iteration``) on a minibatch of ``minibatch`` examples.

    ``groups``: reflection calls; ``group_records``: most graded examples one of them read;
    ``proposed``: distinct lines the reflections added to the parent's text; ``kept``: how many of
    those the child holds after the merge; ``spans``: each stage's task from its start to its end
    in simulated seconds (grade, reflect, aggregate, screen, validate; the stages it reached;
    measured from the proposal's own start in the synchronous loop); ``waited``: simulated
    seconds it spent queued for stage slots; ``latency``: from its start to its end; ``staleness``:
    candidates that joined the pool between its parent's draw and its screening; ``gain``: the
    child's minibatch total minus the parent's (None: no child was graded); ``outcome``: as in
    :class:`~combee_fast.gepa.pool.PoolChange`; ``loads``: per grading stage, the metric calls in
    flight when its task started (its own included); ``added``: the lines an accepted child added
    to the candidate it was made from; ``drawn``: the pool index of the parent drawn for it;
    ``parent``: of the candidate its child was made from (``drawn``, or the one a stale child
    was ``rebased`` onto).
    """

    iteration: int
    minibatch: int
    outcome: str
    groups: int = 0
    group_records: int = 0
    proposed: int = 0
    kept: int = 0
    spans: dict[str, tuple[float, float]] = msgspec.field(default_factory=dict)
    waited: float = 0.0
    latency: float = 0.0
    staleness: int = 0
    gain: float | None = None
    loads: dict[str, int] = msgspec.field(default_factory=dict)
    added: tuple[str, ...] = ()
    drawn: int = -1
    parent: int = -1
    rebased: bool = False

    @property
    def seconds(self) -> dict[str, float]:
        """Each stage's simulated seconds."""
        return {stage: end - start for stage, (start, end) in self.spans.items()}

    @property
    def retention(self) -> float | None:
        """The fraction of the proposed lines the child kept (None: nothing was proposed)."""
        return self.kept / self.proposed if self.proposed else None


def line_retention(base: str, proposed: Sequence[str], child: str | None) -> tuple[int, int]:
    """``(proposed, kept)``: distinct lines the ``proposed`` texts add to ``base``, and how many of
    them ``child`` holds."""
    added = {line for number, text in enumerate(proposed, start=1) for _, line in changes(base, text, number).added}
    held = set(child.split("\n")) if child is not None else set()
    return len(added), len(added & held)


def added_lines(base: str, child: str) -> tuple[str, ...]:
    """The lines ``child`` adds to ``base``, in order."""
    return tuple(line for _, line in changes(base, child, 1).added)
