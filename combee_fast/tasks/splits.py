"""Split specs, JSONL row reading and split pinning, shared by every file-backed task.

A split spec is a split name optionally followed by a slice of its rows: ``"val"``,
``"val[0:200]"``, ``"val[:50]"``, ``"val[100:]"``. Slice bounds are non-negative and must lie
within the split (no silent clamping: a pinned experiment must get exactly the rows it names).

A row is one non-blank line of a JSONL file. Its pinned bytes are the line's exact bytes without
the line terminator (``\\n`` or ``\\r\\n``); a split's SHA-256 is taken over its selected rows,
each followed by ``\\n``. Blank lines are not rows and do not count; a UTF-8 byte-order mark at
the start of the file is not part of the first row.

Rows are read as a stream (:func:`iter_rows`) and only the selected ones are kept, so a split of
ten rows costs ten rows of memory whatever the file's size. Reading is bounded where it happens: a
file of at most :data:`~combee_fast.files.MAX_READ_BYTES`, a row of at most :data:`MAX_ROW_BYTES`
(more is a :class:`~combee_fast.errors.TaskDataError` naming the file and line), a selection of at
most :data:`MAX_SELECTED_ROWS` rows (more is a :class:`~combee_fast.errors.ConfigError` saying to
give a slice): a loaded split takes a few hundred bytes per row beyond its data, so this bounds
it to a few hundred MB over the data's own size.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Mapping, NamedTuple

from combee_fast.errors import ConfigError
from combee_fast.errors import TaskDataError
from combee_fast.files import open_regular, refuse_larger
from combee_fast.tasks.base import SplitManifest

MAX_ROW_BYTES = 16 * 2**20
"""Most bytes of one row (one line of a JSONL file)."""

MAX_SELECTED_ROWS = 1_000_000
"""Most rows one split spec may select (module docstring)."""

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


def iter_rows(path: Path) -> Iterator[RawRow]:
    """Every non-blank line of ``path`` with its line number, read as it goes; raise
    :class:`TaskDataError` if it is unreadable, larger than
    :data:`~combee_fast.files.MAX_READ_BYTES`, or has a row over :data:`MAX_ROW_BYTES`."""
    try:
        file = open_regular(path)
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    with file:
        try:
            refuse_larger(path, os.fstat(file.fileno()).st_size)
        except OSError as exc:
            raise _unreadable(path, exc) from exc
        number = 0
        while line := file.readline(MAX_ROW_BYTES + 2):
            number += 1
            if number == 1:
                line = line.removeprefix(b"\xef\xbb\xbf")
            line = line.removesuffix(b"\n").removesuffix(b"\r")
            if len(line) > MAX_ROW_BYTES:
                raise TaskDataError(str(path), number, f"the row is over {MAX_ROW_BYTES:,} bytes, the most of one row")
            if line.strip():
                yield RawRow(number, line)


def _unreadable(path: Path, exc: OSError) -> TaskDataError:
    return TaskDataError(str(path), None, f"cannot read file: {exc.strerror or exc}")


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
    seen = 0

    def split_rows() -> Iterator[RawRow]:
        nonlocal seen
        for seen, row in enumerate(iter_rows(split_file.path), start=1):
            if split_file.stop is not None and seen > split_file.stop:
                return
            if seen > split_file.first:
                yield row

    selected = pin_rows(task, parsed, split_file.path, split_rows())
    if split_file.stop is not None and seen < split_file.stop:
        raise TaskDataError(
            str(split_file.path), None,
            f"split {parsed.name!r} needs {split_file.stop} rows but the file has {seen}",
        )
    return selected


def pin_rows(task: str, parsed: SplitSpec, path: Path, split_rows: Iterable[RawRow]) -> SelectedRows:
    """The rows of ``parsed``'s slice of the named split ``split_rows`` (read from ``path``; only
    the slice's rows are kept), pinned; :class:`ConfigError` for a slice out of range."""
    start = 0 if parsed.start is None else parsed.start
    kept: list[RawRow] = []
    count = 0
    for count, row in enumerate(split_rows, start=1):
        if count > start and (parsed.stop is None or count <= parsed.stop):
            if len(kept) == MAX_SELECTED_ROWS:
                raise ConfigError(f"task {task!r}: split {parsed.name!r} selects over {MAX_SELECTED_ROWS:,} rows, "
                                  f"the most loaded at once: give a slice, e.g. "
                                  f"'{parsed.name}[{start}:{start + MAX_SELECTED_ROWS}]'")
            kept.append(row)
    end = count if parsed.stop is None else parsed.stop
    if not start <= end <= count:
        raise ConfigError(
            f"task {task!r}: slice [{start}:{end}] of split {parsed.name!r} is out of range "
            f"(the split has {count} rows)"
        )
    sliced = parsed.start is not None or parsed.stop is not None
    name = f"{parsed.name}[{start}:{end}]" if sliced else parsed.name
    manifest = SplitManifest(task=task, split=name, source=str(path), rows=len(kept), sha256=split_sha256(kept))
    indexed = tuple((start + offset, row) for offset, row in enumerate(kept))
    return SelectedRows(manifest, parsed.name, path, indexed)
