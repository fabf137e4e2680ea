"""`combee learn --learner textgrad` end to end in real processes: the in-process simulated
endpoint and a separate `combee sim-server`; the run resumes after kill -9 to the same prompt."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys

import pytest

from combee_fast.errors import EXIT_OK
from combee_fast.textgrad.variable import PromptVariable
from tests.cli.test_cli import _combee
from tests.cli.test_resume import _ledger_lines, _resume, _run_and_signal

ROLES = ("textgrad_forward", "textgrad_loss", "textgrad_gradient", "textgrad_step")
SMALL = ("--train-split", "train[0:40]", "--val-split", "val[0:15]", "--batch-size", "10", "--sim-preset", "flat",
         "--time-scale", "0.0001")


@pytest.mark.parametrize("method", ["combee", "naive", "sequential"])
def test_learn_a_prompt_with_each_textgrad_method_then_eval_it(tmp_path, method: str) -> None:
    out = tmp_path / method
    done = _combee("learn", "--learner", "textgrad", "--method", method, *SMALL, "--eval-every", "0", "--out", str(out))
    assert done.returncode == 0, done.stderr
    shown = {"combee": "combee-textgrad", "naive": "naive-textgrad", "sequential": "textgrad"}[method]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["learner"] == "textgrad" and summary["method"] == shown and summary["samples"] == 40
    assert summary["rollouts"] == 40 and summary["prompt_lines"] > len(PromptVariable.seed())
    assert f"[{shown}] step 4 of" in done.stderr
    rows = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(row["method"] == shown and set(ROLES) <= set(row["calls"]) for row in rows)
    assert all(("textgrad_reduce" in row["calls"]) == (method == "combee") for row in rows)
    final = PromptVariable.load(out / "final.json")
    assert final == PromptVariable.load(out / "best.json")  # validated once, at the end
    assert PromptVariable.load(out / "prompts" / f"v{final.version:05d}.json") == final
    assert len((out / "deltas.jsonl").read_text().splitlines()) == final.version
    calls = json.loads((out / "calls.json").read_text())
    assert calls["textgrad_forward"] == 40 + 15 and calls["failed"] == 0
    scored = _combee("eval", "--split", "val[0:15]", "--playbook", str(out / "best.json"), "--sim-preset", "flat",
                     "--time-scale", "0.0001")
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)["learner"] == "textgrad"
    assert json.loads(scored.stdout)["accuracy"] == summary["best_val_accuracy"]  # the run's validation, reproduced


def test_the_textgrad_method_names_pick_their_learner_and_a_mismatch_is_one_line(tmp_path) -> None:
    done = _combee("learn", "--method", "combee-textgrad", *SMALL, "--out", str(tmp_path / "a"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["learner"] == "textgrad"
    refused = _combee("learn", "--learner", "gepa", "--method", "combee-textgrad", "--out", str(tmp_path / "b"))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "learner 'textgrad'" in refused.stderr
    assert not (tmp_path / "b").exists()


def test_a_separate_sim_server_process_answers_the_textgrad_roles(tmp_path) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0", "--world", "formula",
         "--preset", "flat", "--time-scale", "0.0001"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        first = server.stdout.readline().split()
        assert first[:2] == ["listening", "on"], first
        outs = {}
        for name, where in (("remote", ("--endpoint", first[2], "--model", "sim")), ("local", ())):
            outs[name] = tmp_path / name
            done = _combee("learn", "--method", "combee-textgrad", *SMALL, *where, "--out", str(outs[name]), "--quiet")
            assert done.returncode == 0, done.stderr
        assert (outs["remote"] / "final.json").read_bytes() == (outs["local"] / "final.json").read_bytes()
    finally:
        server.terminate()
        server.wait(timeout=30)


RESUMED = ["--method", "combee-textgrad", "--train-split", "train[0:60]", "--val-split", "val[0:10]", "--batch-size",
           "10", "--epochs", "2", "--eval-every", "4", "--quiet"]


@pytest.mark.slow
def test_a_textgrad_run_killed_at_a_random_step_resumes_to_the_same_prompt(tmp_path) -> None:
    whole = tmp_path / "whole"
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", *RESUMED, "--out", str(whole)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_OK, done.stderr
    at_step = random.Random().randint(1, _ledger_lines(whole) - 2)
    out = tmp_path / "killed"
    assert _run_and_signal(RESUMED, out, at_step, signal.SIGKILL).returncode == -signal.SIGKILL
    resumed = _resume(out)
    assert resumed.returncode == EXIT_OK, resumed.stderr
    for name in ("final.json", "best.json"):
        assert (out / name).read_bytes() == (whole / name).read_bytes(), f"killed at step {at_step}"
    assert sorted(p.name for p in (out / "prompts").iterdir()) == sorted(p.name for p in (whole / "prompts").iterdir())
