"""The pinned-split records every task returns (the Task protocol is in :mod:`combee_fast.protocols`).

A task loads named splits of examples and scores an answer to one example. A split's content is
pinned by a SHA-256 over the exact bytes of its selected rows (see :mod:`combee_fast.tasks.splits`);
a run records the :class:`SplitManifest` of every split it used and :func:`verify_split` refuses a
split whose content changed since.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import msgspec

from combee_fast.errors import ConfigError, SplitChangedError
from combee_fast.schema import Example


class Score(msgspec.Struct, frozen=True):
    """A grade: ``value`` in [0, 1] (1.0 = correct; anything less counts as not solved, a share
    of it as partial credit in the mean) and ``feedback``, what a grader would say about it. A
    task's :meth:`~combee_fast.protocols.tasks.Task.score` grades an answer with it, an
    environment's :meth:`~combee_fast.protocols.rollouts.Environment.check` an episode's final
    state. The learner reads ``feedback`` beside the attempt (ACE's reflector, GEPA's proposer,
    TextGrad's loss): say what is wrong without giving the answer away. (This is the "reward" of
    the docs; a ``value`` that is not a finite number fails the episode.)"""

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
