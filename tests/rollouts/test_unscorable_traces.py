"""Traces without a ground truth (a run's ``trajectories.jsonl``) can be learned from but not
validated on: naming them as the validation split is one line and exit 2 before anything is
written, never a traceback mid-run (a real ``combee learn`` process, real files)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from combee_fast.errors import EXIT_USAGE

ROOT = Path(__file__).resolve().parents[2]


def test_validating_on_traces_without_ground_truth_is_one_line_and_exit_2(tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    traces.write_text("".join(json.dumps({"id": f"t{i}", "task": f"task {i}", "trajectory": "ran ls", "answer": "done",
                                          "score": 0.0, "feedback": "wrong file"}) + "\n" for i in range(8)))
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", "--task", "traces", "--data", str(traces),
                           "--train-split", "all[0:6]", "--val-split", "all[6:8]", "--out", str(tmp_path / "run"),
                           "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_USAGE and not (tmp_path / "run").exists()
    line, = done.stderr.strip().splitlines()
    assert "validation split 'all[6:8]': 2 of 2 examples have no ground truth" in line and "all[0:0]" in line
