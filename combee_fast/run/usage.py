"""The per-split usage record: which run used which split for what, as a fact on disk.

The record is a JSON array of :class:`UsageEntry` in a file beside the experiment card
(``formula.toml`` -> ``formula.usage.json``). Each run appends its entries in one step: under an
exclusive lock on ``<record>.lock`` the record is read, extended and written back atomically
(temporary file, fsync, rename), so concurrent runs never lose each other's entries and a crash
leaves the old record or the new one. "Has the test split ever been used to tune" is then
answered by reading the record, not by trusting the card.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

from combee_fast.errors import ConfigError
from combee_fast.files import read_regular, write_atomic
from combee_fast.tasks.base import SplitManifest


class UsageEntry(msgspec.Struct, frozen=True):
    """One use of one split by one run: ``use`` is train, select, tune or report."""

    time: str  # UTC, ISO 8601, seconds
    run: str  # the run directory, or the command's description of itself
    command: str  # learn, eval, ...
    task: str
    split: str  # the split spec as loaded (slice included)
    role: str  # train, selection or test
    use: str
    rows: int
    sha256: str


def usage_path(card: str | Path) -> Path:
    """The usage record beside ``card``: same folder, ``<stem>.usage.json``."""
    card_path = Path(card)
    return card_path.with_name(f"{card_path.stem}.usage.json")


def read_usage(path: str | Path) -> list[UsageEntry]:
    """Every entry of the record at ``path`` (none when it does not exist yet)."""
    record = Path(path)
    if not record.exists():
        return []
    try:
        return msgspec.json.decode(read_regular(record), type=list[UsageEntry])
    except (OSError, msgspec.DecodeError) as exc:
        raise ConfigError(f"usage record {record}: unreadable: {exc}") from None


def append_usage(path: str | Path, entries: Sequence[UsageEntry]) -> None:
    """Append ``entries`` to the record at ``path`` atomically (created when missing)."""
    record = Path(path)
    with open(record.with_name(record.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            rows = read_usage(record) + list(entries)
            write_atomic(record, msgspec.json.format(msgspec.json.encode(rows), indent=2) + b"\n")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def usage_entry(manifest: SplitManifest, *, role: str, use: str, run: str, command: str) -> UsageEntry:
    """The entry saying that ``run`` (through ``command``) used the split ``manifest`` pins for ``use``."""
    return UsageEntry(
        time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), run=run, command=command, task=manifest.task,
        split=manifest.split, role=role, use=use, rows=manifest.rows, sha256=manifest.sha256,
    )


class SplitUsage(msgspec.Struct, frozen=True):
    """What a run under an experiment card needs to keep its usage record: where the record is,
    the split roles the card declares, the card's text (copied into the run directory as
    ``card.toml``), and how the run names itself in the record."""

    record: str
    roles: dict[str, str]
    card_text: str
    run: str
    command: str
