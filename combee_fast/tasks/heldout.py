"""Held-out discipline: the role of every split, and the refusal to select or tune on a test split.

Three roles: ``train`` (the learner reads it), ``selection`` (pick the best playbook, tune the
batch size) and ``test`` (report only). A task may declare the roles of its split names in a
``split_roles`` mapping (the bundled Formula and FiNER tasks do); any other split is ``test``
when its name starts with ``test``, ``train`` when it starts with ``train``, else ``selection``.
A slice has the role of the split it cuts (``test[0:50]`` is ``test``). An experiment card may
declare roles of its own; it is passed here as ``declared`` and wins over the task's.

Names are not enough: a split of another name may hold test rows (Formula's ``val`` holds all of
``test``). Splits are therefore also compared by content: each row is known by the hash of its
input and target (:func:`row_keys`), and :func:`check_disjoint` refuses to learn from, select on
or tune on a split sharing any row with one of the task's test splits, naming the overlap.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from combee_fast.errors import ConfigError
from combee_fast.protocols.tasks import Task
from combee_fast.schema import Example
from combee_fast.tasks.base import Split
from combee_fast.tasks.splits import parse_split_spec

SPLIT_ROLES = ("train", "selection", "test")
"""Every split role, in the order a run uses them."""

USES = ("train", "select", "tune", "report")
"""What a run does with a split: learn from it, pick the best playbook on it, tune the batch size
on it, or only report a score on it. Only ``report`` is allowed on a ``test`` split."""


def split_role(task: Task, spec: str, declared: Mapping[str, str] | None = None) -> str:
    """The role of split ``spec`` (a name, optionally sliced) of ``task``."""
    name = parse_split_spec(spec, task=task.name).name
    if declared and name in declared:
        return declared[name]
    roles: Mapping[str, str] = getattr(task, "split_roles", {})
    if name in roles:
        return roles[name]
    if name.startswith("test"):
        return "test"
    return "train" if name.startswith("train") else "selection"


_REFUSED = {
    "train": ("learn from", "a train split (e.g. --train-split train)"),
    "tune": ("tune the batch size on", "a train split (e.g. --train-split train)"),
    "select": ("select the best playbook on", "a selection split (e.g. --val-split selection)"),
}
"""Per refused use: what the engine would do, and what to name instead."""


CONTENT_META = "content"
"""The ``Example.meta`` key under which a task whose input and target do not hold a row's whole
content (a terminal chore: its set-up files and checks too) names that content (a hash of it)."""


def row_key(example: Example) -> str:
    """A row's identity by content: the SHA-256 of its input and target, and of the content its
    task names under :data:`CONTENT_META` when it names one."""
    content = example.meta.get(CONTENT_META)
    text = f"{example.input}\x00{example.target}" + (f"\x00{content}" if content is not None else "")
    return hashlib.sha256(text.encode()).hexdigest()


def row_keys(split: Split) -> frozenset[str]:
    """The content keys (:func:`row_key`) of every row of ``split``."""
    return frozenset(row_key(example) for example in split.examples)


def report_only_splits(task: Task, declared: Mapping[str, str] | None = None) -> list[str]:
    """The names of ``task``'s splits (and of the ``declared`` ones) whose role is test."""
    names = dict.fromkeys([*task.split_names(), *(declared or {})])
    return [name for name in names if split_role(task, name, declared) == "test"]


def check_disjoint(task: Task, split: Split, use: str, declared: Mapping[str, str] | None = None) -> None:
    """:class:`ConfigError` (one line naming the overlap) when ``split``, used for ``use`` (not
    ``report``), shares a row, by content, with one of ``task``'s test splits."""
    if use == "report" or not split.examples:
        return
    keys = row_keys(split)
    for name in report_only_splits(task, declared):
        test = task.load(name)
        shared = len(keys & row_keys(test))
        if shared:
            doing, instead = _REFUSED[use]
            raise ConfigError(
                f"task {task.name!r}: split {split.manifest.split!r} shares {shared} of its {len(keys)} rows with "
                f"test split {name!r} (report only; compared by content); the engine does not {doing} it: "
                f"name {instead} disjoint from the test split")


def check_use(task: Task, spec: str, use: str, declared: Mapping[str, str] | None = None) -> str:
    """The role of ``spec``; :class:`ConfigError` (one line) when ``use`` is not allowed on it.

    A ``test`` split is for ``report`` only: selecting the best playbook on it, tuning the
    batch size on it or learning from it is refused.
    """
    if use not in USES:
        raise ValueError(f"unknown split use {use!r}; one of {', '.join(USES)}")
    role = split_role(task, spec, declared)
    if role == "test" and use != "report":
        doing, instead = _REFUSED[use]
        raise ConfigError(
            f"task {task.name!r}: split {spec!r} has role test (report only); the engine does not {doing} it: "
            f"name {instead}"
        )
    return role
