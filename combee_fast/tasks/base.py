"""The Task protocol and the pinned-split records every task returns.

A task loads named splits of examples and scores an answer to one example. A split's content is
pinned by a SHA-256 over the exact bytes of its selected rows (see :mod:`combee_fast.tasks.splits`);
a run records the :class:`SplitManifest` of every split it used and :func:`verify_split` refuses a
split whose content changed since.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

import msgspec

from combee_fast.errors import CombeeError, ConfigError, SplitChangedError
from combee_fast.schema import Example


class Score(msgspec.Struct, frozen=True):
    """A graded answer: ``value`` in [0, 1] (1.0 = correct) and what a grader would say about it."""

    value: float
    feedback: str


class SplitManifest(msgspec.Struct, frozen=True):
    """What pins a split: its task, split spec (slice included), source file, row count and hash."""

    task: str
    split: str
    source: str
    rows: int
    sha256: str


class Split(msgspec.Struct, frozen=True):
    """The examples of one split, in row order, with the manifest that pins them."""

    manifest: SplitManifest
    examples: tuple[Example, ...]


class TaskDataError(CombeeError):
    """A task's data file is unusable: names the file, the line (1-based) and the problem."""

    def __init__(self, path: str, line: int | None, problem: str) -> None:
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


@runtime_checkable
class Task(Protocol):
    """A source of examples and a grader of answers.

    ``load(split)`` accepts a split name (one of :meth:`split_names`) optionally followed by a
    slice of its rows, e.g. ``"val[0:200]"``; sliced examples keep their row index within the
    named split, so example ids stay stable. ``score`` never raises for a bad answer: an
    unusable answer (``None`` included) scores 0 with feedback saying why. It raises
    ``ValueError`` only for an example without a target (e.g. a trace without ground truth).
    """

    name: str

    def split_names(self) -> tuple[str, ...]: ...

    def load(self, split: str) -> Split: ...

    def score(self, example: Example, answer: str | None) -> Score: ...


def verify_split(split: Split, recorded: SplitManifest) -> None:
    """Raise :class:`SplitChangedError` unless ``split`` has the task, split spec and hash recorded."""
    current = split.manifest
    if (current.task, current.split) != (recorded.task, recorded.split):
        raise SplitChangedError(
            f"split mismatch: recorded task {recorded.task!r} split {recorded.split!r}, "
            f"loaded task {current.task!r} split {current.split!r}"
        )
    if current.sha256 != recorded.sha256 or current.rows != recorded.rows:
        raise SplitChangedError(
            f"task {current.task!r} split {current.split!r} changed since it was recorded: "
            f"recorded sha256 {recorded.sha256} ({recorded.rows} rows), "
            f"now sha256 {current.sha256} ({current.rows} rows) from {current.source}"
        )


T = TypeVar("T")


def build_named(kind: str, name: str, factories: Mapping[str, Callable[..., T]], options: Mapping[str, Any]) -> T:
    """``factories[name](**options)``; :class:`ConfigError` naming the ``kind`` for an unknown
    name or options the factory does not take."""
    factory = factories.get(name)
    if factory is None:
        raise ConfigError(f"unknown {kind} {name!r}; choose one of: {', '.join(factories)}")
    try:
        return factory(**options)
    except TypeError as exc:
        raise ConfigError(f"{kind} {name!r}: bad options {sorted(options)}: {exc}") from None
