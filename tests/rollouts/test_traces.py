"""A run's ``trajectories.jsonl`` is valid input for the ``traces`` task: every line a trace with
the whole trajectory, and a run learns from them (real ``combee learn`` processes)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from combee_fast.tasks.traces import TracesTask

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("bwrap") is None,
                                                   reason="bubblewrap is not installed (.ci/run installs it)")]

ROOT = Path(__file__).resolve().parents[2]


def _learn(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", *args, "--quiet"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_a_runs_trajectories_are_traces_to_learn_from(tmp_path: Path) -> None:
    agents = _learn("--task", "terminal", "--train-split", "train[0:12]", "--val-split", "selection[0:2]",
                    "--batch-size", "12", "--out", str(tmp_path / "agents"))
    assert agents.returncode == 0, agents.stderr
    path = tmp_path / "agents" / "trajectories.jsonl"
    rollouts = TracesTask(path=path).load_rollouts("all")
    summary = json.loads((tmp_path / "agents" / "summary.json").read_text())
    assert len(rollouts) == summary["episodes"] + 2  # the learning episodes and the 2 of the validation
    for rollout in rollouts:
        assert rollout.trajectory is not None and rollout.trajectory.key == rollout.example.meta["trace_id"]
        assert rollout.score == rollout.trajectory.reward and rollout.reasoning.startswith("Step 1:")
    learned = _learn("--task", "traces", "--data", str(path), "--train-split", "all", "--val-split", "all[0:0]",
                     "--batch-size", "10", "--out", str(tmp_path / "traces"))
    assert learned.returncode == 0, learned.stderr
    assert json.loads(learned.stdout)["rollouts"] == 0  # reflect only: no episode is run again
