"""What one sandboxed command may use.

Every limit is a kernel resource limit, set by the first thing the sandbox runs, our own runner
script, before any command (:func:`shell_limits`: ``ulimit``, inherited by everything it starts):
CPU seconds per process (``RLIMIT_CPU``: SIGXCPU at the limit, SIGKILL one second later),
address space per process (``RLIMIT_AS``), processes of the sandbox's uid (``RLIMIT_NPROC``),
the largest file written (``RLIMIT_FSIZE``: SIGXFSZ past it; the command's output file is one of
them, so output past it stops the writer; its hard limit is the working directory's archive size, :attr:`Limits.state_bytes`, so a command that raises its
own limit writes at most that), no core files.
Disk (``disk_mb``) is the size of the working directory's tmpfs inside the sandbox, and the
wall clock of a command is the step's time limit.

Under root each sandbox runs as a uid of its own (:class:`UidPool`), so the process limit counts
that sandbox's processes alone, and a closed sandbox's uid is given back only once no process of
it is left (:func:`end_processes`). Another user cannot change uid: the limit is then raised by the
processes that user already runs (so that the user's other work does not use up the sandbox's
share), and it counts any process of that user started meanwhile.
"""

from __future__ import annotations

import os
import signal
import time

import msgspec

from combee_fast.config import SandboxConfig

MIB = 1024 * 1024
STATE_MARGIN = 4 * MIB
"""Bytes a working directory's archive may take beyond its disk (tar's headers and padding)."""


class Limits(msgspec.Struct, frozen=True):
    """The limits of one sandbox's commands, in the units the kernel takes."""

    cpu_s: int
    memory_bytes: int
    processes: int
    file_bytes: int
    output_bytes: int
    disk_bytes: int

    @property
    def state_bytes(self) -> int:
        """The largest archive of the working directory (its disk and a margin): the file-size
        hard limit, which only the sandbox's own export raises its soft limit to."""
        return max(self.file_bytes, self.disk_bytes + STATE_MARGIN)

    @classmethod
    def of(cls, config: SandboxConfig) -> Limits:
        return cls(config.cpu_s, config.memory_mb * MIB, config.max_processes, config.file_mb * MIB,
                   config.output_kb * 1024, config.disk_mb * MIB)


def user_processes(uid: int) -> int:
    """How many processes ``uid`` runs now (read from ``/proc``)."""
    return sum(1 for entry in os.scandir("/proc") if entry.name.isdigit() and _owner(entry) == uid)


def _live(uid: int) -> list[int]:
    """The processes of ``uid`` that are not zombies (a zombie holds no resource but its process
    slot, until its parent, or the host's init, reaps it)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and _owner(entry) == uid:
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as stat:
                    if stat.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                        found.append(int(entry.name))
            except OSError:
                continue
    return found


def live_processes(uid: int) -> int:
    """How many processes ``uid`` runs now that are not zombies."""
    return len(_live(uid))


def process_limit(limits: Limits, uid: int | None) -> int:
    """The process limit of a sandbox running as ``uid`` (None: as this process's own user,
    whose running processes are added to it)."""
    return limits.processes if uid is not None else limits.processes + user_processes(os.getuid())


def shell_limits(limits: Limits, processes: int) -> str:
    """The ``sh`` commands that set ``limits`` (and ``processes`` as the process limit) on the
    shell running them and so on everything it starts; the shell exits 96 if one cannot be set.
    (``ulimit -f`` counts 512-byte blocks, ``-v`` kibibytes.)"""
    return (f"ulimit -p {processes} && ulimit -v {limits.memory_bytes // 1024} && "
            f"ulimit -f {limits.state_bytes // 512} && ulimit -S -f {limits.file_bytes // 512} && "
            f"ulimit -t {limits.cpu_s + 1} && ulimit -S -t {limits.cpu_s} && ulimit -c 0 || exit 96")


def end_processes(uid: int, *, within_s: float) -> int:
    """Kill every live process of ``uid`` (a sandbox's own uid, under root) and wait until none is
    left or ``within_s`` passed; how many are left."""
    deadline = time.monotonic() + within_s
    while True:
        left = _live(uid)
        if not left or time.monotonic() > deadline:
            return len(left)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def _owner(entry: os.DirEntry[str]) -> int | None:
    try:
        return entry.stat().st_uid
    except OSError:
        return None


class UidPool:
    """The uids sandboxes run as under root: ``count`` of them from ``first``, each held by one
    open sandbox at a time. Elsewhere :meth:`take` gives None (the sandbox keeps the user's uid)."""

    def __init__(self, first: int, count: int) -> None:
        self.root = os.geteuid() == 0
        self._free = list(range(first + count - 1, first - 1, -1))

    def take(self) -> int | None:
        if not self.root:
            return None
        if not self._free:
            raise RuntimeError("every sandbox uid of this pool is in use")
        return self._free.pop()

    def give_back(self, uid: int | None) -> None:
        if uid is not None:
            self._free.append(uid)
