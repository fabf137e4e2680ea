"""GEPA over the user's metric, registered as a learner by its path: :data:`GEPA_ON_ROWS`
(``combee_fast.optimizing.kind:GEPA_ON_ROWS``, the learner ``optimize`` runs).

It is the GEPA learner (:class:`~combee_fast.gepa.kind.GepaKind`: its methods, pool, budget,
planner, version files) with one difference: its calls grade candidates with the user's metric
on a :class:`~combee_fast.optimizing.rows.RowsTask`'s rows and reflect on the records that
metric kept (:class:`~combee_fast.optimizing.calls.MetricCalls`), in the search and in every
evaluation alike.
"""

from __future__ import annotations

from combee_fast.errors import ConfigError
from combee_fast.gepa.kind import GepaKind
from combee_fast.optimizing.calls import MetricCalls
from combee_fast.optimizing.rows import RowsTask
from combee_fast.run.context import LearnContext

PATH = "combee_fast.optimizing.kind:GEPA_ON_ROWS"
"""The learner's name in a run's configuration."""


class GepaOnRows(GepaKind):
    """GEPA whose metric call is the user's (module docstring)."""

    def calls(self, context: LearnContext) -> MetricCalls:
        task = context.task
        if not isinstance(task, RowsTask):
            raise ConfigError(f"learner {PATH} grades the rows of combee_fast.optimize(), not task {task.name!r}")
        return MetricCalls(task, context.calls, task.metric(context.calls))


GEPA_ON_ROWS = GepaOnRows()
"""The registered learner (module docstring)."""
