"""Progress output says when calls wait because the server asked (Retry-After); ``--quiet`` does not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RUN = ["learn", "--task", "formula", "--method", "combee", "--batch-size", "20", "--train-split", "train[0:40]",
       "--val-split", "val[0:10]", "--fault-429", "0.3"]


def test_waiting_on_retry_after_is_said_at_most_once_a_second(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", *RUN, "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    waits = [line for line in done.stderr.splitlines() if line.startswith("[waiting]")]
    assert waits and all("asked to wait" in line and "(Retry-After)" in line for line in waits)
    quiet = subprocess.run([sys.executable, "-m", "combee_fast.cli", *RUN, "--out", str(tmp_path / "quiet"), "--quiet"],
                           capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0 and "[waiting]" not in quiet.stderr
