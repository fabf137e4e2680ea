"""The metric-call budget reserved at dispatch: spent + reserved never passes the limit."""

from __future__ import annotations

import pytest

from combee_fast.gepa.budget import MetricBudget


def test_reserving_spending_and_releasing_keep_the_budget_within_its_limit() -> None:
    budget = MetricBudget(100, spent=20)
    budget.reserve(70)
    assert budget.free == 10
    with pytest.raises(ValueError, match="cannot reserve 11"):
        budget.reserve(11)
    budget.spend(40)
    budget.release(30)
    assert (budget.spent, budget.reserved, budget.free) == (60, 0, 40)
    with pytest.raises(ValueError, match="only 0 are reserved"):
        budget.spend(1)
    with pytest.raises(ValueError, match="only 0 are reserved"):
        budget.release(1)
