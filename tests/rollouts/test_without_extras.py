"""An agent run needs no extra's packages: the terminal task learns on a base install, here one
whose ``mcp`` SDK (the ``tau2`` extra) cannot be imported. Opening the rollout executor imported
the MCP environment, and with it the SDK, for every agent run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WITHOUT_MCP = """
import sys
sys.modules["mcp"] = None  # as on an install without the tau2 extra
from combee_fast.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("backend", ["local", "process"])
def test_the_terminal_task_learns_without_the_mcp_sdk(tmp_path: Path, backend: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_MCP, "learn", "--task", "terminal", "--executor", backend, "--sandbox", "none",
         "--train-split", "train[0:2]", "--val-split", "selection[0:1]", "--time-scale", "0.0001",
         "--out", str(tmp_path / "run"), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "run" / "final.json").exists()
