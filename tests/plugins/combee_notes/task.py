"""A task of its own: :func:`glossary`, capital cities (``data/glossary_*.jsonl``), answered
exactly. Named ``--task combee_notes.task:glossary`` or, installed, ``--task glossary``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from combee_fast.tasks.jsonl import JsonlTask

DATA = Path(__file__).parent / "data"


def glossary(**options: Any) -> JsonlTask:
    """The glossary task: splits ``train``, ``val`` and ``test``; ``options`` are the exact
    scorer's (``case_sensitive``)."""
    splits = {name: DATA / f"glossary_{name}.jsonl" for name in ("train", "val", "test")}
    return JsonlTask(splits=splits, input_field="question", target_field="answer", scorer="exact", name="glossary",
                     **options)
