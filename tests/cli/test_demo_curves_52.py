"""Issue 52, item 6: the demo's figure draws each method's curve, not one dot per method.

``combee demo`` is run as a user runs it (the CLI, in a process of its own); the test reads the
points its figure is drawn from (``accuracy-time.json``, beside ``accuracy-time.png``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def test_the_demo_figure_draws_a_curve_per_method_ending_in_its_test_score(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "demo", "--train-limit", "200", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    curves = json.loads((out / "accuracy-time.json").read_text())
    assert [c["label"] for c in curves] == ["sequential (batch 1)", "naive (batch 100)", "combee (batch 40)"]
    table = {row.split()[0]: float(row.split()[2]) for row in done.stdout.splitlines()[-4:-1]}  # sim time (h)
    for curve, method in zip(curves, ("sequential", "naive", "combee")):
        times = [seconds for seconds, _ in curve["points"]]
        assert len(times) > 1 and times == sorted(set(times)), curve
        assert all(0.0 <= accuracy <= 1.0 for _, accuracy in curve["points"])
        end_seconds, end_accuracy = curve["end"]
        assert times[-1] == end_seconds and end_seconds / 3600 == pytest.approx(table[method], abs=0.005)
        assert end_accuracy == json.loads((out / method / "eval.json").read_text())["accuracy"]
    assert "The points: `accuracy-time.json`." in (out / "report.md").read_text()
