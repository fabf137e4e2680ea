"""The host-side folders of sandboxes: where they are made, and the sweep of those a killed
process left behind.

A folder is named ``<kind>-<pid>-<random>``, after the process that made it, which removes it
when its sandbox closes, and at its exit removes every folder it made that is still there (a
run stopped with its sandboxes in flight: nothing of this process uses them once it exits; its
sandboxes die with it). A process killed with SIGKILL cannot; :func:`sweep_abandoned` (run by
:meth:`~combee_fast.sandbox.sessions.Sandboxes.check`, before a process opens its first sandbox)
removes the folders of this kind, owned by this user, whose process is gone. A folder made by a
process of another pid namespace that shares the same folder (a container given the host's
``/dev/shm``) would look abandoned: do not share it between pid namespaces.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

SHM = "/dev/shm"

SANDBOX_KIND = "combee-sandbox"
"""The folders of bubblewrap sandboxes (in memory where it can be)."""

TRUSTED_KIND = "combee-trusted"
"""The folders of ``--sandbox none`` sessions (the system's temporary folder)."""


def scratch_folder() -> str | None:
    """Where sandboxes keep their host-side files: ``/dev/shm`` (memory) when it is writable, else
    the system's temporary folder (None). Removing files from a disk mounted with ``discard``
    costs milliseconds each; each sandbox's files there are bounded by the file-size hard limit."""
    return SHM if os.access(SHM, os.W_OK) else None


_MADE: set[tuple[str, str | None]] = set()
"""The kinds and parents this process made folders of (removed at its exit)."""


def new_folder(kind: str, parent: str | None) -> Path:
    """A new empty folder of ``kind`` for this process (mode 0700), in ``parent`` (None: the
    temporary folder); removed at the process's exit if it is still there."""
    if not _MADE:
        atexit.register(remove_own)
    _MADE.add((kind, parent))
    return Path(tempfile.mkdtemp(prefix=f"{kind}-{os.getpid()}-", dir=parent))


def remove_own() -> int:
    """Remove the folders this process made that are still there; how many."""
    removed = 0
    for kind, parent in _MADE:
        for path in Path(parent or tempfile.gettempdir()).glob(f"{kind}-{os.getpid()}-*"):
            if not path.is_symlink() and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
                removed += 1
    return removed


def sweep_abandoned(kind: str, parent: str | None) -> int:
    """Remove the folders of ``kind`` in ``parent`` (None: the temporary folder) that belong to
    this user and whose process is gone; how many were removed."""
    removed = 0
    for path in Path(parent or tempfile.gettempdir()).glob(f"{kind}-*-*"):
        pid = path.name[len(kind) + 1:].partition("-")[0]
        try:
            mine = path.lstat().st_uid == os.getuid() and path.is_dir() and not path.is_symlink()
        except OSError:  # gone meanwhile
            continue
        if pid.isdigit() and mine and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True
