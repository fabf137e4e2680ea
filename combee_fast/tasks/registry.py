"""Tasks by name (``task.name``): the built-in ones, and a plugin's (:mod:`combee_fast.plugins`).

A task is named by a built-in name (``formula``, ``finer``, ``jsonl``, ``traces``, ``terminal``),
by the name of an entry point of group ``combee_fast.tasks`` of an installed package, or by a
``package.module:factory`` path; either names a factory of a
:class:`~combee_fast.protocols.tasks.Task` called with the task's options.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from combee_fast.plugins import TASKS_GROUP, Registry, adopt_callable
from combee_fast.protocols.tasks import Task
from combee_fast.tasks.base import build_named

TASKS: Registry[Callable[..., Any]] = Registry("task", TASKS_GROUP, {
    "formula": "combee_fast.tasks.formula:FormulaTask",
    "finer": "combee_fast.tasks.finer:FinerTask",
    "jsonl": "combee_fast.tasks.jsonl:JsonlTask",
    "traces": "combee_fast.tasks.traces:TracesTask",
    "terminal": "combee_fast.tasks.terminal.task:TerminalTask",
}, adopt_callable("task"))
"""Every task factory, by name (module docstring)."""


def get_task(name: str, **options: Any) -> Task:
    """The task ``name`` built with its keyword ``options``; :class:`ConfigError` if unknown or bad.

    ``formula``/``finer``: ``data_dir``, ``test_file`` (an external test split in the same format). ``jsonl``: ``path`` or ``splits``, ``input_field``,
    ``target_field``, ``scorer`` (``exact``/``numeric``/``regex``) and the scorer's options
    (``case_sensitive``; ``decimals``/``tolerance``; ``ignore_case``). ``traces``: ``path`` or
    ``splits``, ``scorer`` and its options. ``terminal``: ``data_dir``, ``test_file``,
    ``tool_wait_s``. A plugin's task: the options its factory takes.
    """
    task: Task = build_named("task", name, {name: TASKS.load(name)}, options)
    return task


def task_option(text: str) -> tuple[str, str]:
    """argparse type of ``--task-option KEY=VALUE``: the pair."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE, got {text!r}")
    return key, value
