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
    assert config["method"] == method and config["learners"]["gepa"]["max_metric_calls"] == 120
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


def _learn(*args: str, timeout: int = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", *args, "--sim-preset", "flat",
                           "--time-scale", "0.0001", "--quiet"], capture_output=True, text=True, timeout=timeout)


SLICE = ["--train-split", "train[0:72]", "--val-split", "val[0:15]", "--combee-minibatch", "12"]


@pytest.mark.slow
@pytest.mark.parametrize("synchronous", ["combee-gepa", "gepa"])
def test_the_sequential_mode_writes_the_synchronous_loops_final_json(tmp_path, synchronous: str) -> None:
    """async-gepa with one proposal in flight is the synchronous loop: the same final.json, byte for
    byte (one pass over the train split; the serial loop's minibatch is set to the same size and
    its one-call reflection used by the pipeline too)."""
    config = tmp_path / "pass.toml"
    reflection = "serial" if synchronous == "gepa" else "combee"
    config.write_text(f"[gepa]\nmax_epochs = 1\nmax_metric_calls = 1000000\nminibatch = 12\n"
                      f"[gepa.pipeline]\nreflection = \"{reflection}\"\n")
    outs = {name: tmp_path / name for name in ("sync", "async")}
    done = [_learn("--method", synchronous, "--config", str(config), *SLICE, "--out", str(outs["sync"])),
            _learn("--method", "async-gepa", "--proposals-in-flight", "1", "--config", str(config), *SLICE,
                   "--out", str(outs["async"]))]
    assert all(d.returncode == 0 for d in done), [d.stderr for d in done]
    for name in ("final.json", "best.json"):
        assert (outs["async"] / name).read_bytes() == (outs["sync"] / name).read_bytes()
    made = {name: sorted((out / "candidates").iterdir()) for name, out in outs.items()}
    assert [p.read_bytes() for p in made["async"]] == [p.read_bytes() for p in made["sync"]] and len(made["sync"]) > 2
    summaries = [json.loads(d.stdout.strip().splitlines()[-1]) for d in done]
    assert summaries[0]["metric_calls"] == summaries[1]["metric_calls"]
    assert summaries[1]["method"] == "async-gepa"


def test_async_gepa_learns_within_its_budget_with_several_proposals_in_flight(tmp_path) -> None:
    out = tmp_path / "run"
    done = _learn("--method", "async-gepa", *SLICE, "--max-metric-calls", "300", "--out", str(out))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["method"] == "async-gepa" and summary["metric_calls"] <= 300 and summary["accepted"] >= 1
    rows = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    assert sum(row["rollouts"] for row in rows) == summary["metric_calls"] == summary["rollouts"]
    assert len(list((out / "candidates").glob("c*.json"))) == summary["candidates"] == len(list((out / "pool").iterdir()))
    assert Candidate.load(out / "best.json") == Candidate.load(out / "final.json")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["combee-gepa", "async-gepa"])
def test_batch_size_auto_hands_gepas_minibatch_to_the_live_planner(tmp_path, method: str) -> None:
    out = tmp_path / method
    done = _learn("--method", method, "--batch-size", "auto", "--train-split", "train[0:100]", "--val-split",
                  "val[0:10]", "--max-metric-calls", "400", "--out", str(out))
    assert done.returncode == 0, done.stderr
    decisions = [json.loads(line) for line in (out / "controller.jsonl").read_text().splitlines()]
    assert decisions and all(d["batch_size"] == 80 for d in decisions)
    assert all(d["in_flight"] == 1 for d in decisions) if method == "combee-gepa" else decisions[0]["in_flight"] == 2
    rows = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    assert {row["batch_size"] for row in rows if row["batch_reason"] not in ("start", "drain")} == {80}
    assert [row["batch_reason"] == "start" for row in rows[:1]] == [method == "combee-gepa"]  # async: no opening step
    config = json.loads((out / "config.json").read_bytes())
    assert config["train"]["batch_size"] is None  # --batch-size auto: the one knob, read by GEPA's batched methods
    again = _learn("--method", method, "--combee-minibatch", "auto", "--train-split", "train[0:100]", "--val-split",
                   "val[0:10]", "--max-metric-calls", "400", "--out", str(tmp_path / "again"))
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again" / "final.json").read_bytes() == (out / "final.json").read_bytes()


def test_batch_size_auto_is_refused_for_serial_gepa_whose_minibatch_is_fixed(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", "--method", "gepa", "--batch-size", "auto",
                           "--out", str(tmp_path / "r")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--minibatch" in done.stderr
    assert not (tmp_path / "r").exists()
