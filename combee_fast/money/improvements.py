"""Cost per improvement: candidates a run explored, those it accepted, and the tokens per accepted one.

A speedup that spends six times the candidates is not the same speedup, so every run's summary
says what it explored and what it kept. Each apply's report (a
:class:`~combee_fast.protocols.ChangeReport`) is counted by its learner's
:meth:`~combee_fast.kinds.Kind.improvements` into ``(explored, accepted)``; what one candidate
is differs by learner and is defined where the learner counts it:

- ACE (:meth:`~combee_fast.ace.kind.AceKind.improvements`): a content op (ADD, UPDATE, REMOVE)
  that reached the apply is explored, one that took effect is accepted; the TAG ops that count
  citations are neither;
- GEPA (:meth:`~combee_fast.gepa.kind.GepaKind.improvements`): a child candidate proposed (an
  iteration that produced one: accepted, rejected, or dropped as stale) is explored, one accepted
  into the pool is accepted; the seed is neither;
- TextGrad (:meth:`~combee_fast.textgrad.kind.TextGradKind.improvements`): an optimizer update
  that reached the apply is explored, one that changed the prompt is accepted;
- any other learner (:func:`change_counts`, the default): an edit that would add something
  (added or rejected) is explored, one added is accepted.

``tokens_per_improvement`` is the run's training tokens (every call of its learning steps:
rollouts, reflections, proposals, and what a method validates inside its steps, as GEPA does;
not the loop's own validation) over its accepted candidates; None when it accepted none.
"""

from __future__ import annotations

from typing import Any

from combee_fast.money.dollars import money


def change_counts(report: Any) -> tuple[int, int]:
    """``(explored, accepted)`` of one apply's :class:`~combee_fast.protocols.ChangeReport` for a
    learner that does not count its own: added plus rejected, and added."""
    added = len(report.added_ids)
    return added + len(report.rejected), added


def tokens_per_improvement(tokens: int, accepted: int) -> float | None:
    """Training tokens per accepted candidate (None when none was accepted)."""
    return round(tokens / accepted, 1) if accepted else None


def improvement_line(summary: dict[str, Any]) -> str:
    """The report's sentence on the cost-per-improvement fields of a run's ``summary``, dollars
    included (:func:`~combee_fast.money.dollars.dollar_summary`)."""
    per = summary.get("tokens_per_improvement")
    dollars = summary.get("dollars_per_improvement")
    return (f"Candidates explored {summary.get('candidates_explored', 0):,}, accepted "
            f"{summary.get('candidates_accepted', 0):,}; tokens per accepted improvement: "
            f"{'none accepted' if per is None else format(per, ',.0f')}. Dollars per accepted improvement: "
            f"{'none accepted' if not summary.get('candidates_accepted') else money(dollars)}.")


def improvement_summary(tokens: int, explored: int, accepted: int) -> dict[str, Any]:
    """The summary's cost-per-improvement fields (module docstring)."""
    return {"candidates_explored": explored, "candidates_accepted": accepted,
            "tokens_per_improvement": tokens_per_improvement(tokens, accepted)}
