"""The sandbox's one system-call filter: no System V shared memory.

A sandbox has an IPC namespace of its own, but a System V segment (``shmget``) is memory of the
host's that no resource limit of the sandbox's processes counts (not ``RLIMIT_AS``, not the
working directory's size): one command could hold gigabytes with ``memory_mb`` small. POSIX
shared memory is files in ``/dev/shm``, a tmpfs of bounded size (:mod:`.bwrap`). :func:`program`
is a classic BPF program (what ``bwrap --seccomp`` loads) that answers ``shmget`` with ``EPERM``
and lets every other call through; on an architecture it does not know it is None (no filter).
"""

from __future__ import annotations

import platform
import struct

_LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JUMP_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_RETURN = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_DENY = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
_NR, _ARCH = 0, 4  # offsets of struct seccomp_data's fields

DENIED = {
    "x86_64": (0xC000003E, (29, 0x40000000 | 29)),  # AUDIT_ARCH_X86_64; shmget, and its x32 number
    "aarch64": (0xC00000B7, (194,)),  # AUDIT_ARCH_AARCH64; shmget
}
"""Per machine: its audit architecture and the numbers of the calls refused."""


def _op(code: int, k: int, true: int = 0, false: int = 0) -> bytes:
    return struct.pack("HBBI", code, true, false, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one's), None when it is not in :data:`DENIED`."""
    known = DENIED.get(machine or platform.machine())
    if known is None:
        return None
    arch, numbers = known
    checks = len(numbers)
    ops = [_op(_LOAD_WORD, _ARCH), _op(_JUMP_EQUAL, arch, 0, checks + 1), _op(_LOAD_WORD, _NR)]
    ops += [_op(_JUMP_EQUAL, number, checks - i, 0) for i, number in enumerate(numbers)]
    ops += [_op(_RETURN, _ALLOW), _op(_RETURN, _DENY)]
    return b"".join(ops)
