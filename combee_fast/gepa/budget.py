"""The metric-call budget of the asynchronous search, reserved at dispatch so it is never overshot.

A proposal is started only once the budget can pay for every metric call it may make
(:meth:`MetricBudget.reserve`); each grading turns its share of that reservation into calls
spent when it is dispatched (:meth:`MetricBudget.spend`); what a proposal turned out not to
need goes back (:meth:`MetricBudget.release`). At every moment ``spent + reserved <= limit``,
so the search stops at exactly its budget, or below it when no further proposal fits.
"""

from __future__ import annotations

import msgspec


class MetricBudget(msgspec.Struct):
    """``limit`` metric calls: ``spent`` (dispatched) and ``reserved`` (promised to proposals in flight)."""

    limit: int
    spent: int = 0
    reserved: int = 0

    @property
    def free(self) -> int:
        """Calls neither spent nor promised."""
        return self.limit - self.spent - self.reserved

    def reserve(self, calls: int) -> None:
        """Promise ``calls`` to a proposal (``ValueError`` when they do not fit)."""
        if not 0 <= calls <= self.free:
            raise ValueError(f"cannot reserve {calls} metric calls: {self.free} of {self.limit} are free")
        self.reserved += calls

    def spend(self, calls: int) -> None:
        """Dispatch ``calls`` of what was reserved."""
        if not 0 <= calls <= self.reserved:
            raise ValueError(f"cannot spend {calls} metric calls: only {self.reserved} are reserved")
        self.reserved -= calls
        self.spent += calls

    def release(self, calls: int) -> None:
        """Give back ``calls`` reserved and not needed."""
        if not 0 <= calls <= self.reserved:
            raise ValueError(f"cannot release {calls} metric calls: only {self.reserved} are reserved")
        self.reserved -= calls
