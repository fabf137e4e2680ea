"""The stop rules of a training run (:class:`~combee_fast.protocols.StopRule`), one class each.

After every completed step the loop asks its rules in order; the first that answers ends the
run there. What a stop means is the rule's ``ends`` (:data:`~combee_fast.protocols.running.Ends`):

- ``"done"``: the work is done (:class:`EpochsDone`; GEPA's metric-call budget);
- ``"limit"``: a limit was reached before the work was done, the run's ``stopped_by``
  (:class:`NoImprovement`, :class:`ScoreThreshold`, :class:`WallClock`, :class:`DollarBudget`;
  a card's budget); as
  after ``"done"``, work the method carries in flight is drained into the artifact first (its
  calls were made: it is paid for), and no new item starts;
- ``"interrupt"``: SIGINT or SIGTERM asked for a stop (:class:`Interrupted`); the run can be resumed;
- ``"failure"``: the run failed; such a rule raises instead of answering, and is asked after
  the others (it sees their answer in ``state.stopping``): :class:`FailingCalls`,
  :class:`FailingEpisodes`, :class:`UnansweredValidation`, :class:`NothingKept`.

A run never ends "successfully" on calls that did not happen. :class:`FailingCalls` judges the
calls of a window: the latest steps holding at least ``min_judged_calls`` calls (one step of a
batch of 10 or more; a few steps of sequential ACE, so one unlucky call never stops a run), or
whatever the run made when it is ending. The run fails when in that window

- every call failed in transport (connection refused or reset, timeout, after the retries):
  :class:`~combee_fast.errors.EndpointUnreachable`;
- more than ``max_failed_fraction`` of the calls failed for any reason (HTTP errors,
  unparseable answers, replay-cache misses...): :class:`~combee_fast.errors.CallsFailed`;

and when, over the whole run so far, more than ``max_failed_fraction`` of the calls of one
learning role failed, judged once that role made ``min_judged_calls`` calls or when the run is
ending, however well the other roles did: a run whose reflections are all unusable (a small model
copying the prompt's placeholders) learns nothing, and says so. :class:`UnansweredValidation`
fails a run whose validation left more than ``max_failed_fraction`` of its examples unanswered;
:class:`NothingKept` a run ending with an empty artifact although its steps proposed lessons.
The messages name the step(s), how many calls failed of how many, the count of each kind and one
example message; the loop adds where the artifact learned so far was saved.

:class:`FailingEpisodes` judges agent episodes the same way: over the latest steps holding at
least ``min_judged_calls`` episodes (or whatever the run made when it is ending), more than
``max_failed_fraction`` of them failed (a sandbox limit, a model call, unusable replies, a time
limit...): :class:`~combee_fast.errors.CallsFailed`, naming the kinds and one message.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from combee_fast.errors import CallsFailed, EndpointUnreachable, NothingLearned
from combee_fast.money.dollars import total
from combee_fast.protocols.running import Budget, StopRule
from combee_fast.record.ledger import CallCounts, LedgerRow
from combee_fast.record.state import TrainState
from combee_fast.run.interrupt import StopRequest

UNREACHABLE_KINDS = frozenset({"connection", "timeout"})
"""Failure kinds that mean the endpoint could not be reached at all."""

_EXAMPLE_CHARS = 160


class EpochsDone(StopRule):
    """Done once ``epochs`` passes over the train split are complete (carried work drained)."""

    ends = "done"

    def __init__(self, epochs: int) -> None:
        self.epochs = epochs

    def check(self, state: TrainState[Any]) -> str | None:
        return f"{self.epochs} epoch(s) done" if state.epoch >= self.epochs else None

    def budget(self, items: int) -> Budget:
        """What the run spends towards this end: every epoch's ``items`` train samples."""
        return Budget("samples", self.epochs * items, lambda row: row.batch_size)


class Interrupted(StopRule):
    """Stops after the step in flight once SIGINT or SIGTERM asked (``request``)."""

    ends = "interrupt"

    def __init__(self, request: StopRequest) -> None:
        self.request = request

    def check(self, state: TrainState[Any]) -> str | None:
        return None if self.request.requested is None else f"interrupted by {self.request.requested}"


class NoImprovement(StopRule):
    """Stops after ``patience`` validations in a row that did not raise the best score."""

    ends = "limit"

    def __init__(self, patience: int) -> None:
        self.patience = patience

    def check(self, state: TrainState[Any]) -> str | None:
        if state.stale_validations >= self.patience:
            return f"no improvement in {state.stale_validations} validations (patience {self.patience})"
        return None


class ScoreThreshold(StopRule):
    """Stops once the best validation score reaches ``target``."""

    ends = "limit"

    def __init__(self, target: float) -> None:
        self.target = target

    def check(self, state: TrainState[Any]) -> str | None:
        if state.best_score is not None and state.best_score >= self.target:
            return f"validation score {state.best_score:.4f} reached the target {self.target:g}"
        return None


class WallClock(StopRule):
    """Stops once the run's training steps took ``seconds`` of wall-clock time (validation excluded)."""

    ends = "limit"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def check(self, state: TrainState[Any]) -> str | None:
        if state.wall_seconds >= self.seconds:
            return f"wall clock spent: {state.wall_seconds:,.0f} of {self.seconds:,.0f} s"
        return None


class DollarBudget(StopRule):
    """Stops once the learning steps' calls cost ``dollars`` at their endpoints' prices
    (:mod:`~combee_fast.money.dollars`); every role that made calls needs a price (else the cost
    is unknown and this rule never answers: the caller checks the prices first)."""

    ends = "limit"

    def __init__(self, dollars: float) -> None:
        self.dollars = dollars

    def check(self, state: TrainState[Any]) -> str | None:
        spent = total(state.dollars)
        if spent is not None and spent >= self.dollars:
            return f"dollar budget spent: ${spent:,.4f} of ${self.dollars:,.4f}"
        return None


class FailingCalls(StopRule):
    """Fails the run whose latest calls, or one learning role's calls, mostly failed (module doc)."""

    ends = "failure"

    def __init__(self, *, max_failed_fraction: float, min_judged_calls: int, learning_roles: tuple[str, ...]) -> None:
        self.max_failed_fraction = max_failed_fraction
        self.min_judged_calls = min_judged_calls
        self.learning_roles = learning_roles

    def check(self, state: TrainState[Any]) -> None:
        window = self._window(state)
        if not window:
            return None
        last = state.stopping is not None
        judged = CallCounts()
        for _, counts in window:
            judged.add_counts(counts)
        calls, failed = judged.total_calls, judged.total_errors
        first, latest = window[0][0].step + 1, window[-1][0].step + 1
        steps = f"step {latest}" if first == latest else f"steps {first}-{latest}"
        if (calls < self.min_judged_calls and not last) or failed <= self.max_failed_fraction * calls:
            return self._judge_learning_roles(state, latest, last=last)
        kinds = judged.errors_by_kind()
        example = _example(window, kinds)
        if set(kinds) <= UNREACHABLE_KINDS and failed == calls:
            raise EndpointUnreachable(f"every call of {steps} failed to reach its endpoint ({_short(example)})")
        raise CallsFailed(f"{steps}: {failed} of {calls} calls failed ({_kinds(kinds)}; e.g. {_short(example)})")

    def _window(self, state: TrainState[Any]) -> list[tuple[LedgerRow, CallCounts]]:
        """The latest steps with calls, as few as hold ``min_judged_calls`` calls (oldest first)."""
        window: list[tuple[LedgerRow, CallCounts]] = []
        held = 0
        for row in reversed(state.ledger):
            counts = CallCounts.of_row(row)
            if not counts.total_calls:
                continue
            if window and held >= self.min_judged_calls:
                break
            window.append((row, counts))
            held += counts.total_calls
        return window[::-1]

    def _judge_learning_roles(self, state: TrainState[Any], latest: int, *, last: bool) -> None:
        run = state.counts
        for role in self.learning_roles:
            calls, kinds = run.calls.get(role, 0), run.errors.get(role, {})
            failed = sum(kinds.values())
            if (calls >= self.min_judged_calls or (last and calls)) and failed > self.max_failed_fraction * calls:
                example = _example(self._window(state), kinds)
                raise CallsFailed(
                    f"{'step 1' if latest == 1 else f'steps 1-{latest}'}: {failed} of {calls} {role} calls failed "
                    f"({_kinds(kinds)}; e.g. {_short(example)}): the artifact cannot learn without usable {role} replies"
                )


class FailingEpisodes(StopRule):
    """Fails the run whose latest agent episodes mostly failed (module doc)."""

    ends = "failure"

    def __init__(self, *, max_failed_fraction: float, min_judged_calls: int) -> None:
        self.max_failed_fraction = max_failed_fraction
        self.min_judged = min_judged_calls

    def check(self, state: TrainState[Any]) -> None:
        window: list[LedgerRow] = []
        held = 0
        for row in reversed(state.ledger):
            if not row.episodes:
                continue
            if window and held >= self.min_judged:
                break
            window.append(row)
            held += row.episodes
        if not window or (held < self.min_judged and state.stopping is None):
            return None
        kinds: dict[str, int] = {}
        for row in window:
            for kind, n in row.episode_failures.items():
                kinds[kind] = kinds.get(kind, 0) + n
        failed = sum(kinds.values())
        if failed <= self.max_failed_fraction * held:
            return None
        first, latest = window[-1].step + 1, window[0].step + 1
        steps = f"step {latest}" if first == latest else f"steps {first}-{latest}"
        example = next((e.message for row in window for e in row.errors if e.kind in kinds), "")
        raise CallsFailed(f"{steps}: {failed} of {held} agent episodes failed ({_kinds(kinds)}; "
                          f"e.g. {_short(example)})")


class UnansweredValidation(StopRule):
    """Fails the run whose validation after this step left too many examples unanswered."""

    ends = "failure"

    def __init__(self, *, max_failed_fraction: float) -> None:
        self.max_failed_fraction = max_failed_fraction

    def check(self, state: TrainState[Any]) -> None:
        result = state.validated
        if result is None or result.examples == 0 or result.unanswered <= self.max_failed_fraction * result.examples:
            return None
        raise CallsFailed(
            f"validation after step {state.steps}: {result.unanswered} of {result.examples} examples unanswered "
            f"({_kinds(result.unanswered_by_kind)}; e.g. {_short(result.first_error())})"
        )


class NothingKept(StopRule):
    """Fails the run that is ending with an empty artifact although its latest steps (the ledger
    rows the state holds) added or tried to add lessons: all were rejected or evicted.
    ``hint`` names the setting that may be why (e.g. ``token_budget=1``)."""

    ends = "failure"

    def __init__(self, hint: str = "") -> None:
        self.hint = hint

    def check(self, state: TrainState[Any]) -> None:
        if state.stopping is None or len(state.artifact):
            return None
        added = sum(row.added for row in state.ledger)
        rejected = sum(row.rejected for row in state.ledger)
        if added + rejected == 0:
            return None
        evicted = sum(row.evicted for row in state.ledger)
        reasons: Counter[str] = Counter()
        for row in state.ledger:
            reasons.update(row.rejections)
        why = f" ({_kinds(dict(reasons.most_common(3)))})" if reasons else ""
        raise NothingLearned(f"the run learned nothing: its steps added {added} lessons, had {rejected} rejected{why} "
                             f"and {evicted} evicted, and the artifact ends empty{f' ({self.hint})' if self.hint else ''}")


def _example(window: list[tuple[LedgerRow, CallCounts]], kinds: dict[str, int]) -> str:
    """The latest error message in the window of one of ``kinds`` (any kind if none matches)."""
    records = [e for row, _ in reversed(window) for e in row.errors]
    return next((e.message for e in records if e.kind in kinds), records[0].message if records else "")


def _kinds(kinds: dict[str, int]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items(), key=lambda item: (-item[1], item[0])))


def _short(message: str) -> str:
    text = " ".join(message.split())
    return text if len(text) <= _EXAMPLE_CHARS else text[: _EXAMPLE_CHARS - 3] + "..."
