"""Tasks: where examples come from and how answers are scored.

Built in: ``formula`` and ``finer`` (ACE's finance splits, bundled), ``jsonl`` (your own files)
and ``traces`` (already-collected agent trajectories). Every split is pinned by a content hash.
"""

from combee_fast.errors import TaskDataError
from combee_fast.protocols import Task
from combee_fast.tasks.base import Score, Split, SplitManifest, verify_split
from combee_fast.tasks.finer import FinerTask
from combee_fast.tasks.formula import FormulaTask
from combee_fast.tasks.jsonl import JsonlTask
from combee_fast.tasks.registry import TASKS, get_task
from combee_fast.tasks.traces import TracesTask

__all__ = [
    "TASKS",
    "FinerTask",
    "FormulaTask",
    "JsonlTask",
    "Score",
    "Split",
    "SplitManifest",
    "Task",
    "TaskDataError",
    "TracesTask",
    "get_task",
    "verify_split",
]
