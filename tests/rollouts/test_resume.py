"""A run of agent episodes killed with SIGKILL in the middle of a step and resumed re-runs no
episode it had finished (each episode an agent starts is counted in a file), and ends with the
same ``final.json`` as an uninterrupted run (real ``combee learn`` processes, real sandboxes)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")]

ROOT = Path(__file__).resolve().parents[2]
RUN = ["--task", "terminal", "--agent", "tests.rollouts.agents:counting", "--train-split", "train[0:40]",
       "--val-split", "selection[0:4]", "--batch-size", "10", "--quiet"]


def _learn(*args: str) -> list[str]:
    return [sys.executable, "-m", "combee_fast.cli", "learn", *args]


def _env(log: Path) -> dict[str, str]:
    return {**os.environ, "COMBEE_TEST_EPISODE_LOG": str(log)}


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _started(log: Path) -> list[tuple[str, str, str]]:
    return [tuple(line.split()) for line in log.read_text().splitlines()]  # type: ignore[misc]


@pytest.mark.parametrize("backend", ["local", "process"])
def test_a_killed_run_resumes_without_running_a_finished_episode_again(tmp_path: Path, backend: str) -> None:
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    done = subprocess.run(_learn(*RUN, "--executor", backend, "--out", str(whole)),
                          env=_env(tmp_path / "a.log"), cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr

    process = subprocess.Popen(_learn(*RUN, "--executor", backend, "--time-scale", "0.05", "--out", str(killed)),
                               env=_env(tmp_path / "b1.log"), cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while _lines(killed / "ledger.jsonl") < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    at_checkpoint = _lines(killed / "trajectories.jsonl")
    while _lines(killed / "trajectories.jsonl") < at_checkpoint + 4 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert process.poll() is None, "the run ended before it could be killed mid-step"
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = {(e["item_id"], str(e["round"]), e["context_sha"]) for line in
                (killed / "trajectories.jsonl").read_bytes().splitlines() if line.endswith(b"}")
                for e in [json.loads(line)["episode"]]}
    first = _started(tmp_path / "b1.log")
    assert len(finished) > at_checkpoint and len(first) > len(finished)  # killed with some episodes in flight

    resumed = subprocess.run(_learn("--resume", str(killed), "--quiet"),
                             env=_env(tmp_path / "b2.log"), cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stderr
    again = _started(tmp_path / "b2.log")
    assert not [episode for episode in again if episode in finished]  # no finished episode ran again
    assert len(finished) + len(again) == len(_started(tmp_path / "a.log"))
    assert (killed / "final.json").read_bytes() == (whole / "final.json").read_bytes()
