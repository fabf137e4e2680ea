"""Rows of the ACE finance JSONL format: ``{"context": <prompt text>, "target": <answer>}``.

The bundled Formula and FiNER files live in ``combee_fast/tasks/data/`` (Apache-2.0, from the ACE
repository; the notice and licence text are beside them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import msgspec

from combee_fast.schema import Example
from combee_fast.errors import TaskDataError
from combee_fast.tasks.base import Split
from combee_fast.tasks.splits import RawRow, SplitFile, select_rows

DATA_DIR = Path(__file__).parent / "data"
"""The folder of the bundled data files."""


class AceRow(msgspec.Struct, frozen=True):
    context: str
    target: str


_DECODER = msgspec.json.Decoder(AceRow)


def decode_ace_row(path: Path, row: RawRow) -> AceRow:
    """Decode one row; raise :class:`TaskDataError` naming file and line when it is not ACE format."""
    try:
        return _DECODER.decode(row.data)
    except msgspec.DecodeError as exc:
        raise TaskDataError(str(path), row.line, f"not an ACE row {{'context': str, 'target': str}}: {exc}") from None


def load_ace_split(
    task: str, split: str, files: Mapping[str, SplitFile], meta_of: Callable[[AceRow], dict[str, str] | str]
) -> Split:
    """The examples of ``split`` (a spec such as ``"val[0:50]"``) of an ACE-format task.

    ``meta_of(row)`` gives an example's ``meta``, or a string saying why the row is unusable,
    which is raised as :class:`TaskDataError` naming the file and line.
    """
    selected = select_rows(task, split, files)
    examples = []
    for index, raw in selected.rows:
        row = decode_ace_row(selected.path, raw)
        meta = meta_of(row)
        if isinstance(meta, str):
            raise TaskDataError(str(selected.path), raw.line, meta)
        examples.append(Example(index, row.context, row.target, selected.name, meta))
    return Split(selected.manifest, tuple(examples))
