"""When a training run stops because its calls fail, and the one line that says so.

A run never ends "successfully" on calls that did not happen. After each step (and each
validation) the train loop asks this module whether to stop. Calls are judged over a window: the
latest steps holding at least ``min_judged_calls`` calls (one step of a batch of 10 or more; a
few steps of sequential ACE, so one unlucky call never stops a run), or whatever the run made
when its last step ends. The run stops when in that window

- every call failed in transport (connection refused or reset, timeout, after the retries):
  :class:`~combee_fast.errors.EndpointUnreachable`;
- more than ``max_failed_fraction`` of the calls failed for any reason (HTTP errors,
  unparseable answers, replay-cache misses...): :class:`~combee_fast.errors.CallsFailed`;

and when, over the whole run so far, more than ``max_failed_fraction`` of the calls of one
learning role (reflector, curator, reducer) failed, judged once that role made
``min_judged_calls`` calls or at the last step, however well the other roles did: a run whose
reflections are all unusable (a small model copying the prompt's placeholders) learns nothing,
and says so (:class:`~combee_fast.errors.CallsFailed`);

and when a validation leaves more than ``max_failed_fraction`` of its examples unanswered
(:class:`~combee_fast.errors.CallsFailed`).

Before raising, the playbook learned so far is saved as ``final.json`` in the run directory;
the message names the step(s), how many calls failed of how many, the count of each kind, one
example message, and that file.
"""

from __future__ import annotations

from collections import deque

from combee_fast.config import ROLES
from combee_fast.errors import CallsFailed, EndpointUnreachable
from combee_fast.playbook import Playbook
from combee_fast.run.evaluate import EvalResult
from combee_fast.run.ledger import CallCounts, LedgerRow
from combee_fast.run.rundir import RunDir

UNREACHABLE_KINDS = frozenset({"connection", "timeout"})
"""Failure kinds that mean the endpoint could not be reached at all."""

LEARNING_ROLES = ROLES[1:]
"""The roles whose replies become playbook edits (every role but the generator)."""

_EXAMPLE_CHARS = 160


class FailureWatch:
    """Judges the calls of the latest steps (see the module docstring); one per training run."""

    def __init__(self, *, max_failed_fraction: float, min_judged_calls: int) -> None:
        self.max_failed_fraction = max_failed_fraction
        self.min_judged_calls = min_judged_calls
        self._window: deque[tuple[LedgerRow, CallCounts]] = deque()
        self._run = CallCounts()  # every step's calls so far

    def observe(self, row: LedgerRow, counts: CallCounts, playbook: Playbook, run_dir: RunDir | None,
                *, last: bool) -> None:
        """Add the step of ``row`` (its calls counted in ``counts``); raise if the window failed."""
        if counts.total_calls:
            self._window.append((row, counts))
            self._run.add_counts(counts)
        if not self._window:
            return
        while len(self._window) > 1 and sum(c.total_calls for _, c in list(self._window)[1:]) >= self.min_judged_calls:
            self._window.popleft()
        judged = CallCounts()
        for _, step_counts in self._window:
            judged.add_counts(step_counts)
        calls, failed = judged.total_calls, judged.total_errors
        first, latest = self._window[0][0].step + 1, row.step + 1
        steps = f"step {latest}" if first == latest else f"steps {first}-{latest}"
        if (calls < self.min_judged_calls and not last) or failed <= self.max_failed_fraction * calls:
            self._judge_learning_roles(latest, playbook, run_dir, last=last)
            return
        kinds = judged.errors_by_kind()
        example = self._example(kinds)
        if set(kinds) <= UNREACHABLE_KINDS and failed == calls:
            raise EndpointUnreachable(
                f"every call of {steps} failed to reach its endpoint ({_short(example)}){_saved(playbook, run_dir)}"
            )
        raise CallsFailed(
            f"{steps}: {failed} of {calls} calls failed ({_kinds(kinds)}; e.g. {_short(example)})"
            f"{_saved(playbook, run_dir)}"
        )

    def _judge_learning_roles(self, latest: int, playbook: Playbook, run_dir: RunDir | None, *, last: bool) -> None:
        for role in LEARNING_ROLES:
            calls, kinds = self._run.calls.get(role, 0), self._run.errors.get(role, {})
            failed = sum(kinds.values())
            if (calls >= self.min_judged_calls or (last and calls)) and failed > self.max_failed_fraction * calls:
                raise CallsFailed(
                    f"{'step 1' if latest == 1 else f'steps 1-{latest}'}: {failed} of {calls} {role} calls failed ({_kinds(kinds)}; e.g. "
                    f"{_short(self._example(kinds))}): the playbook cannot learn without usable {role} replies"
                    f"{_saved(playbook, run_dir)}"
                )

    def _example(self, kinds: dict[str, int]) -> str:
        """The latest error message in the window of one of ``kinds`` (any kind if none matches)."""
        records = [e for r, _ in reversed(self._window) for e in r.errors]
        return next((e.message for e in records if e.kind in kinds), records[0].message if records else "")


def check_validation(row: LedgerRow, result: EvalResult, playbook: Playbook, run_dir: RunDir | None,
                     *, max_failed_fraction: float) -> None:
    """Raise if the validation after the step of ``row`` left too many examples unanswered."""
    if result.examples == 0 or result.unanswered <= max_failed_fraction * result.examples:
        return
    example = next((r.error.message for r in result.rollouts if r.error is not None), "")
    raise CallsFailed(
        f"validation after step {row.step + 1}: {result.unanswered} of {result.examples} examples unanswered "
        f"({_kinds(result.unanswered_by_kind)}; e.g. {_short(example)}){_saved(playbook, run_dir)}"
    )


def _kinds(kinds: dict[str, int]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items(), key=lambda item: (-item[1], item[0])))


def _short(message: str) -> str:
    text = " ".join(message.split())
    return text if len(text) <= _EXAMPLE_CHARS else text[: _EXAMPLE_CHARS - 3] + "..."


def _saved(playbook: Playbook, run_dir: RunDir | None) -> str:
    """Save ``playbook`` as the run's final.json; the clause saying where it is."""
    if run_dir is None:
        return f"; run stopped at playbook version {playbook.version} (no run directory)"
    run_dir.save_playbook("final.json", playbook)
    return f"; run stopped; {run_dir.root / 'final.json'} holds the playbook learned so far (version {playbook.version})"
