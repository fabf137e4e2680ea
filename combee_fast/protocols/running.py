"""The run seam: how a run lives (:mod:`combee_fast.run.train`).

- :class:`Method`: one learning step over a batch (``sequential``, ``naive``, ``combee``...),
  and the work it carries into the next step.
- :class:`BatchPlan`: each step's batch size and shape, learning from what steps cost; what it
  decides is appended to a :class:`DecisionLog` (the run directory's ``controller.jsonl``).
- :class:`StopRule`: why the run ends after a step, what that end means (:data:`Ends`), and what
  the run spends towards it (a :class:`Budget`).

Value types: :class:`Budget`, :class:`~combee_fast.methods.base.StepResult`,
:class:`~combee_fast.methods.base.StepShape`. The state a stop rule reads is the loop's
(:class:`~combee_fast.record.state.TrainState`), named here only as the type parameter ``State``
(and a ledger row as ``Row``): nothing here imports the loop or its record, even for type hints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, Protocol, TypeVar

if TYPE_CHECKING:
    from combee_fast.methods.base import StepResult, StepShape

A = TypeVar("A")  # an artifact
Row = TypeVar("Row")  # a step's ledger row (the loop's LedgerRow)
State = TypeVar("State", contravariant=True)  # the run's state a stop rule reads (the loop's TrainState)


class Method(Protocol[A]):
    """One learning step over a batch, from one artifact version to the next.

    ``name`` is what ledgers and summaries call it. ``batches_span_epochs``: a batch may run on
    from the end of one epoch into the next (GEPA's minibatches); otherwise an epoch ends with a
    shorter batch. Work the method carries from a step into the next (ACE's chains still
    retrying) is counted by :meth:`pending`, kept by a checkpoint through :meth:`carried` and
    taken up again by :meth:`resume`.
    """

    name: str
    batches_span_epochs: bool

    async def start(self, artifact: A) -> StepResult[A] | None:
        """The work before the first batch (GEPA grades its seed on validation); None: none."""
        ...

    async def step(
        self, items: Sequence[Any], artifact: A, *, epoch: int, step: int, shape: StepShape | None = None
    ) -> StepResult[A]:
        """Learn from ``items`` (examples, or rollouts for reflect-only tasks) starting at
        ``artifact``; ``shape`` (from the batch plan) overrides the method's shape for this step."""
        ...

    def pending(self) -> int:
        """Chains carried into the next step; a step with no items curates them."""
        ...

    def carried(self) -> Any:
        """What a checkpoint keeps of the carried work (None: nothing is carried): a value of
        :meth:`carried_type`."""
        ...

    def carried_type(self, artifact_type: Any) -> Any:
        """The type of what :meth:`carried` returns, for artifacts of ``artifact_type`` (how a
        checkpoint decodes it: a msgspec-typed value, artifacts as ``artifact_type``)."""
        ...

    async def resume(self, carried: Any, items: Mapping[str, Any]) -> None:
        """Carry again what :meth:`carried` returned, its items looked up by id in ``items``."""
        ...

class DecisionLog(Protocol):
    """Where a batch plan appends what it decided, one row a step (a run directory keeps them in
    ``controller.jsonl``, which a later run may replay)."""

    def append_decision(self, row: Any) -> None: ...


class BatchPlan(Protocol):
    """Chooses each step's batch size (and shape) and learns from what the step cost.

    ``state_type`` is the type of what :meth:`state` returns (msgspec-typed), which a checkpoint
    keeps and decodes as that type."""

    @property
    def state_type(self) -> Any:
        """The type of what :meth:`state` returns (a class attribute will do)."""
        ...

    def next_size(self, remaining: int) -> tuple[int, str]:
        """The next batch size and the reason for it; ``remaining`` items wait in the epoch."""
        ...

    def step_shape(self) -> StepShape | None:
        """The shape of the step just sized (None: the method's configured shape)."""
        ...

    def predicted_seconds(self) -> float | None:
        """The step seconds it predicted for the step just sized (None: no prediction), which the
        ledger shows beside the step's measured seconds."""
        ...

    async def observe(self, batch_size: int, result: StepResult[Any], samples_in_epoch: int) -> None:
        """Learn from the step just run at ``batch_size``."""
        ...

    def state(self) -> Any:
        """What a checkpoint keeps of the plan (its fit, its decisions)."""
        ...

    def restore(self, state: Any) -> None:
        """Continue from what :meth:`state` returned."""
        ...


Ends = Literal["done", "limit", "interrupt", "failure"]
"""What a stop means: the work is done; a limit was reached first; a signal asked (resumable);
the run failed."""


class Budget(NamedTuple, Generic[Row]):
    """What a run spends towards its end: ``total`` of ``unit``, each step spending ``spent(row)``
    of its ledger row (EpochsDone: the batch's samples; GEPA's budget: the step's metric calls)."""

    unit: str
    total: float
    spent: Callable[[Row], float]


class StopRule(Protocol[State]):
    """Why a run ends after the step that ``state`` holds, and what that end means (``ends``).

    The loop asks its rules after every completed step (and once before the first): the first
    reason given ends the run cleanly there. A rule judging the run a failure (most calls failed)
    has ``ends = "failure"`` and raises :class:`~combee_fast.errors.CallsFailed` or
    :class:`~combee_fast.errors.EndpointUnreachable` instead of answering; such rules are asked
    after the others and see their reason in ``state.stopping``. A ``"done"`` rule (epochs,
    GEPA's metric calls) says what the run spends towards its end (:meth:`budget`), which the
    progress bar counts.

    A rule that subclasses this protocol gets the default :meth:`budget` (none); one that does
    not implements every member.
    """

    ends: Ends

    def check(self, state: State) -> str | None: ...

    def budget(self, items: int) -> Budget[Any] | None:
        """What a run over ``items`` train items spends towards this rule's end (None: nothing
        it can say; the default)."""
        return None
