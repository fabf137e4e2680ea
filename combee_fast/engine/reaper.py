"""Run a command so that nothing it starts outlives it: ``python -m combee_fast.engine.reaper PID
-- COMMAND...``.

A server the engine starts per episode (an MCP server) runs in a process group of its own, which
the engine signals to stop it. A process the server starts in a session of its own escapes that
group, and a server whose engine was killed (SIGKILL, the OOM killer) is stopped by no one. This
launcher is the command's parent for its whole life:

- it is a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): whatever the command starts and
  orphans, however it detaches (``setsid``, a double fork), is re-parented to it, so every process
  the command started is in its tree;
- it dies with the process that started it, which must be ``PID`` (``prctl(PR_SET_PDEATHSIG)``:
  SIGTERM when the engine dies);
- on SIGTERM, SIGINT or SIGHUP it sends SIGTERM to every process of its tree and, after
  :data:`GRACE_S`, SIGKILL to those left; when the command exits, it kills whatever the command
  left; then it exits with the command's status (128 + the signal that ended it).

The command's stdin, stdout and stderr are the launcher's own, which it closes for itself, so the
command's pipes end when the command (and what it left) is gone. Linux only; elsewhere it execs
the command.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
"""``prctl`` options from ``<linux/prctl.h>``."""

GRACE_S = 0.5
"""Seconds between SIGTERM and SIGKILL to the tree when the launcher is told to stop."""

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def reaped(command: list[str]) -> list[str]:
    """``command`` run through this launcher, tied to the calling process (``-P``: the working
    folder is not on the launcher's import path)."""
    return [sys.executable, "-P", "-m", __name__, str(os.getpid()), "--", *command]


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option})")


def tie_to(parent: int) -> bool:
    """Ask Linux to send this process SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``,
    which survives ``exec``; nothing elsewhere); whether the parent is still ``parent`` (False: it
    died before the tie was made)."""
    if sys.platform.startswith("linux"):
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    return os.getppid() == parent


def _tree(root: int) -> list[int]:
    """The live processes below ``root`` (from ``/proc``), zombies included."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry))
    found, frontier = [], [root]
    while frontier:
        below = children.get(frontier.pop(), [])
        found.extend(below)
        frontier.extend(below)
    return found


def _signal_tree(sig: int) -> None:
    for pid in _tree(os.getpid()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _reap(command: int) -> int | None:
    """Reap every exited child; the command's wait status when it is among them."""
    status = None
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == command:
            status = code


def _first(status: int | None, earlier: int | None) -> int | None:
    return status if status is not None else earlier


def _exit_code(status: int) -> int:
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _clear(grace_s: float, command: int) -> int | None:
    """Stop the whole tree: SIGTERM, then after ``grace_s`` SIGKILL to what is left; reap all.
    The command's wait status when it was reaped here."""
    status = None
    if grace_s > 0:
        _signal_tree(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while _tree(os.getpid()) and time.monotonic() < deadline:
            status = _first(_reap(command), status)
            time.sleep(0.02)
    while _tree(os.getpid()):
        _signal_tree(signal.SIGKILL)
        status = _first(_reap(command), status)
        time.sleep(0.01)
    return status


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print("usage: python -m combee_fast.engine.reaper PID -- COMMAND...", file=sys.stderr)
        return 2
    if not sys.platform.startswith("linux"):
        os.execvp(argv[2], argv[2:])
    watched = STOP_SIGNALS | {signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if not tie_to(int(argv[0])):
        return 1  # the engine died before the launcher was tied to it
    command = os.fork()
    if command == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, watched)
        try:
            os.execvp(argv[2], argv[2:])
        except OSError as exc:
            print(f"reaper: cannot run {argv[2]}: {exc.strerror}", file=sys.stderr)
        os._exit(127)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # the command's pipes are its own: they end when it and its tree are gone
        os.dup2(null, fd)
    while True:
        received = signal.sigwaitinfo(watched)
        if received.si_signo in STOP_SIGNALS:
            status = _clear(GRACE_S, command)
            return _exit_code(status) if status is not None else 128 + received.si_signo
        status = _reap(command)
        if status is not None:
            _clear(0.0, command)
            return _exit_code(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
