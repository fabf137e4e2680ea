"""What a learning step and an evaluation return, shared by every method and learner.

Typed on the artifact (``A``), never on a particular learner's: the run loop, the ledger and the
batch plans read these and nothing learner-specific.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import msgspec

from combee_fast.schema import CallError, Example, Proposal, Usage
from combee_fast.tasks.heldout import row_key

A = TypeVar("A")

PREDICTION_CHARS = 4000
"""Characters of an example's input, answer, target and feedback a :class:`Prediction` keeps
(each its start: a run's files stay bounded whatever a model writes)."""


class Prediction(msgspec.Struct, frozen=True):
    """One example's outcome as a person reads it: its id and content key
    (:func:`~combee_fast.tasks.heldout.row_key`), input, the answer given (None: unanswered),
    target, score, the grader's feedback and the failure's label (None: answered); each text cut
    to :data:`PREDICTION_CHARS` characters."""

    id: str
    row: str
    input: str
    answer: str | None
    target: str | None
    score: float
    feedback: str
    error: str | None = None

    @classmethod
    def of(cls, example: Example, answer: str | None, score: float | None, feedback: str,
           error: CallError | None) -> Prediction:
        return cls(id=example.id, row=row_key(example), input=example.input[:PREDICTION_CHARS], answer=_cut(answer),
                   target=_cut(example.target), score=float(score or 0.0) if error is None else 0.0,
                   feedback=feedback[:PREDICTION_CHARS], error=error.label if error is not None else None)


def _cut(text: str | None) -> str | None:
    return None if text is None else text[:PREDICTION_CHARS]


class Applied(msgspec.Struct, Generic[A], frozen=True):
    """One apply: the new artifact, what changed (a :class:`~combee_fast.protocols.ChangeReport`),
    the lessons it kept, its replayable log entries."""

    artifact: A
    report: Any
    kept: tuple[str, ...]
    log: tuple[Any, ...]


class EvalResult(msgspec.Struct, frozen=True):
    """Accuracy of one deployable on one set of examples, per example, with the critical path.

    ``accuracy`` is the mean score over the *answered* examples (0.0 when none was): an example
    whose call failed (HTTP error, timeout, unparseable reply, replay miss...) is not a wrong
    answer but an unanswered one, counted in ``unanswered`` and by failure kind
    (:attr:`~combee_fast.schema.CallError.label`) in ``unanswered_by_kind``
    (``answered + unanswered == examples``). ``scores``: per example, in the examples' order, 0
    for an unanswered one. ``outcomes``: ``(usage, error)`` of every call the evaluation made
    (empty when the scores were already known, e.g. GEPA's pool). ``predictions``: per example,
    what was answered and how it was graded (empty when the learner does not say).
    """

    accuracy: float
    examples: int
    answered: int
    unanswered: int
    unanswered_by_kind: dict[str, int]
    sim_seconds: float
    scores: tuple[float, ...] = ()
    outcomes: tuple[tuple[Usage, CallError | None], ...] = ()
    predictions: tuple[Prediction, ...] = ()

    def first_error(self) -> str:
        """The message of the first failed call ('' when none failed)."""
        return next((error.message for _, error in self.outcomes if error is not None), "")

    @classmethod
    def graded(cls, calls: Sequence[tuple[float, Usage, CallError | None]], sim_seconds: float) -> EvalResult:
        """The result of one scored call per example: ``(score, usage, error)`` each, in the
        examples' order (a failed call is unanswered, whatever its score)."""
        answered = [score for score, _, error in calls if error is None]
        failed: dict[str, int] = {}
        for _, _, error in calls:
            if error is not None:
                failed[error.label] = failed.get(error.label, 0) + 1
        return cls(
            accuracy=sum(answered) / len(answered) if answered else 0.0, examples=len(calls), answered=len(answered),
            unanswered=len(calls) - len(answered), unanswered_by_kind=dict(sorted(failed.items())),
            sim_seconds=sim_seconds, scores=tuple(float(score) if error is None else 0.0 for score, _, error in calls),
            outcomes=tuple((usage, error) for _, usage, error in calls),
        )


class StepResult(msgspec.Struct, Generic[A], frozen=True):
    """What one learning step did. ``artifact`` is the artifact after its apply(s);
    ``reports`` what each apply changed; ``sim_seconds`` the step's critical path in the
    endpoint's (simulated) seconds; ``insights`` the lessons its records taught and ``kept``
    those the artifact now holds; ``rewards`` the first-attempt scores of the batch's items;
    ``proposed`` the texts of the edits its proposer calls proposed (before any merge);
    ``log`` the replayable entries of the applies that changed the artifact; ``validation`` the
    method's own validation of the result (GEPA validates inside its step), if any."""

    artifact: A
    reports: tuple[Any, ...]
    traces: tuple[Any, ...]
    proposals: tuple[Proposal[Any], ...]
    sim_seconds: float
    wall_seconds: float
    insights: tuple[str, ...]
    kept: tuple[str, ...]
    log: tuple[Any, ...] = ()
    rewards: tuple[float, ...] = ()
    proposed: tuple[str, ...] = ()
    validation: EvalResult | None = None


class StepShape(msgspec.Struct, frozen=True):
    """Per-step overrides of the method's shape, set by a batch plan (None: the configured value).

    ``max_group``: records one curator reads; ``duplicates``: p of the augmented shuffle;
    ``shuffle_salt`` > 0 draws the shuffle from a new seed path (a diversity remedy);
    ``in_flight``: batches a method that runs several at once keeps in flight."""

    max_group: int | None = None
    duplicates: int | None = None
    shuffle_salt: int = 0
    in_flight: int | None = None


def rewards_of(traces: Sequence[Any]) -> tuple[float, ...]:
    """The first-attempt rewards among ``traces`` (those that made one), in order."""
    return tuple(float(r) for t in traces if (r := t.reward) is not None)


def proposed_texts(edit_text: Callable[[Any], str], proposals: Sequence[Proposal[Any] | None]) -> tuple[str, ...]:
    """The non-blank texts (``edit_text``) of every edit in ``proposals``, in order."""
    return tuple(text for p in proposals if p is not None for e in p.edits if (text := edit_text(e)).strip())


class StepsOnly:
    """The members of a :class:`~combee_fast.protocols.Method` that has no work before its first
    batch and carries none from a step into the next."""

    def pending(self) -> int:
        return 0

    def carried(self) -> None:
        return None

    def carried_type(self, artifact_type: Any) -> Any:
        return type(None)

    async def resume(self, carried: Any, items: Any) -> None:
        if carried is not None:
            raise RuntimeError(f"{type(self).__name__} carries no work between steps; a checkpoint says it did")

    async def start(self, artifact: Any) -> StepResult[Any] | None:
        """Nothing to do before the first batch."""
        return None
