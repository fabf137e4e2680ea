"""Writing files so that a crash never leaves half of one, with one mode for every file written;
reading the files a user names so that none can hang the process or fill its memory.

Every file this package writes (playbooks, run-directory JSON and JSONL files) gets mode
:data:`FILE_MODE` and every folder it creates :data:`DIR_MODE`, whatever the process umask or
the way the file was written (atomic rename or append).

Every file read on a user's word (data files, configs, cards, playbooks, caches, run files) is
opened with :func:`open_regular` or read with :func:`read_regular`: it must be a regular file
(a device such as ``/dev/zero``, a FIFO, a socket or a folder is refused at once, never waited
on), and :func:`read_regular` reads at most :data:`MAX_READ_BYTES`. Refusals are ``OSError``
exceptions whose ``strerror`` says why, so every caller's "cannot read" line names the file and
the reason.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, BinaryIO

FILE_MODE = 0o644
DIR_MODE = 0o755
MAX_READ_BYTES = 2**30
"""Most bytes :func:`read_regular` reads of one file (a data file, config, card, playbook)."""

READ_CHUNK_BYTES = 1 << 20
"""Bytes :func:`read_regular` reads at a time."""

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for binary reads, if it is a regular file; else ``OSError`` saying what it is."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once rather than waiting for a writer
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise OSError(errno.EINVAL, f"{kind}, not a regular file", os.fspath(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int = MAX_READ_BYTES) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit``; ``OSError`` when it is not a
    regular file or is larger."""
    chunks, size = [], 0
    with open_regular(path) as file:
        while chunk := file.read(READ_CHUNK_BYTES):  # not read(limit + 1), which reserves the whole limit
            chunks.append(chunk)
            size += len(chunk)
            refuse_larger(path, size, limit)
    return b"".join(chunks)


def refuse_larger(path: str | os.PathLike[str], size: int, limit: int = MAX_READ_BYTES) -> None:
    """``OSError`` (``EFBIG``) naming ``path`` when ``size`` bytes are more than ``limit``."""
    if size > limit:
        raise OSError(errno.EFBIG, f"larger than {limit:,} bytes, the most read of one file", os.fspath(path))


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
