"""Critical-path schedules of the worker pool."""

from __future__ import annotations

from combee_fast.engine.timing import finish_times


def test_finish_times_model_the_worker_pool() -> None:
    assert finish_times([3.0, 1.0, 1.0, 1.0], workers=2) == [3.0, 1.0, 2.0, 3.0]
    assert finish_times([2.0] * 4, workers=8) == [2.0] * 4
    assert finish_times([], workers=3) == []
