"""GEPA's own stop rule: its budget of metric calls (a :class:`~combee_fast.protocols.StopRule`)."""

from __future__ import annotations

from typing import Any

from combee_fast.run.progress import Budget
from combee_fast.run.state import TrainState


class MetricCallBudget:
    """Done once ``limit`` metric calls are spent: no iteration starts after that (the last one
    may overshoot, as in GEPA)."""

    ends = "done"

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def check(self, state: TrainState[Any]) -> str | None:
        spent = state.artifact.metric_calls
        return f"metric-call budget spent: {spent:,} of {self.limit:,}" if spent >= self.limit else None

    def budget(self, items: int) -> Budget:
        """What the run spends towards this end: metric calls (the ledger's rollouts)."""
        return Budget("metric calls", self.limit, lambda row: row.rollouts)
