"""Hostile agents are contained (``combee learn`` in real processes, real bubblewrap sandboxes):
a fork bomb, a command filling the disk, one sleeping forever, one printing without end, one
reading ``/etc/shadow`` and an API key, one opening a network connection and one writing outside
its working directory each become one error of their own kind in ``errors.jsonl``, the host is
untouched, and the run goes on; when most episodes fail, it stops with exit 3."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from combee_fast.sandbox.limits import live_processes
from combee_fast.sandbox.scratch import scratch_folder
from tests.rollouts.agents import HOSTILE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600),
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")]

ROOT = Path(__file__).resolve().parents[2]
UID_BASE = 63000
WORKERS = 16
SECRET = "sk-test-this-key-must-never-be-read-7731"
CONFIG = f"""
[executor]
step_timeout_s = 3.0
[sandbox]
cpu_s = 3
memory_mb = 512
max_processes = 32
file_mb = 2
disk_mb = 8
uid_base = {UID_BASE}
[map]
workers = {WORKERS}
max_rounds = 0
"""


def _learn(tmp_path: Path, agent: str, *, items: int) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "run.toml"
    config.write_text(CONFIG)
    return subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", "learn", "--config", str(config), "--task", "terminal",
         "--agent", f"tests.rollouts.agents:{agent}", "--train-split", f"train[0:{items}]",
         "--val-split", "selection[30:32]", "--batch-size", str(items), "--out", str(tmp_path / "run"), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=500, env={**os.environ, "OPENAI_API_KEY": SECRET})


def _sandbox_folders() -> set[str]:
    return {path.name for path in Path(scratch_folder() or tempfile.gettempdir()).glob("combee-sandbox-*")}


def _untouched(run: Path, folders_before: set[str]) -> None:
    assert not Path("/usr/combee-escape.txt").exists()
    assert _sandbox_folders() <= folders_before
    assert all(live_processes(uid) == 0 for uid in range(UID_BASE, UID_BASE + WORKERS))
    for path in run.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path


def test_each_hostile_agent_is_one_error_of_its_kind_and_the_run_goes_on(tmp_path: Path) -> None:
    folders = _sandbox_folders()
    done = _learn(tmp_path, "hostile", items=16)
    assert done.returncode == 0, done.stderr
    run = tmp_path / "run"
    failures = [json.loads(line) for line in (run / "errors.jsonl").read_text().splitlines()]
    episodes = [f for f in failures if "episode" in f]
    assert sorted(f["kind"] for f in episodes) == sorted(HOSTILE)
    by_kind = {f["kind"]: f for f in episodes}
    for index, kind in enumerate(HOSTILE):
        assert by_kind[kind]["item"] == f"train:{index}", kind
    summary = json.loads((run / "summary.json").read_text())
    assert summary["episodes"] == 16 and summary["episodes_failed"] == len(HOSTILE)
    _untouched(run, folders)


def test_a_run_whose_episodes_mostly_fail_stops_with_exit_3(tmp_path: Path) -> None:
    folders = _sandbox_folders()
    done = _learn(tmp_path, "all_hostile", items=12)
    assert done.returncode == 3, done.stderr
    assert "12 of 12 agent episodes failed" in done.stderr and "final.json" in done.stderr
    _untouched(tmp_path / "run", folders)
