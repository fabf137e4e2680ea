"""GEPA and ACE over the user's metric, registered as learners by their paths: :data:`GEPA_ON_ROWS`
(``combee_fast.optimizing.kind:GEPA_ON_ROWS``, the learner ``optimize`` runs) and
:data:`ACE_ON_ROWS` (its ``combee-ace`` method: a playbook learned for the seed's one component).

It is the GEPA learner (:class:`~combee_fast.gepa.kind.GepaKind`: its methods, pool, budget,
planner, version files) with one difference: its calls grade candidates with the user's metric
on a :class:`~combee_fast.optimizing.rows.RowsTask`'s rows and reflect on the records that
metric kept (:class:`~combee_fast.optimizing.calls.MetricCalls`), in the search and in every
evaluation alike. ACE's (:class:`~combee_fast.ace.kind.AceKind`) likewise: its generator is the
user's metric (:class:`~combee_fast.optimizing.calls.MetricAceCalls`).
"""

from __future__ import annotations

from combee_fast.ace.kind import AceKind
from combee_fast.errors import ConfigError
from combee_fast.gepa.kind import GepaKind
from combee_fast.optimizing.calls import MetricAceCalls, MetricCalls
from combee_fast.optimizing.rows import RowsTask
from combee_fast.protocols.learning import LearnContext

PATH = "combee_fast.optimizing.kind:GEPA_ON_ROWS"
ACE_PATH = "combee_fast.optimizing.kind:ACE_ON_ROWS"
"""The learners' names in a run's configuration."""


def rows_of(context: LearnContext, path: str) -> RowsTask:
    """The run's rows; :class:`ConfigError` for a run of another task."""
    task = context.task
    if not isinstance(task, RowsTask):
        raise ConfigError(f"learner {path} grades the rows of combee_fast.optimize(), not task {task.name!r}")
    return task


class GepaOnRows(GepaKind):
    """GEPA whose metric call is the user's (module docstring)."""

    def calls(self, context: LearnContext) -> MetricCalls:
        task = rows_of(context, PATH)
        return MetricCalls(task, context.calls, task.metric(context.calls))


GEPA_ON_ROWS = GepaOnRows()
"""The registered learner (module docstring)."""


class AceOnRows(AceKind):
    """ACE whose generator is the user's metric on the seed with the playbook (module docstring)."""

    def calls(self, context: LearnContext) -> MetricAceCalls:
        task = rows_of(context, ACE_PATH)
        return MetricAceCalls(task, context.calls, task.metric(context.calls), task.seed)


ACE_ON_ROWS = AceOnRows()
"""The registered ``combee-ace`` learner (module docstring)."""
