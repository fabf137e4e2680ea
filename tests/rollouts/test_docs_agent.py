"""The docs' example agent is a working agent: its code, taken from ``docs/agents.md``, runs a
``combee learn`` of the terminal task (real process, real sandboxes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_pages import block_of

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")
def test_the_docs_example_agent_runs(tmp_path: Path) -> None:
    code = block_of("docs/agents.md", "# mymodule.py", "python").code
    assert len(code.splitlines()) <= 20
    (tmp_path / "mymodule.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", "learn", "--task", "terminal", "--agent", "mymodule:make_agent",
         "--train-split", "train[0:4]", "--val-split", "selection[0:1]", "--batch-size", "4", "--out",
         str(tmp_path / "run"), "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    trajectories = [json.loads(line)["episode"] for line in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()]
    assert trajectories and all(t["steps"][0]["action"]["name"] == "run" and t["finished"] for t in trajectories)
