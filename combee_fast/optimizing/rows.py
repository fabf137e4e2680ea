"""Plain Python rows as a task (:class:`~combee_fast.protocols.tasks.Task`): ``optimize``'s
trainset and valset.

A row is whatever the user's metric takes: a dict (gepa's default rows: ``input``, ``answer``,
``additional_context``), a string, any object. Split ``train`` holds the trainset's rows and
``val`` the valset's, in order (no slices); each is an :class:`~combee_fast.schema.Example` whose ``index``
is its position and whose ``input`` is the row's text (:func:`~.row_forms.row_text`): what a prompt shows of
it, and what a grading's record and a reflection show. The rows themselves stay with the task
(:meth:`RowsTask.row`), handed to the user's metric as they were given.

A split is pinned by the SHA-256 of its rows as JSON (:func:`~.row_forms.row_json`, keys sorted, values JSON
cannot hold written as their ``str``), so a run resumed with other rows is refused
(:class:`~combee_fast.errors.SplitChangedError`). Rows have no target: the user's metric grades
them (:meth:`RowsTask.score` raises, as the Task protocol says of an example without one).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from combee_fast.errors import ConfigError
from combee_fast.optimizing.row_forms import row_json, row_text
from combee_fast.schema import Example
from combee_fast.tasks.base import Score, Split, SplitManifest

if TYPE_CHECKING:
    from combee_fast.gepa.candidate import Candidate
    from combee_fast.optimizing.metric import MetricCall
    from combee_fast.roles.calls import RoleCalls

TRAIN, VAL = "train", "val"
"""The two splits of a :class:`RowsTask`."""

SOURCE = "optimize() rows in memory"
"""Where a rows split says it came from (its manifest's ``source``)."""


class RowsTask:
    """The rows ``train`` and ``val`` as a task (module docstring), ``metric``: what grades a
    candidate on one of them, built on a run's role calls (:mod:`.metric`), and ``seed``: the
    search's seed candidate."""

    name = "rows"
    split_roles = {TRAIN: "train", VAL: "selection"}

    def __init__(self, train: Sequence[Any], val: Sequence[Any], metric: Callable[[RoleCalls], MetricCall],
                 seed: Candidate) -> None:
        self.metric = metric
        self.seed = seed
        if not train:
            raise ConfigError("optimize: the trainset is empty")
        if not val:
            raise ConfigError("optimize: the valset is empty")
        self._rows = {TRAIN: tuple(train), VAL: tuple(val)}
        self._splits = {name: self._split(name, rows) for name, rows in self._rows.items()}

    def split_names(self) -> tuple[str, ...]:
        return TRAIN, VAL

    def load(self, split: str) -> Split:
        """Split ``split``: ``train`` or ``val``."""
        found = self._splits.get(split)
        if found is None:
            raise ConfigError(f"task {self.name!r}: no split {split!r}; choose {TRAIN} or {VAL}")
        return found

    def row(self, example: Example) -> Any:
        """The row ``example`` stands for, as the user gave it."""
        return self._rows[example.split][example.index]

    def rollout_source(self) -> None:
        """Rows only: the search grades its own candidates on them."""
        return None

    def score(self, example: Example, answer: str | None) -> Score:
        raise ValueError(f"row {example.id} has no target: optimize() grades rows with the user's metric")

    def _split(self, name: str, rows: tuple[Any, ...]) -> Split:
        examples = tuple(Example(index, row_text(row), None, name) for index, row in enumerate(rows))
        return Split(_manifest(self.name, name, rows), examples)


def _manifest(task: str, split: str, rows: Sequence[Any]) -> SplitManifest:
    digest = hashlib.sha256()
    for row in rows:
        digest.update(row_json(row) + b"\n")
    return SplitManifest(task, split, SOURCE, len(rows), digest.hexdigest())
