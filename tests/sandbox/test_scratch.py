"""A process killed with SIGKILL cannot remove its sandboxes' host-side folders (in memory,
``/dev/shm``): the next process to check its sandboxes removes them, and only them (real
processes holding real bwrap sandboxes)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from combee_fast.config import SandboxConfig
from combee_fast.sandbox.sessions import Sandboxes

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")

ROOT = Path(__file__).resolve().parents[2]
HOLDER = """
import asyncio, sys
from combee_fast.config import SandboxConfig
from combee_fast.sandbox.sessions import Sandboxes

async def main():
    session = await Sandboxes(SandboxConfig(uid_base=int(sys.argv[1])), step_timeout_s=5.0, uid_count=1).open([])
    print(session._folder, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def _holder(uid_base: int) -> tuple[subprocess.Popen[str], Path]:
    """A process holding one open sandbox, and that sandbox's host-side folder."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(uid_base)], cwd=ROOT, stdout=subprocess.PIPE,
                               text=True, start_new_session=True)
    assert process.stdout is not None
    return process, Path(process.stdout.readline().strip())


def test_the_folders_of_a_killed_process_are_swept_and_a_live_ones_kept() -> None:
    killed, killed_folder = _holder(62100)
    live, live_folder = _holder(62110)
    try:
        assert killed_folder.is_dir() and live_folder.is_dir()
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait(10)
        assert killed_folder.is_dir()  # nobody could remove it
        asyncio.run(Sandboxes(SandboxConfig(), step_timeout_s=5.0).check())
        assert not killed_folder.exists()
        assert live_folder.is_dir()
    finally:
        for process in (killed, live):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        shutil.rmtree(live_folder, ignore_errors=True)
