"""`combee learn --method gepa|combee-gepa` end to end in a real process, simulated endpoint."""

from __future__ import annotations

import json
import subprocess
import sys

import msgspec
import pytest

from combee_fast.gepa.candidate import Candidate


@pytest.mark.parametrize(("method", "minibatch"), [("gepa", 3), ("combee-gepa", 12)])
def test_learn_a_system_prompt_with_a_gepa_method(tmp_path, method: str, minibatch: int) -> None:
    out = tmp_path / method
    done = subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", "learn", "--method", method, "--combee-minibatch", "12",
         "--train-split", "train[0:36]", "--val-split", "val[0:15]", "--max-metric-calls", "120",
         "--sim-preset", "flat", "--time-scale", "0.0001", "--out", str(out)],
        capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["learner"] == "gepa" and summary["method"] == method and summary["metric_calls"] >= 120
    assert summary["accepted"] == summary["candidates"] - 1 >= 1
    assert summary["best_val_accuracy"] > 0
    final = Candidate.load(out / "final.json")
    assert final == Candidate.load(out / "best.json")  # GEPA's answer: the best candidate on validation
    child = Candidate.load(out / "candidates" / "c00001.json")
    assert child.parents == (0,) and child.render().startswith(Candidate.seed().render()) and child != Candidate.seed()
    rows = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    assert rows[0]["batch_reason"] == "start" and rows[0]["rollouts"] == 15  # the seed graded on validation
    assert all(row["method"] == method and row["batch_size"] == minibatch for row in rows[1:])
    assert sum(row["rollouts"] for row in rows) == summary["metric_calls"] == summary["rollouts"]
    assert f"[{method}]" in done.stderr  # progress lines
    assert len(list((out / "candidates").glob("c*.json"))) == summary["candidates"]
    config = msgspec.json.decode((out / "config.json").read_bytes())
    assert config["method"] == method and config["gepa"]["max_metric_calls"] == 120
    scored = subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", "eval", "--split", "val[0:15]", "--playbook", str(out / "best.json"),
         "--sim-preset", "flat", "--time-scale", "0.0001"],
        capture_output=True, text=True, timeout=240,
    )
    assert scored.returncode == 0, scored.stderr
    report = json.loads(scored.stdout)
    assert {k: report[k] for k in ("split", "learner", "examples", "accuracy", "answered", "unanswered",
                                   "unanswered_by_kind")} == {
        "split": "val[0:15]", "learner": "gepa", "examples": 15, "accuracy": summary["best_val_accuracy"],
        "answered": 15, "unanswered": 0, "unanswered_by_kind": {},
    }  # the search's validation score, reproduced


def test_batch_size_is_refused_for_gepa_and_names_its_minibatch_flags(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", "--method", "gepa", "--batch-size", "12",
                           "--out", str(tmp_path / "r")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--combee-minibatch" in done.stderr
    assert not (tmp_path / "r").exists()
