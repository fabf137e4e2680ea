"""The per-split usage record: which run used which split for what, as a fact on disk.

The record is a JSON array of :class:`UsageEntry` in a file of the state directory
(:func:`state_dir`: ``$COMBEE_STATE_DIR``, else ``$XDG_STATE_HOME/combee``, else
``~/.local/state/combee``), one per card: ``usage/<card name>-<hash of the card's absolute
path>.usage.json``, so records and their locks never land in the project's source tree beside the
card. Each run appends its entries in one step: under an
exclusive lock on ``<record>.lock`` the record is read, extended and written back atomically
(temporary file, fsync, rename), so concurrent runs never lose each other's entries and a crash
leaves the old record or the new one. "Has the test split ever been used to tune" is then
answered by reading the record, not by trusting the card.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
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


STATE_DIR_ENV = "COMBEE_STATE_DIR"
"""The environment variable naming the state directory (usage records and their locks)."""


def state_dir() -> Path:
    """Where combee keeps state that outlives a run: ``$COMBEE_STATE_DIR``, else
    ``$XDG_STATE_HOME/combee``, else ``~/.local/state/combee``."""
    if folder := os.environ.get(STATE_DIR_ENV):
        return Path(folder)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "combee"


def usage_path(card: str | Path) -> Path:
    """The usage record of ``card`` in the state directory (module docstring); its folder is
    created when missing."""
    card_path = Path(card).resolve()
    digest = hashlib.sha256(str(card_path).encode()).hexdigest()[:12]
    folder = state_dir() / "usage"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{card_path.stem}-{digest}.usage.json"


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
