"""The working directory as data: the files a session starts with, and its final state.

A set-up is a list of :class:`SetupFile` (relative path, bytes, mode, modification time) written
as a tar archive the sandbox unpacks. The final state is read back as a :class:`WorkState` from
the tar stream the sandbox writes (:func:`state_from_tar`) or from a folder (:func:`state_of_folder`):
regular files with their bytes and modes, folders, and symbolic links by their target text. Both
readers stay inside the working directory: a member with an absolute path or ``..`` is refused,
no link is followed, and at most :data:`MAX_MEMBERS` entries and a given number of bytes are read.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import msgspec

from combee_fast.errors import SandboxError

MAX_MEMBERS = 10_000
"""Most entries a final state holds; more is an error of the session."""


class SetupFile(msgspec.Struct, frozen=True):
    """One file a session starts with (:meth:`~combee_fast.sandbox.sessions.Sandboxes.open`):
    ``path`` relative to the working directory (folders are made as needed; an absolute path or
    one with ``..`` is refused), its bytes, its permission bits (``0o755`` for a script), and how
    many seconds before the session's start it was last modified (for tasks about file ages)."""

    path: str
    data: bytes
    permissions: int = 0o644
    age_s: float = 0.0


class WorkState(msgspec.Struct, frozen=True):
    """A working directory at the end of an episode: regular files (relative path -> bytes),
    their modes, folders, and symbolic links (path -> target, never followed)."""

    files: dict[str, bytes]
    modes: dict[str, int]
    folders: tuple[str, ...] = ()
    links: dict[str, str] = msgspec.field(default_factory=dict)

    def text(self, path: str) -> str | None:
        """The file at ``path`` as text (invalid bytes replaced), None when there is none."""
        data = self.files.get(path)
        return None if data is None else data.decode("utf-8", errors="replace")


def safe_relative(path: str) -> str:
    """``path`` normalised relative to the working directory; ValueError if it leaves it."""
    pure = PurePosixPath(path)
    parts = [part for part in pure.parts if part not in ("", ".")]
    if pure.is_absolute() or ".." in parts or not parts:
        raise ValueError(f"path {path!r} is not inside the working directory")
    return "/".join(parts)


def setup_archive(files: Sequence[SetupFile], *, now: float | None = None) -> bytes:
    """The tar archive of ``files`` (folders created as needed), modification times set from
    ``now`` (default: the current time) minus each file's age."""
    now = time.time() if now is None else now
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        folders: set[str] = set()
        for file in files:
            path = safe_relative(file.path)
            for depth in range(1, len(path.split("/"))):
                folder = "/".join(path.split("/")[:depth])
                if folder not in folders:
                    folders.add(folder)
                    info = tarfile.TarInfo(folder)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(now)
                    archive.addfile(info)
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(file.data), file.permissions, int(now - file.age_s)
            archive.addfile(info, io.BytesIO(file.data))
    return buffer.getvalue()


def state_from_tar(data: bytes) -> WorkState:
    """The state a tar stream of the working directory holds; :class:`SandboxError` if unsafe."""
    files: dict[str, bytes] = {}
    modes: dict[str, int] = {}
    folders: list[str] = []
    links: dict[str, str] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for count, member in enumerate(archive):
                if count >= MAX_MEMBERS:
                    raise SandboxError(f"the working directory holds more than {MAX_MEMBERS} entries")
                if member.name in (".", "./"):
                    continue
                try:
                    path = safe_relative(member.name)
                except ValueError as exc:
                    raise SandboxError(str(exc)) from None
                if member.isdir():
                    folders.append(path)
                elif member.issym() or member.islnk():
                    links[path] = member.linkname
                elif member.isfile():
                    extracted = archive.extractfile(member)
                    files[path] = extracted.read() if extracted is not None else b""
                    modes[path] = member.mode & 0o7777
    except tarfile.TarError as exc:
        raise SandboxError(f"unreadable state of the working directory: {exc}") from None
    return WorkState(files, modes, tuple(sorted(folders)), links)


def state_of_folder(root: Path, *, max_bytes: int) -> WorkState:
    """The state of the folder ``root`` (no link followed; at most ``max_bytes`` of file data)."""
    files: dict[str, bytes] = {}
    modes: dict[str, int] = {}
    folders: list[str] = []
    links: dict[str, str] = {}
    total = 0
    for folder, names, leaves in os.walk(root, followlinks=False):
        base = Path(folder)
        for name in [*names, *leaves]:
            path = base / name
            relative = path.relative_to(root).as_posix()
            info = path.lstat()
            if len(files) + len(folders) + len(links) >= MAX_MEMBERS:
                raise SandboxError(f"the working directory holds more than {MAX_MEMBERS} entries")
            if stat.S_ISLNK(info.st_mode):
                links[relative] = os.readlink(path)
            elif stat.S_ISDIR(info.st_mode):
                folders.append(relative)
            elif stat.S_ISREG(info.st_mode):
                total += info.st_size
                if total > max_bytes:
                    raise SandboxError(f"the working directory holds more than {max_bytes} bytes")
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as handle:
                    files[relative] = handle.read()
                modes[relative] = info.st_mode & 0o7777
    return WorkState(files, modes, tuple(sorted(folders)), links)
