"""The ``process`` backend (real worker processes): the same artifact as the ``local`` backend,
a worker that dies fails only the episodes it was running and is started again, and an agent
that cannot be built is one line and exit 2 before anything is written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("bwrap") is None,
                                                   reason="bubblewrap is not installed (.ci/run installs it)")]

ROOT = Path(__file__).resolve().parents[2]
RUN = ["--task", "terminal", "--train-split", "train[0:24]", "--val-split", "selection[0:4]", "--batch-size", "12",
       "--eval-every", "0", "--quiet"]  # validated once (the vanishing agent dies on every item 0, selection's too)


def _learn(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=400)


def test_process_workers_learn_what_the_engine_loop_learns(tmp_path: Path) -> None:
    local = _learn(*RUN, "--out", str(tmp_path / "local"))
    process = _learn(*RUN, "--executor", "process", "--processes", "3", "--out", str(tmp_path / "process"))
    assert local.returncode == 0 and process.returncode == 0, local.stderr + process.stderr
    assert (tmp_path / "local" / "final.json").read_bytes() == (tmp_path / "process" / "final.json").read_bytes()
    summary = json.loads((tmp_path / "process" / "summary.json").read_text())
    assert summary["episodes"] > 24 and summary["episodes_failed"] == 0 and summary["env_seconds"] > 0


def test_a_dying_worker_fails_only_the_episodes_it_was_running(tmp_path: Path) -> None:
    done = _learn(*RUN, "--executor", "process", "--agent", "tests.rollouts.agents:vanishing",
                  "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    failures = [json.loads(line) for line in (tmp_path / "run" / "errors.jsonl").read_text().splitlines()]
    died = {f["item"] for f in failures if f.get("kind") == "worker_died"}
    assert "train:0" in died and len(died) < 12  # the other worker's episodes ran on
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["episodes"] > summary["episodes_failed"] >= 1  # and the restarted worker ran later ones


@pytest.mark.parametrize("backend", ["local", "process"])
def test_an_agent_that_cannot_be_built_is_one_line_and_exit_2(tmp_path: Path, backend: str) -> None:
    done = _learn(*RUN, "--executor", backend, "--agent", "no_such_module.anywhere:factory", "--out",
                  str(tmp_path / "run"))
    assert done.returncode == 2 and not (tmp_path / "run").exists()
    line, = done.stderr.strip().splitlines()
    assert "--agent 'no_such_module.anywhere:factory': cannot import no_such_module.anywhere" in line
