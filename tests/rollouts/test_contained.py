"""Agent code is contained (real ``combee learn`` processes, real sandboxes, the simulated
endpoint): an agent factory that exits is one line and exit 2; a run whose agent blocks its
thread stops on the first SIGTERM, its episodes timed out; episodes asked for after the
executor closed (a run stopping) are failed trajectories, never an exception left unretrieved."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

from combee_fast.errors import EXIT_INTERRUPTED
from combee_fast.session import open_session
from tests.rollouts.test_episode import _config

ROOT = Path(__file__).resolve().parents[2]


def _learn(tmp_path: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "combee_fast.cli", "learn", "--task", "formula", "--env",
            "tests.rollouts.environments:counting", "--train-split", "train[0:4]", "--val-split", "val[0:2]",
            "--out", str(tmp_path / "run"), "--quiet", *args]


def test_an_agent_factory_that_exits_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run(_learn(tmp_path, "--agent", "builtins:exit"), cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and not (tmp_path / "run").exists()
    line, = done.stderr.strip().splitlines()
    assert "--agent 'builtins:exit': the factory raised SystemExit" in line


def test_the_first_sigterm_stops_a_run_whose_agent_blocks(tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text("[executor]\nepisode_timeout_s = 2.0\n")
    process = subprocess.Popen(_learn(tmp_path, "--agent", "tests.rollouts.agents:sleeper", "--config", str(config)),
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "run" / "checkpoint.bin").exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # the run has begun its steps (a checkpoint is written before the first)
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == EXIT_INTERRUPTED, stderr
    assert "SIGTERM received" in stderr


async def test_episodes_asked_for_after_the_executor_closed_fail_as_cancelled() -> None:
    async with open_session(_config("talker")) as session:
        attempts = session.attempts()
        assert attempts is not None
        example = session.train_split.examples[0]
    rollout = await attempts.attempt(example, "", version=0, epoch=0)
    assert rollout.trajectory is not None and rollout.trajectory.error is not None
    assert rollout.trajectory.error.kind == "cancelled"
