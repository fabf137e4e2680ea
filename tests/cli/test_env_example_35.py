"""Finding 19 of issue 35: an environment of your own, written from the docs alone.

``docs/environments.md`` carries ``examples/shell_env.py`` whole and the commands that run it; the
page's blocks run here as written, in a fresh folder, and the run must have learned: episodes on
disk with their scores and feedback, some solved, none failed, lessons in the prompt. The same
example runs against a real ``combee sim-server --world terminal``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2]
PAGE = SRC / "docs" / "environments.md"
EXAMPLE = SRC / "examples" / "shell_env.py"
BIN = Path(sys.executable).parent

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)"),
    pytest.mark.skipif(not (BIN / "combee").exists(), reason="no combee console script beside this interpreter"),
]


def _blocks(text: str) -> list[tuple[str, str, bool]]:
    """The page's ``bash``/``python`` blocks in order: (language, code, run), ``run`` False under a
    ``<!-- not run: ... -->`` line."""
    found = []
    for match in re.finditer(r"(?:(<!-- not run:[^\n]*-->)\n)?```(bash|python)\n(.*?)^```$", text, re.S | re.M):
        found.append((match[2], match[3], match[1] is None))
    return found


def _environment() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(SRC)}


def _learned(run: Path, summary: dict) -> None:
    episodes = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
    assert episodes and all(isinstance(e["score"], float) and e["feedback"] for e in episodes)
    assert any(e["score"] == 1.0 for e in episodes) and any(e["score"] < 1.0 for e in episodes)
    assert any(e["feedback"].startswith("not done: ") for e in episodes)  # the example's own feedback
    assert all(e["episode"]["steps"][0]["action"]["name"] == "run" for e in episodes)
    assert summary["episodes"] > 0 and summary["episodes_failed"] == 0 and summary["bullets"] > 0
    assert summary["final_val_accuracy"] > 0
    assert " — lesson " in (run / "prompt.txt").read_text()  # the reflector's lessons, from the feedback


def test_the_page_carries_the_example_whole() -> None:
    writer = next(code for language, code, _ in _blocks(PAGE.read_text()) if "cat > shell_env.py" in code)
    assert writer.split("<<'EOF'\n", 1)[1].removesuffix("EOF\n") == EXAMPLE.read_text()


def test_the_environment_page_runs_as_written_and_the_run_learns(tmp_path: Path) -> None:
    outputs = []
    for language, code, run in _blocks(PAGE.read_text()):
        if not run:
            continue
        argv = ["bash", "-c", code] if language == "bash" else [sys.executable, "-c", code]
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=_environment())
        assert done.returncode == 0, (code, done.stderr)
        outputs.append(done.stdout)
    learned = tmp_path / "runs" / "shell"
    _learned(learned, json.loads((learned / "summary.json").read_text()))
    assert " solved" in outputs[-1] and "not done: " in outputs[-1]


def test_the_example_learns_against_a_terminal_sim_server(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "shell_env.py")
    server = subprocess.Popen([str(BIN / "combee"), "sim-server", "--world", "terminal", "--port", "0",
                               "--time-scale", "0.0001"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_environment())
    try:
        assert server.stdout is not None
        first = server.stdout.readline().split()
        assert first[:2] == ["listening", "on"], first
        done = subprocess.run([str(BIN / "combee"), "learn", "--task", "terminal", "--env", "shell_env:make_env",
                               "--endpoint", first[2], "--model", "sim", "--train-split", "train[0:20]",
                               "--val-split", "selection[0:10]", "--batch-size", "10", "--out", "run", "--quiet"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300, env=_environment())
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert done.returncode == 0, done.stderr
    _learned(tmp_path / "run", json.loads(done.stdout.strip().splitlines()[-1]))
