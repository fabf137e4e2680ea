"""Run a command that dies with the process that started it: ``python -m
combee_fast.endpoint.tether PID -- COMMAND...``.

A server the engine starts for a run (the ``--local`` llama.cpp server) runs in its own session,
so a Ctrl-C meant for the engine does not reach it; the engine stops it on exit. When the engine
itself is killed (SIGKILL, the OOM killer, a CI timeout), nothing would stop it: it would keep
its port, its memory and its threads. This launcher asks Linux to send the command SIGTERM when
its parent dies (``prctl(PR_SET_PDEATHSIG)``, which survives ``exec``), checks the parent is still
``PID`` (else it has died already: exit 1), and replaces itself with the command. On systems
without ``prctl`` it only execs the command.
"""

from __future__ import annotations

import os
import sys

from combee_fast.engine.reaper import tie_to


def tethered(command: list[str]) -> list[str]:
    """``command`` run through this launcher, tied to the calling process (``-P``: the working
    folder is not on the launcher's import path)."""
    return [sys.executable, "-P", "-m", __name__, str(os.getpid()), "--", *command]


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print("usage: python -m combee_fast.endpoint.tether PID -- COMMAND...", file=sys.stderr)
        return 2
    if not tie_to(int(argv[0])):
        return 1  # the parent died before the tether was tied
    os.execvp(argv[2], argv[2:])
    return 127  # not reached: execvp raises when it fails


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
