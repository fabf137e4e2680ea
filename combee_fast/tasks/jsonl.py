"""A user task from JSONL files: one example per line, with configurable field names and scorer.

Each non-blank line is a JSON object. ``input_field`` (a string) is the text the generator
answers; ``target_field`` (a string or a number) is the expected answer. Other top-level scalar
fields are kept in ``Example.meta`` as strings (numbers and booleans as JSON text). A malformed line
or a missing/mistyped field raises :class:`TaskDataError` naming file and line.

Splits: ``splits={"train": "a.jsonl", "val": "b.jsonl"}``, or ``path="all.jsonl"`` for a single
split named ``all`` (cut it with slice specs, e.g. ``"all[0:300]"`` and ``"all[300:500]"``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import orjson

from combee_fast.errors import ConfigError
from combee_fast.schema import Example
from combee_fast.errors import TaskDataError
from combee_fast.tasks.base import Score, Split
from combee_fast.tasks.scorers import Scorer, make_scorer
from combee_fast.tasks.splits import RawRow, SplitFile, select_rows

SINGLE_SPLIT = "all"


def json_type(value: Any) -> str:
    """The JSON name of ``value``'s type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)


def decode_object(path: Path, row: RawRow) -> dict[str, Any]:
    """Decode one row as a JSON object; raise :class:`TaskDataError` naming file and line."""
    try:
        value = orjson.loads(row.data)
    except orjson.JSONDecodeError as exc:
        raise TaskDataError(str(path), row.line, f"invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise TaskDataError(str(path), row.line, f"expected a JSON object, got {json_type(value)}")
    return value


def split_files(task: str, path: str | Path | None, splits: Mapping[str, str | Path] | None) -> dict[str, SplitFile]:
    """The split files of a file-backed task from exactly one of ``path`` / ``splits``."""
    if (path is None) == (splits is None):
        raise ConfigError(f"task {task!r}: give exactly one of path= (one split {SINGLE_SPLIT!r}) or splits=")
    named = {SINGLE_SPLIT: path} if path is not None else dict(splits or {})
    if not named:
        raise ConfigError(f"task {task!r}: splits= is empty")
    return {name: SplitFile(Path(file)) for name, file in named.items()}


class JsonlTask:
    """Examples from the user's JSONL files, scored by ``exact``, ``numeric`` or ``regex``."""

    def __init__(
        self,
        *,
        path: str | Path | None = None,
        splits: Mapping[str, str | Path] | None = None,
        input_field: str = "input",
        target_field: str = "target",
        scorer: str = "exact",
        name: str = "jsonl",
        **scorer_options: Any,
    ) -> None:
        self.name = name
        self._files = split_files(name, path, splits)
        self.input_field = input_field
        self.target_field = target_field
        self._scorer: Scorer = make_scorer(scorer, **scorer_options)

    def split_names(self) -> tuple[str, ...]:
        return tuple(self._files)

    def _example(self, path: Path, row: RawRow, index: int, split: str) -> Example:
        record = decode_object(path, row)
        for field in (self.input_field, self.target_field):
            if field not in record:
                raise TaskDataError(str(path), row.line, f"missing field {field!r}")
        question = record[self.input_field]
        if not isinstance(question, str):
            raise TaskDataError(
                str(path), row.line, f"field {self.input_field!r} must be a string, got {json_type(question)}"
            )
        target = record[self.target_field]
        if isinstance(target, (int, float)) and not isinstance(target, bool):
            target = orjson.dumps(target).decode()
        if not isinstance(target, str):
            raise TaskDataError(
                str(path), row.line,
                f"field {self.target_field!r} must be a string or a number, got {json_type(target)}",
            )
        problem = self._scorer.target_problem(target)
        if problem is not None:
            raise TaskDataError(str(path), row.line, problem)
        meta = {
            key: value if isinstance(value, str) else orjson.dumps(value).decode()
            for key, value in record.items()
            if key not in (self.input_field, self.target_field) and isinstance(value, (str, int, float, bool))
        }
        return Example(index, question, target, split, meta)

    def load(self, split: str) -> Split:
        selected = select_rows(self.name, split, self._files)
        examples = tuple(self._example(selected.path, row, index, selected.name) for index, row in selected.rows)
        return Split(selected.manifest, examples)

    def rollout_source(self) -> None:
        """Examples only: the learner generates its own rollouts."""
        return None

    def score(self, example: Example, answer: str | None) -> Score:
        if example.target is None:
            raise ValueError(f"{self.name} example {example.id} has no target")
        return self._scorer.score(answer, example.target)
