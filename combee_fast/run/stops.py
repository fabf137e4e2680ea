"""When a training run stops because its calls fail, and the one line that says so.

A run never ends "successfully" on calls that did not happen. After each step (and each
validation) the train loop asks this module whether to stop:

- every call of the step failed in transport (connection refused or reset, timeout, after the
  retries): :class:`~combee_fast.errors.EndpointUnreachable`;
- more than ``max_failed_fraction`` of the step's calls failed for any reason (HTTP errors,
  unparseable answers, replay-cache misses...), or a validation left more than that fraction of
  its examples unanswered: :class:`~combee_fast.errors.CallsFailed`.

Before raising, the playbook learned so far is saved as ``final.json`` in the run directory;
the message names the step, how many calls failed of how many, the count of each kind, one
example message, and that file.
"""

from __future__ import annotations

from combee_fast.errors import CallsFailed, EndpointUnreachable
from combee_fast.playbook import Playbook
from combee_fast.run.evaluate import EvalResult
from combee_fast.run.ledger import CallCounts, LedgerRow
from combee_fast.run.rundir import RunDir

UNREACHABLE_KINDS = frozenset({"connection", "timeout"})
"""Failure kinds that mean the endpoint could not be reached at all."""

_EXAMPLE_CHARS = 160


def check_step(row: LedgerRow, counts: CallCounts, playbook: Playbook, run_dir: RunDir | None,
               *, max_failed_fraction: float) -> None:
    """Raise if the step of ``row`` (whose calls ``counts`` counts) failed too often."""
    calls, failed = counts.total_calls, counts.total_errors
    if calls == 0 or failed <= max_failed_fraction * calls:
        return
    kinds = counts.errors_by_kind()
    example = next((e.message for e in row.errors), "")
    if set(kinds) <= UNREACHABLE_KINDS and failed == calls:
        raise EndpointUnreachable(
            f"every call of step {row.step + 1} failed to reach its endpoint ({_short(example)})"
            f"{_saved(playbook, run_dir)}"
        )
    raise CallsFailed(
        f"step {row.step + 1}: {failed} of {calls} calls failed ({_kinds(kinds)}; e.g. {_short(example)})"
        f"{_saved(playbook, run_dir)}"
    )


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
