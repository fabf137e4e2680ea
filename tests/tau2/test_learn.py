"""``combee learn --task tau2-retail`` offline, with every learner: the simulated endpoint plays the
agent and the customer, real MCP server processes run the tools, tau2's checker scores. The
customer's calls are the ``user`` role's, counted apart from the learner's roles in
``calls.json`` and the ledger (also when episodes run in worker processes, whose customer calls
come back to the engine as the agent's do); trajectories are on disk; no server process outlives
the run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import children

ROOT = Path(__file__).resolve().parents[2]
ARGS = {"ace": ["--batch-size", "8"], "textgrad": ["--batch-size", "8"], "gepa": ["--max-metric-calls", "90"]}


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("learner,executor", [*((learner, "local") for learner in sorted(ARGS)), ("ace", "process")])
def test_every_learner_learns_on_tau2_retail_offline(tmp_path: Path, learner: str, executor: str) -> None:
    before = children()
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", "learn", "--task", "tau2-retail", "--learner", learner,
         *ARGS[learner], "--train-split", "train[0:8]", "--val-split", "selection[0:4]", "--max-steps", "24",
         "--executor", executor, "--sandbox", "none", "--out", str(run), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=380)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["episodes"] >= 8 and summary["episodes_failed"] == 0
    calls = json.loads((run / "calls.json").read_text())
    assert calls["user"] >= summary["episodes"]  # the customer opens every conversation
    train = summary["accounting"]["train"]["calls"]
    assert train["user"] > 0 and set(train) - {"user"}  # the learner's roles, and the user's apart
    rows = [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]
    assert any(row["calls"].get("user", 0) > 0 and "user" in row["prompt_tokens"] for row in rows)
    trajectories = (run / "trajectories.jsonl").read_text().splitlines()
    assert len(trajectories) >= 8 and "respond" in trajectories[0]
    assert children() - before == set()
