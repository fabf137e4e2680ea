"""The tether: a command started through it dies when the process that started it is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from combee_fast.endpoint.tether import tethered

PARENT = """
import subprocess, sys, time
from combee_fast.endpoint.tether import tethered
child = subprocess.Popen(tethered(["sleep", "120"]), start_new_session=True)
print(child.pid, flush=True)
time.sleep(120)
"""


def _command(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
        return cmdline.read().split(b"\0")[0].decode()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead: only its entry waits to be reaped
            return stat.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_tethered_command_dies_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + 30
        while _command(child) != "sleep" and time.monotonic() < deadline:  # the launcher execs the command
            time.sleep(0.05)
        assert _command(child) == "sleep" and _alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the tethered command outlived its killed parent"
    finally:
        parent.kill()
        parent.wait()


def test_a_tethered_command_runs_as_itself_while_its_parent_lives() -> None:
    done = subprocess.run(tethered([sys.executable, "-c", "import sys; print('ran'); sys.exit(7)"]),
                          capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout.strip()) == (7, "ran")


def test_the_launcher_refuses_a_malformed_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "combee_fast.endpoint.tether", "sleep", "1"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "usage:" in done.stderr
