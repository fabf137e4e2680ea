"""Tasks: where examples come from and how answers are scored.

Built in: ``formula`` and ``finer`` (ACE's finance splits, bundled), ``jsonl`` (your own files),
``traces`` (already-collected agent trajectories) and ``terminal`` (shell chores an agent solves in
a sandbox: :mod:`.terminal`); with the ``tau2`` extra, ``tau2-retail`` and ``tau2-airline``
(tau2-bench's domains over MCP, registered by entry point: :mod:`.tau2`). Every split is pinned by
a content hash.

- :mod:`.formula`, :mod:`.finer`, :mod:`.jsonl`, :mod:`.traces`, :mod:`.terminal`: one task each;
  :mod:`.registry`: tasks by name.
- :mod:`.base`: examples, splits, scores, split manifests; :mod:`.splits`: split specs, row
  reading and pinning; :mod:`.ace_format`: ACE's JSONL rows.
- :mod:`.heldout`: every split's role, and the refusal to select or tune on a test split.
- :mod:`.scorers`: exact, numeric and regex scorers; :mod:`.numbers`: numbers read exactly.
"""

from combee_fast.errors import TaskDataError
from combee_fast.protocols.tasks import Task
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
