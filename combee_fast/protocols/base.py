"""A small base for a learner of one's own: :class:`LearnerBase` has a default for every member of
:class:`~combee_fast.protocols.learning.Learner` but the three only a learner can say
(``run_item``, ``record``, ``apply``), so a small learner writes those and what it does
differently.

:data:`NO_CALL` is the usage of a part made without a model call (a proposal merged in code, a
trace part that asked nothing): the run's accounting (the ledger, ``summary.json``'s calls, the
dollars of ``--price``) counts a role-less usage that carries no error as no call, whatever the
learner (:func:`combee_fast.record.ledger.is_call`). :func:`no_call` is such a proposal.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from combee_fast.schema import Proposal, Usage

if TYPE_CHECKING:
    from combee_fast.methods.base import Applied
    from combee_fast.protocols.learning import Trace

A = TypeVar("A")  # an artifact
R = TypeVar("R")  # a record: what a proposer reads of one trace
E = TypeVar("E")  # an edit

NO_CALL = Usage()
"""The usage of a part made without a model call: never counted as a call, nor priced."""


def no_call(source: str, edits: Iterable[E]) -> Proposal[E]:
    """A proposal named ``source`` holding ``edits``, made without a model call (:data:`NO_CALL`)."""
    return Proposal(source, tuple(edits), NO_CALL)


class LearnerBase(ABC, Generic[A, R, E]):
    """A :class:`~combee_fast.protocols.learning.Learner` with defaults (module docstring).

    A subclass writes :meth:`run_item` (the map for one item), :meth:`record` (what a proposer
    reads of a trace) and :meth:`apply` (edits applied to the artifact); the defaults suit a
    learner whose artifact renders itself, whose records are its edits, and which proposes and
    merges in code:

    - :meth:`render`: ``artifact.render()``;
    - :meth:`continuation`: None (a chain ends within its step);
    - :meth:`insight`, :meth:`edit_text`: ``str`` of the record, of the edit;
    - :meth:`edit_target`: None (no edit names a part it changes);
    - :meth:`propose`: each distinct record, in order, as an edit; :meth:`merge`: each distinct
      edit of the proposals, in order; both :func:`no_call` proposals (no model call made).

    A learner that proposes or merges with a model overrides :meth:`propose` or :meth:`merge`
    and returns the call's usage on its :class:`~combee_fast.schema.Proposal`.
    """

    @abstractmethod
    async def run_item(self, item: Any, artifact: A, text: str, *, epoch: int, rounds: int) -> Trace:
        """The map for one item against the frozen snapshot: its trace, ``rounds`` retries at most."""

    @abstractmethod
    def record(self, trace: Any) -> R | None:
        """What a proposer reads of ``trace``, or None (nothing to learn from it)."""

    @abstractmethod
    async def apply(self, artifact: A, traces: Sequence[Any], edits: Sequence[E], source: str) -> Applied[A]:
        """Everything the traces and edits say, as one change applied once."""

    async def render(self, artifact: A) -> str:
        text: str = cast(Any, artifact).render()
        return text

    def continuation(self, trace: Any, artifact: A, text: str, *, epoch: int) -> Awaitable[Trace] | None:
        return None

    def insight(self, record: R) -> str:
        return str(record)

    async def propose(self, records: Sequence[R], artifact: Any, text: str, *, source: str,
                      seed_path: tuple[int | str, ...]) -> Proposal[E]:
        return no_call(source, cast("Iterable[E]", dict.fromkeys(records)))

    async def merge(self, proposals: Sequence[Sequence[E]], text: str, *, source: str,
                    seed_path: tuple[int | str, ...]) -> Proposal[E]:
        return no_call(source, dict.fromkeys(edit for proposal in proposals for edit in proposal))

    def edit_text(self, edit: E) -> str:
        return str(edit)

    def edit_target(self, edit: E) -> str | None:
        return None
