"""A user task from JSONL files: one example per line, with configurable field names and scorer.

Each non-blank line is a JSON object. ``input_field`` (a string) is the text the generator
answers; ``target_field`` (a string or a number) is the expected answer. Other top-level scalar
fields are kept in ``Example.meta`` as strings (numbers and booleans as JSON text). A malformed line
or a missing/mistyped field raises :class:`TaskDataError` naming file and line.

Splits: ``splits={"train": "a.jsonl", "val": "b.jsonl"}`` (the user's own), or ``path="all.jsonl"``
for one file: its rows are the split ``all`` (cut it with slice specs, e.g. ``"all[0:300]"``), and
are also dealt into ``train``, ``selection`` and ``test`` (:data:`HASH_SPLITS`) by the hash of
each row's content (its input and target, as :func:`~combee_fast.tasks.heldout.row_key` knows a
row), so a row lands in the same split whatever the file's order and equal rows never straddle two
splits; ``hash_splits=false`` leaves only ``all``. A data file that does not exist is refused when
the task is built, naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import orjson

from combee_fast.errors import ConfigError
from combee_fast.schema import Example
from combee_fast.errors import TaskDataError
from combee_fast.tasks.base import Score, Split
from combee_fast.tasks.heldout import row_key
from combee_fast.tasks.scorers import Scorer, make_scorer
from combee_fast.tasks.splits import RawRow, SplitFile, SplitSpec, iter_rows, parse_split_spec, pin_rows, select_rows

SINGLE_SPLIT = "all"

HASH_SPLITS = (("train", 0.6), ("selection", 0.2), ("test", 0.2))
"""The splits a one-file task deals its rows into, each with its share of the rows (by content hash)."""

HASH_ROLES = {"train": "train", "selection": "selection", "test": "test", SINGLE_SPLIT: "selection"}
"""The held-out role of each split of a one-file task (``all`` holds test rows: it selects at most)."""


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
    for name, file in named.items():
        if not Path(file).exists():
            shown = "--data" if name == SINGLE_SPLIT else f"split {name!r}"
            raise ConfigError(f"task {task!r}: {shown} names {str(file)!r}, which does not exist")
    return {name: SplitFile(Path(file)) for name, file in named.items()}


def hash_share(key: str) -> float:
    """Where a row's content hash (hex) falls in [0, 1): what :data:`HASH_SPLITS` deals by."""
    return int(key[:16], 16) / float(1 << 64)


def hash_split_of(key: str) -> str:
    """The split of :data:`HASH_SPLITS` a row of content hash ``key`` (hex) is dealt into."""
    share, bound = hash_share(key), 0.0
    for name, fraction in HASH_SPLITS:
        bound += fraction
        if share < bound:
            return name
    return HASH_SPLITS[-1][0]


def _flag(value: bool | str) -> bool:
    """A boolean task option, given as a bool (a config file) or as text (``--task-option``)."""
    if isinstance(value, bool):
        return value
    if value.strip().lower() in ("true", "yes", "1", "on"):
        return True
    if value.strip().lower() in ("false", "no", "0", "off"):
        return False
    raise ConfigError(f"task option hash_splits must be true or false, got {value!r}")


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
        hash_splits: bool | str = True,
        **scorer_options: Any,
    ) -> None:
        self.name = name
        self._files = split_files(name, path, splits)
        self._hashed = path is not None and _flag(hash_splits)
        if self._hashed:
            self.split_roles = HASH_ROLES
        self.input_field = input_field
        self.target_field = target_field
        self._scorer: Scorer = make_scorer(scorer, **scorer_options)

    def split_names(self) -> tuple[str, ...]:
        return (*(name for name, _ in HASH_SPLITS), *self._files) if self._hashed else tuple(self._files)

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
        parsed = parse_split_spec(split, task=self.name)
        if self._hashed and parsed.name in dict(HASH_SPLITS):
            return self._load_hashed(parsed)
        selected = select_rows(self.name, split, self._files)
        examples = tuple(self._example(selected.path, row, index, selected.name) for index, row in selected.rows)
        return Split(selected.manifest, examples)

    def _load_hashed(self, parsed: SplitSpec) -> Split:
        """Split ``parsed`` (a name of :data:`HASH_SPLITS`, maybe sliced): the file's rows whose
        content hash falls in its share, in file order."""
        path = self._files[SINGLE_SPLIT].path
        rows = (row for row in iter_rows(path)
                if hash_split_of(row_key(self._example(path, row, 0, parsed.name))) == parsed.name)
        selected = pin_rows(self.name, parsed, path, rows)
        examples = tuple(self._example(path, row, index, parsed.name) for index, row in selected.rows)
        return Split(selected.manifest, examples)

    def rollout_source(self) -> None:
        """Examples only: the learner generates its own rollouts."""
        return None

    def score(self, example: Example, answer: str | None) -> Score:
        if example.target is None:
            raise ValueError(f"{self.name} example {example.id} has no target")
        return self._scorer.score(answer, example.target)
