"""Held-out discipline: the role of every split, and the refusal to select or tune on a test split.

Three roles: ``train`` (the learner reads it), ``selection`` (pick the best playbook, tune the
batch size) and ``test`` (report only). A task may declare the roles of its split names in a
``split_roles`` mapping (the bundled Formula and FiNER tasks do); any other split is ``test``
when its name starts with ``test``, ``train`` when it starts with ``train``, else ``selection``.
A slice has the role of the split it cuts (``test[0:50]`` is ``test``). An experiment card may
declare roles of its own; it is passed here as ``declared`` and wins over the task's.
"""

from __future__ import annotations

from collections.abc import Mapping

from combee_fast.errors import ConfigError
from combee_fast.protocols import Task
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


def check_use(task: Task, spec: str, use: str, declared: Mapping[str, str] | None = None) -> str:
    """The role of ``spec``; :class:`ConfigError` (one line) when ``use`` is not allowed on it.

    A ``test`` split is for ``report`` only: selecting the best playbook on it, tuning the
    batch size on it or learning from it is refused.
    """
    if use not in USES:
        raise ValueError(f"unknown split use {use!r}; one of {', '.join(USES)}")
    role = split_role(task, spec, declared)
    if role == "test" and use != "report":
        doing, instead = {
            "train": ("learn from", "a train split (e.g. --train-split train)"),
            "tune": ("tune the batch size on", "a train split (e.g. --train-split train)"),
            "select": ("select the best playbook on", "a selection split (e.g. --val-split selection)"),
        }[use]
        raise ConfigError(
            f"task {task.name!r}: split {spec!r} has role test (report only); the engine does not {doing} it: "
            f"name {instead}"
        )
    return role
