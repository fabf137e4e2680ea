"""The import path plug-ins written before the split use for
:class:`~combee_fast.record.state.TrainState`, the state a stop rule reads, which lives with the
run's record now (``tests/plugins`` checks a plug-in's stop rule on it through this path)."""

from combee_fast.record.state import TrainState

__all__ = ["TrainState"]
