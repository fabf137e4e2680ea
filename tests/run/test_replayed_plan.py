"""A replayed plan (``--plan-from``) is range-checked line by line: a decision no run could have
made (a batch of 0 or fewer, groups of 0, zero, negative or a million copies, a temperature past
2) is one line naming the file, the line and the field, and exit 2 (real files, a real run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from combee_fast.errors import EXIT_USAGE, ConfigError
from combee_fast.run.batch_plans import ReplayedPlan

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("decision, field", [
    ('"batch_size": 0', "batch_size"), ('"batch_size": -5', "batch_size"),
    ('"batch_size": 4, "max_group": 0', "max_group"), ('"batch_size": 4, "duplicates": 0', "duplicates"),
    ('"batch_size": 4, "duplicates": -1', "duplicates"), ('"batch_size": 4, "duplicates": 1000000', "duplicates"),
    ('"batch_size": 4, "reflect_temperature": 1e300', "reflect_temperature"),
    ('"batch_size": 4, "shuffle_salt": -1', "shuffle_salt")])
def test_a_decision_out_of_range_is_refused_naming_its_line_and_field(tmp_path: Path, decision: str,
                                                                      field: str) -> None:
    plan = tmp_path / "controller.jsonl"
    plan.write_text('{"batch_size": 4, "reason": "ok"}\n{' + decision + ', "reason": "forged"}\n')
    with pytest.raises(ConfigError) as refused:
        ReplayedPlan.load(str(plan))
    assert str(refused.value).startswith(f"{plan}:2: not a batch decision") and f"$.{field}" in str(refused.value)


def test_a_run_given_a_forged_plan_stops_at_once_with_one_line(tmp_path: Path) -> None:
    plan = tmp_path / "controller.jsonl"
    plan.write_text('{"batch_size": 4, "reason": "forged", "duplicates": 1000000}\n')
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", "--task", "formula", "--method", "combee",
                           "--train-split", "train[0:8]", "--val-split", "val[0:2]", "--plan-from", str(plan),
                           "--out", str(tmp_path / "run"), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_USAGE and not (tmp_path / "run").exists()
    line, = done.stderr.strip().splitlines()
    assert f"{plan}:1: not a batch decision" in line and "duplicates" in line
