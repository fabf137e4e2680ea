"""Split specs, JSONL row reading and split pinning, shared by every file-backed task.

A split spec is a split name optionally followed by a slice of its rows: ``"val"``,
``"val[0:200]"``, ``"val[:50]"``, ``"val[100:]"``. Slice bounds are non-negative and must lie
within the split (no silent clamping: a pinned experiment must get exactly the rows it names).

A row is one non-blank line of a JSONL file. Its pinned bytes are the line's exact bytes without
the line terminator (``\\n`` or ``\\r\\n``); a split's SHA-256 is taken over its selected rows,
each followed by ``\\n``. Blank lines are not rows and do not count; a UTF-8 byte-order mark at
the start of the file is not part of the first row.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Mapping, NamedTuple

from combee_fast.errors import ConfigError
from combee_fast.errors import TaskDataError
from combee_fast.files import read_regular
from combee_fast.tasks.base import SplitManifest

_SPEC = re.compile(r"(?P<name>[A-Za-z0-9_.\-]+)(?:\[(?P<start>\d*):(?P<stop>\d*)\])?")


class SplitFile(NamedTuple):
    """Where a named split lives: rows ``[first:stop]`` of a JSONL file (``stop=None``: to the end)."""

    path: Path
    first: int = 0
    stop: int | None = None


class RawRow(NamedTuple):
    """One row of a JSONL file: 1-based physical line number and its bytes without terminator."""

    line: int
    data: bytes


class SelectedRows(NamedTuple):
    """The rows a split spec selected, each with its index within the named split."""

    manifest: SplitManifest
    name: str  # the split name without slice
    path: Path
    rows: tuple[tuple[int, RawRow], ...]


class SplitSpec(NamedTuple):
    name: str
    start: int | None
    stop: int | None


def parse_split_spec(spec: str, *, task: str) -> SplitSpec:
    """Parse ``name`` or ``name[start:stop]``; raise :class:`ConfigError` naming task and spec."""
    match = _SPEC.fullmatch(spec.strip())
    if match is None:
        raise ConfigError(
            f"task {task!r}: bad split spec {spec!r}; expected NAME or NAME[START:STOP], e.g. 'val[0:200]'"
        )
    start, stop = match["start"], match["stop"]
    return SplitSpec(match["name"], int(start) if start else None, int(stop) if stop else None)


def read_rows(path: Path) -> list[RawRow]:
    """Every non-blank line of ``path`` with its line number; raise :class:`TaskDataError` if unreadable."""
    try:
        data = read_regular(path)
    except OSError as exc:
        raise TaskDataError(str(path), None, f"cannot read file: {exc.strerror or exc}") from exc
    data = data.removeprefix(b"\xef\xbb\xbf")
    rows: list[RawRow] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            rows.append(RawRow(number, line))
    return rows


def split_sha256(rows: list[RawRow] | tuple[RawRow, ...]) -> str:
    """SHA-256 (hex) over the rows' bytes, each followed by a newline."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(row.data)
        digest.update(b"\n")
    return digest.hexdigest()


def select_rows(task: str, spec: str, files: Mapping[str, SplitFile]) -> SelectedRows:
    """Resolve ``spec`` against the task's split files, read the rows and pin them."""
    parsed = parse_split_spec(spec, task=task)
    split_file = files.get(parsed.name)
    if split_file is None:
        raise ConfigError(f"task {task!r} has no split {parsed.name!r}; splits: {', '.join(files)}")
    file_rows = read_rows(split_file.path)
    stop = len(file_rows) if split_file.stop is None else split_file.stop
    if stop > len(file_rows):
        raise TaskDataError(
            str(split_file.path), None,
            f"split {parsed.name!r} needs {stop} rows but the file has {len(file_rows)}",
        )
    return pin_rows(task, parsed, split_file.path, file_rows[split_file.first : stop])


def pin_rows(task: str, parsed: SplitSpec, path: Path, split_rows: list[RawRow]) -> SelectedRows:
    """The rows of ``parsed``'s slice of the named split ``split_rows`` (read from ``path``),
    pinned; :class:`ConfigError` for a slice out of range."""
    start = 0 if parsed.start is None else parsed.start
    end = len(split_rows) if parsed.stop is None else parsed.stop
    if not start <= end <= len(split_rows):
        raise ConfigError(
            f"task {task!r}: slice [{start}:{end}] of split {parsed.name!r} is out of range "
            f"(the split has {len(split_rows)} rows)"
        )
    sliced = parsed.start is not None or parsed.stop is not None
    name = f"{parsed.name}[{start}:{end}]" if sliced else parsed.name
    selected = split_rows[start:end]
    manifest = SplitManifest(
        task=task, split=name, source=str(path), rows=len(selected), sha256=split_sha256(selected)
    )
    indexed = tuple((start + offset, row) for offset, row in enumerate(selected))
    return SelectedRows(manifest, parsed.name, path, indexed)
