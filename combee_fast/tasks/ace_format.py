"""Rows of the ACE finance JSONL format: ``{"context": <prompt text>, "target": <answer>}``.

The bundled Formula and FiNER files live in ``combee_fast/tasks/data/`` (Apache-2.0, from the ACE
repository; the notice and licence text are beside them).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from combee_fast.tasks.base import TaskDataError
from combee_fast.tasks.splits import RawRow

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
