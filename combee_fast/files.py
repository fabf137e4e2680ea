"""Writing files so that a crash never leaves half of one, with one mode for every file written.

Every file this package writes (playbooks, run-directory JSON and JSONL files) gets mode
:data:`FILE_MODE` and every folder it creates :data:`DIR_MODE`, whatever the process umask or
the way the file was written (atomic rename or append).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO

FILE_MODE = 0o644
DIR_MODE = 0o755


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder, flushed to
    disk, then renamed over ``path``. A crash leaves either the old file or the new one. The file
    gets :data:`FILE_MODE` (``mkstemp`` alone would leave 0600)."""
    target = Path(path)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as tmp:
            os.fchmod(tmp.fileno(), FILE_MODE)
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def open_append(path: str | os.PathLike[str]) -> IO[bytes]:
    """``path`` opened for binary appends (created if missing), with :data:`FILE_MODE`."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        return os.fdopen(fd, "ab")
    except BaseException:
        os.close(fd)
        raise
