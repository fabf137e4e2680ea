"""Nothing of the engine's crosses into a sandbox but the sandbox's own streams: a command that
lists the descriptors a process of it holds finds only its standard streams (``/dev/null`` in,
the output file out), its shell's script and what the listing opened itself, on the local,
process and ray executors (``combee learn`` in a real process, as a shell starts it with a secret
file left open; real bubblewrap sandboxes, real worker processes and actors)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.worker_groups import RAY

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")

ROOT = Path(__file__).resolve().parents[2]
HAS_RAY = shutil.which("ray", path=str(Path(sys.executable).parent)) is not None


def _allowed(target: str) -> bool:
    """The descriptors a sandboxed command's process may hold: its streams (``/dev/null`` in,
    the output file), the script its shell runs, and what the listing opened itself (its output
    file and the folder it lists)."""
    return target in ("/dev/null", "/run/out", "/tmp/fds") or target.startswith("/run/cmd/c") or \
        re.fullmatch(r"/proc/\d+/fd", target) is not None


def _listings(tmp_path: Path, backend: str) -> list[tuple[str, str]]:
    secret = tmp_path / "secret"
    secret.write_text("host secret\n")
    leaked = os.open(secret, os.O_RDWR)  # passed on open, as a parent shell's ``9<>secret`` leaves it
    try:
        done = subprocess.run(
            [sys.executable, "-m", "combee_fast.cli", "learn", "--task", "terminal", "--agent",
             "tests.rollouts.agents:fd_lister", "--executor", backend, "--processes", "1", "--ray-actors", "1",
             "--train-split", "train[0:2]", "--val-split", "selection[0:1]", "--batch-size", "2",
             "--out", str(tmp_path / "run"), "--quiet"],
            cwd=ROOT, capture_output=True, text=True, timeout=300, pass_fds=(leaked,))
    finally:
        os.close(leaked)
    assert done.returncode == 0, done.stderr
    lines = []
    for line in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines():
        answer = json.loads(line)["answer"]
        assert answer.startswith("exit status 0\n"), answer
        lines += [tuple(entry.split(" ", 1)) for entry in answer.splitlines()[1:] if entry.strip()]
    return lines  # type: ignore[return-value]


@pytest.mark.parametrize("backend", ["local", "process",
                                     pytest.param("ray", marks=[pytest.mark.slow, RAY, pytest.mark.skipif(
                                         not HAS_RAY, reason="Ray is not installed")])])
def test_a_sandboxed_command_holds_only_its_own_streams(backend: str, tmp_path: Path) -> None:
    listing = _listings(tmp_path, backend)
    assert {fd for fd, _ in listing} >= {"0", "1", "2"}
    assert [(fd, target) for fd, target in listing if not _allowed(target)] == []
