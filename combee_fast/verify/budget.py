"""The card's budget, enforced: a run stops cleanly after the step that spends one of its limits,
and says which limit bound.

:class:`BudgetGuard` is the ``stop`` callable of :meth:`combee_fast.session.Session.train`: it
adds up each step's rollouts, tokens, GPU-seconds and wall time (the ledger row's) and answers
``"budget <limit> spent: <used> of <limit value>"`` for the first limit reached (in the order
rollouts, tokens, gpu_seconds, wall_clock_s), else None. GPU-seconds count only when known.
"""

from __future__ import annotations

from combee_fast.run.ledger import LedgerRow
from combee_fast.verify.card import Budget


class BudgetGuard:
    """Stops a run once one limit of ``budget`` is spent; ``spent`` holds the running totals."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.spent = {"rollouts": 0.0, "tokens": 0.0, "gpu_seconds": 0.0, "wall_clock_s": 0.0}
        self.bound: str | None = None  # the limit that stopped the run

    def __call__(self, row: LedgerRow) -> str | None:
        self.spent["rollouts"] += row.rollouts
        self.spent["tokens"] += sum(row.prompt_tokens.values()) + sum(row.completion_tokens.values())
        self.spent["gpu_seconds"] += row.gpu_seconds or 0.0
        self.spent["wall_clock_s"] += row.wall_seconds
        for limit in ("rollouts", "tokens", "gpu_seconds", "wall_clock_s"):
            if self.spent[limit] >= getattr(self.budget, limit):
                self.bound = limit
                return f"budget {limit} spent: {self.spent[limit]:,.0f} of {getattr(self.budget, limit):,.0f}"
        return None
