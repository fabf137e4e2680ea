"""Which wall a failed command ran into, as one error kind (None: an ordinary failure).

The limits themselves are enforced by the kernel (:mod:`.limits`) and by the sandbox's view of
the system (:mod:`.bwrap`); this module only names what happened, from the command's exit status,
its elapsed time, the size of its output and what it printed. Kinds:

    step_timeout     killed at the step's wall-clock limit
    cpu_limit        killed for CPU time (SIGXCPU, or SIGKILL before the wall clock)
    output_limit     output reached the largest file size and the writer was stopped
    file_too_large   a file it wrote reached the largest file size (SIGXFSZ)
    disk_full        the working directory's disk is full
    process_limit    a fork failed: the process limit
    memory_limit     an allocation failed: the address-space limit
    network_denied   a connection failed: the sandbox has no network
    write_denied     a write outside the working directory (read-only system)
    hidden_path      a path outside the sandbox's view (``/etc/shadow``, ``/root``...)

A fork bomb usually ends at the wall clock too; a failed fork is named first. One that forks in
the background and returns at once is found by the process count of the sandbox's uid
(:func:`at_process_limit`, root only: elsewhere the uid is shared with the user's own processes)
or, when it hits the limit after its command returned, by the failed forks it printed, which
come with the next command's result (a result has all that was written since the last one:
:mod:`.bwrap`). One that an episode's last command started and that hits the limit only after
that command returned is named by no result (none follows; it dies with the sandbox).
"""

from __future__ import annotations

import re

import msgspec

KILLED = 128 + 9
CPU_SIGNAL = 128 + 24  # SIGXCPU
FILE_SIGNAL = 128 + 25  # SIGXFSZ

_SIGNATURES = (
    ("process_limit", re.compile(r"Cannot fork|fork: retry|fork failed|Resource temporarily unavailable", re.I)),
    ("disk_full", re.compile(r"No space left on device|Disk quota exceeded", re.I)),
    ("memory_limit", re.compile(r"Cannot allocate memory|MemoryError|memory exhausted|bad_alloc|Out of memory", re.I)),
    ("network_denied", re.compile(r"Network is unreachable|Temporary failure in name resolution|Name or service "
                                  r"not known|Could not resolve|Connection refused|getaddrinfo", re.I)),
    ("write_denied", re.compile(r"Read-only file system", re.I)),
    ("hidden_path", re.compile(r"(?<![\w.])/(?:etc|root|home|var|srv|opt|mnt|media|boot|sys|run/user)(?:/[^\s:'\"]*)?"
                               r"['\"]?: (?:No such file or directory|Permission denied|Directory nonexistent)", re.I)),
)


_FILE_TOO_LARGE = re.compile(r"File size limit exceeded", re.I)


def at_process_limit(uid: int | None, limit: int) -> bool:
    """Whether ``uid`` (a sandbox's own uid) runs as many processes as its limit allows."""
    from combee_fast.sandbox.limits import user_processes

    return uid is not None and user_processes(uid) >= limit - 1


def classify(exit_code: int, output: str, *, output_bytes: int, file_limit: int, elapsed_s: float,
             timeout_s: float) -> str | None:
    """The wall a command with this outcome ran into (module docstring), or None. A failed fork
    is named whatever the status (a fork bomb's processes outlive the command that started it)."""
    if _SIGNATURES[0][1].search(output):
        return _SIGNATURES[0][0]
    if exit_code == 0:
        return None
    if exit_code == FILE_SIGNAL:
        return "output_limit" if output_bytes >= file_limit else "file_too_large"
    if _FILE_TOO_LARGE.search(output):  # a shell reporting its child stopped by SIGXFSZ
        return "file_too_large"
    if exit_code == KILLED:
        return "step_timeout" if elapsed_s >= 0.9 * timeout_s else "cpu_limit"
    if exit_code == CPU_SIGNAL:
        return "cpu_limit"
    for kind, pattern in _SIGNATURES[1:]:
        if pattern.search(output):
            return kind
    return None


class CommandResult(msgspec.Struct, frozen=True):
    """One command's outcome: exit status, output (stdout and stderr together, the first
    ``output_kb`` of it), how many bytes it wrote in all, wall seconds, and the wall it hit
    (:func:`classify`; None: none)."""

    exit_code: int
    output: str
    output_bytes: int
    seconds: float
    kind: str | None = None
