"""Replacing a run directory by a new run, journaled so that a kill at any point is recoverable,
and the lock that keeps one process per run directory.

The swap of a staging folder ``S`` (``.<name>.starting-*``) into a run directory ``X``:

    journal   .<name>.swap beside X names S and the trash folder T, written (and synced) first
    aside     X -> T                 the previous folder, whole (one rename)
    in place  S -> X                 the new run, whole (one rename)
    keep      what T holds that is no run file (a user's notes) goes back into X
    done      T removed, then the journal

Every step is a rename or a removal whose effect is visible on disk, so :func:`carry_out` can
tell from the folders what is left to do, and a process killed anywhere leaves a state that
:func:`recover` (called by the next command on ``X``) finishes. Only when both S and X are gone
(someone removed them) is the swap rolled back (T -> X).

:func:`recover` also deals with staging folders of runs killed before they replaced anything
(no journal, their lock free): one that completed a step is kept as ``<name>.unswapped-*``,
others are removed. Each thing it does is said in one line (``notice``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from combee_fast.errors import ConfigError
from combee_fast.files import FILE_MODE

LOCK_FILE = ".lock"
STALE_START_S = 60.0
"""A staging folder without a lock file is another process's start only this long."""


class Journal(msgspec.Struct, frozen=True):
    """The staging folder being swapped in and the trash folder of the previous run (names of
    folders beside the run directory)."""

    staging: str
    trash: str


def journal_path(target: Path) -> Path:
    return target.parent / f".{target.name}.swap"


def take_lock(folder: Path, what: Path) -> int:
    """The open ``folder/.lock``, exclusively locked; :class:`ConfigError` naming ``what`` when
    another process holds it."""
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(f"run directory {what} is in use by another combee process") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def swap_in(staging: Path, target: Path, is_run_entry: Callable[[Path], bool]) -> None:
    """Replace ``target`` by ``staging`` (module docstring); ``is_run_entry(path)`` tells a run
    file or folder of the previous run (removed) from anything else in it (kept)."""
    journal = Journal(staging.name, f".{target.name}.replaced-{staging.name.rpartition('-')[2]}")
    fd = os.open(journal_path(target), os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:  # not renamed into place: a journal cut by a kill means nothing was moved yet
        os.write(fd, msgspec.json.encode(journal))
        os.fsync(fd)
    finally:
        os.close(fd)
    _sync(target.parent)
    carry_out(target, journal, is_run_entry)


def carry_out(target: Path, journal: Journal, is_run_entry: Callable[[Path], bool]) -> str:
    """Do what is left of the journaled swap into ``target``; ``"finished"`` or ``"rolled back"``."""
    staging, trash = target.parent / journal.staging, target.parent / journal.trash
    outcome = "finished"
    if staging.exists():
        if target.exists():
            os.rename(target, trash)
        os.rename(staging, target)
    elif not target.exists() and trash.exists():
        os.rename(trash, target)
        outcome = "rolled back"
    if trash.exists():
        for entry in trash.iterdir():
            if not is_run_entry(entry) and entry.name != LOCK_FILE and not (target / entry.name).exists():
                os.replace(entry, target / entry.name)
        shutil.rmtree(trash)
    _sync(target.parent)
    journal_path(target).unlink()
    return outcome


def recover(target: Path, is_run_entry: Callable[[Path], bool],
            notice: Callable[[str], None] | None = None) -> None:
    """Finish a swap into ``target`` that a kill interrupted, and put aside or remove the staging
    folders of runs killed before they started replacing it (module docstring). A swap being
    carried out by a live process is :class:`ConfigError` (in use)."""
    say = notice or _to_stderr
    path = journal_path(target)
    if path.exists():
        try:
            journal: Journal | None = msgspec.json.decode(path.read_bytes(), type=Journal)
        except msgspec.MsgspecError:
            journal = None  # cut while it was written: nothing was moved
        holder = target if journal is None or not (target.parent / journal.staging).exists() \
            else target.parent / journal.staging
        fd = take_lock(holder, target) if holder.exists() else None
        try:
            if journal is None:
                path.unlink()
                say(f"{target}: a replacement of its run was stopped before it began; the previous run is kept")
            else:
                outcome = carry_out(target, journal, is_run_entry)
                say(f"{target}: {outcome} the replacement of its previous run that a stopped process left half done")
        finally:
            if fd is not None:
                os.close(fd)
    for staging in sorted(target.parent.glob(f".{target.name}.starting-*")):
        fd = _free_lock(staging)
        if fd is None:
            continue
        try:
            if (staging / "ledger.jsonl").is_file() and (staging / "ledger.jsonl").stat().st_size:
                aside = unswapped_name(target)
                os.rename(staging, aside)
                say(f"{target}: a run stopped before it replaced the previous one is kept in {aside}")
            else:
                shutil.rmtree(staging)
        finally:
            os.close(fd)


def unswapped_name(target: Path) -> Path:
    """A free ``<name>.unswapped-<date-time>`` beside ``target``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate, n = target.parent / f"{target.name}.unswapped-{stamp}", 1
    while candidate.exists():
        n += 1
        candidate = target.parent / f"{target.name}.unswapped-{stamp}-{n}"
    return candidate


def _free_lock(staging: Path) -> int | None:
    """The locked ``.lock`` of a staging folder nobody holds, or None (held, or too young to tell)."""
    if not (staging / LOCK_FILE).exists():
        try:
            if time.time() - staging.stat().st_mtime < STALE_START_S:
                return None
        except FileNotFoundError:
            return None
    try:
        return take_lock(staging, staging)
    except (ConfigError, FileNotFoundError):
        return None


def _sync(folder: Path) -> None:
    """Make the renames in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _to_stderr(message: str) -> None:
    print(f"combee: {message}", file=sys.stderr, flush=True)
