"""Built-in tasks by name."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from combee_fast.protocols.tasks import Task
from combee_fast.tasks.base import build_named
from combee_fast.tasks.finer import FinerTask
from combee_fast.tasks.formula import FormulaTask
from combee_fast.tasks.jsonl import JsonlTask
from combee_fast.tasks.terminal.task import TerminalTask
from combee_fast.tasks.traces import TracesTask

TASKS: dict[str, Callable[..., Task]] = {
    "formula": FormulaTask,
    "finer": FinerTask,
    "jsonl": JsonlTask,
    "traces": TracesTask,
    "terminal": TerminalTask,
}


def get_task(name: str, **options: Any) -> Task:
    """The built-in task ``name`` built with its keyword ``options``; :class:`ConfigError` if unknown or bad.

    ``formula``/``finer``: ``data_dir``, ``test_file`` (an external test split in the same format). ``jsonl``: ``path`` or ``splits``, ``input_field``,
    ``target_field``, ``scorer`` (``exact``/``numeric``/``regex``) and the scorer's options
    (``case_sensitive``; ``decimals``/``tolerance``; ``ignore_case``). ``traces``: ``path`` or
    ``splits``, ``scorer`` and its options. ``terminal``: ``data_dir``, ``test_file``,
    ``tool_wait_s``.
    """
    return build_named("task", name, TASKS, options)


def task_option(text: str) -> tuple[str, str]:
    """argparse type of ``--task-option KEY=VALUE``: the pair."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE, got {text!r}")
    return key, value
