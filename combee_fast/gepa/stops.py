"""GEPA's own stop rule: its budget of metric calls (a :class:`~combee_fast.protocols.StopRule`)."""

from __future__ import annotations

from typing import Any

from combee_fast.protocols.running import Budget, StopRule
from combee_fast.record.state import TrainState


class MetricCallBudget(StopRule):
    """Done once ``limit`` metric calls are spent: no iteration starts after that (the synchronous
    loop's last one may overshoot, as in GEPA), or once the pool says no further proposal fits in
    what is left (``budget_closed``: the asynchronous search reserves calls at dispatch and never
    overshoots)."""

    ends = "done"

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def check(self, state: TrainState[Any]) -> str | None:
        spent = state.artifact.metric_calls
        if spent >= self.limit:
            return f"metric-call budget spent: {spent:,} of {self.limit:,}"
        if state.artifact.budget_closed:
            return f"metric-call budget spent: {spent:,} of {self.limit:,} (no further proposal fits in the rest)"
        return None

    def budget(self, items: int) -> Budget:
        """What the run spends towards this end: metric calls (the ledger's rollouts)."""
        return Budget("metric calls", self.limit, lambda row: row.rollouts)
