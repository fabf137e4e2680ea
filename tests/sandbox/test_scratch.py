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


STOPPER = """
import asyncio, sys
from combee_fast.config import SandboxConfig
from combee_fast.sandbox.sessions import Sandboxes

async def main():
    sandboxes = Sandboxes(SandboxConfig(uid_base=int(sys.argv[1]), warm=1), step_timeout_s=5.0, uid_count=2)
    session = await sandboxes.open([])
    await session.run("echo hi", timeout_s=5)
    opening = asyncio.ensure_future(sandboxes.open([]))
    await asyncio.sleep(0.05)
    opening.cancel()  # a run stopping with a sandbox starting
    await asyncio.gather(opening, return_exceptions=True)
    print(session._folder, flush=True)
    sys.exit(3)  # with a session, a warm sandbox and a cancelled start never closed

asyncio.run(main())
"""


def test_a_process_that_stops_with_its_sandboxes_open_leaves_no_folder() -> None:
    done = subprocess.run([sys.executable, "-c", STOPPER, "62120"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 3, done.stderr
    folder = Path(done.stdout.strip())
    assert folder.name.startswith("combee-sandbox-")
    pid = folder.name.split("-")[2]
    assert list(folder.parent.glob(f"combee-sandbox-{pid}-*")) == []  # none until a next run sweeps


@pytest.mark.skipif(os.geteuid() != 0, reason="another user to read as needs root")
def test_a_sandboxs_host_side_files_are_readable_by_no_other_user() -> None:
    async def look() -> tuple[Path, int, str]:
        sandboxes = Sandboxes(SandboxConfig(uid_base=62130, warm=0), step_timeout_s=5.0, uid_count=1)
        session = await sandboxes.open([])
        try:
            result = await session.run("echo the-command-ran", timeout_s=5)
            folder: Path = session._folder  # type: ignore[attr-defined]
            as_nobody = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
                                        f"cat {folder}/cmd/c1 || ls {folder}"], capture_output=True, text=True)
            return folder, folder.stat().st_mode & 0o777, result.output + as_nobody.stdout
        finally:
            await session.close()

    folder, mode, seen = asyncio.run(look())
    assert mode & 0o707 == 0o700  # the engine's: no one else may read, write or enter it
    assert seen == "the-command-ran\n"  # the command ran; nobody saw its text or the folder's files
