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

Under root each sandbox runs as a uid of its own (:class:`UidPool`: leased across processes, so
no two runs share one, and never one a process of the host runs as), so the process limit counts
that sandbox's processes alone, and a closed sandbox's uid is given back only once no process of
it is left (:func:`processes_end`; the engine never signals a process by its uid). Another user cannot change uid: the limit is then raised by the
processes that user already runs (so that the user's other work does not use up the sandbox's
share), and it counts any process of that user started meanwhile.
"""

from __future__ import annotations

import fcntl
import grp
import os
import pwd
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


def processes_end(uid: int, *, within_s: float) -> int:
    """Wait until ``uid`` (a closed sandbox's own uid, under root) runs no live process, at most
    ``within_s``; how many are left. Nothing is signalled: every process the sandbox started was
    in its pid namespace and died with its init, so one still running as ``uid`` is not the run's
    (its uid is then retired, never used again by this pool)."""
    deadline = time.monotonic() + within_s
    while True:
        left = _live(uid)
        if not left or time.monotonic() > deadline:
            return len(left)
        time.sleep(0.01)


def _owner(entry: os.DirEntry[str]) -> int | None:
    try:
        return entry.stat().st_uid
    except OSError:
        return None


LEASES = "/run/combee-uids"
"""Where sandbox uids are leased under root (one lock file per uid, held while a pool holds the
uid; the kernel lets the lock go when the pool's process ends, however it ends)."""

SEARCH_SPAN = 1 << 16
"""How many uids past its first a pool looks through for free ones."""


class UidPool:
    """The uids sandboxes run as under root: at most ``count`` of them, each held by one open
    sandbox at a time, taken from ``first`` on. A uid is taken only when no other pool of any
    process holds it (an ``flock`` lease in :data:`LEASES`), no process runs as it and no user
    or group of this system has it, so two runs (and Ray actors on one node) never share a uid
    and no sandbox runs as a uid of the host's. Elsewhere :meth:`take` gives None (the sandbox
    keeps the user's uid)."""

    def __init__(self, first: int, count: int) -> None:
        self.root = os.geteuid() == 0
        self._first = first
        self._count = count
        self._next = first
        self._leases: dict[int, int] = {}  # uid -> its lease's file descriptor
        self._free: list[int] = []  # leased and not in use

    def take(self) -> int | None:
        if not self.root:
            return None
        if self._free:
            return self._free.pop()
        if len(self._leases) >= self._count:
            raise RuntimeError("every sandbox uid of this pool is in use")
        return self._lease()

    def _lease(self) -> int:
        os.makedirs(LEASES, mode=0o700, exist_ok=True)
        for uid in range(self._next, self._first + SEARCH_SPAN):
            if _known(uid) or user_processes(uid):
                continue
            fd = os.open(f"{LEASES}/{uid}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another pool holds it
                os.close(fd)
                continue
            if user_processes(uid):  # one started as it between the look and the lease
                os.close(fd)
                continue
            self._leases[uid] = fd
            self._next = uid + 1
            return uid
        raise RuntimeError(f"no free sandbox uid from {self._first} to {self._first + SEARCH_SPAN - 1}")

    def give_back(self, uid: int | None) -> None:
        if uid is not None:
            self._free.append(uid)


def _known(uid: int) -> bool:
    """Whether a user or group of this system has ``uid`` as its id (``/etc/passwd``, systemd's
    dynamic users...)."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False
