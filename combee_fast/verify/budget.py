"""The card's budget, enforced: a run starts no new item after the step that spends one of its
limits, and says which limit bound. Work in flight then (chains carried into the next step,
proposals in flight) was paid for: it is drained into the artifact, not dropped
(:mod:`combee_fast.run.train`), so the totals may pass a limit by what that work still spends.

:class:`BudgetGuard` is a :class:`~combee_fast.protocols.StopRule` (``stops`` of
:meth:`combee_fast.session.Session.train`): it reads the run's running totals of rollouts,
tokens, GPU-seconds and wall time and answers ``"budget <limit> spent: <used> of <limit value>"``
for the first limit reached (in the order rollouts, tokens, gpu_seconds, wall_clock_s), else None.
GPU-seconds count only when known. Read from the run's state, a resumed run keeps counting.
"""

from __future__ import annotations

from typing import Any

from combee_fast.protocols.running import StopRule
from combee_fast.record.state import TrainState
from combee_fast.verify.card import Budget

LIMITS = ("rollouts", "tokens", "gpu_seconds", "wall_clock_s")


class BudgetGuard(StopRule):
    """Stops a run once one limit of ``limits`` (the card's budget) is spent; ``bound`` names the
    limit that did. A limit, not the run's work: what the run spends towards its end is its
    other rules' (:meth:`budget` says nothing)."""

    ends = "limit"

    def __init__(self, limits: Budget) -> None:
        self.limits = limits
        self.bound: str | None = None

    def spent(self, state: TrainState[Any]) -> dict[str, float]:
        """What the run has spent of each limit."""
        return {"rollouts": state.rollouts, "tokens": state.tokens, "gpu_seconds": state.gpu_seconds,
                "wall_clock_s": state.wall_seconds}

    def check(self, state: TrainState[Any]) -> str | None:
        spent = self.spent(state)
        for limit in LIMITS:
            if spent[limit] >= getattr(self.limits, limit):
                self.bound = limit
                return f"budget {limit} spent: {spent[limit]:,.0f} of {getattr(self.limits, limit):,.0f}"
        return None
