"""`combee plan`, and `learn`/`eval` under a card, in real processes on the simulated endpoint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.cli.test_cli import _combee

CARD = Path(__file__).parents[2] / "cards" / "formula.toml"
FAST = ("--sim-preset", "flat", "--time-scale", "0.0001", "--batch-size", "10", "--quiet")


def card_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "cards" / "formula.toml"
    copy.parent.mkdir()
    shutil.copy(CARD, copy)
    return copy


def test_plan_prints_a_summary_of_the_shipped_card_and_exits_0(tmp_path):
    done = _combee("plan", str(card_copy(tmp_path)))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "card formula-combee-b40: complete"
    assert "no run has used these splits yet" in lines[-1]


def test_plan_lists_every_missing_field_on_one_line_and_exits_2(tmp_path):
    card = card_copy(tmp_path)
    text = card.read_text()
    for line in ("gpu_type = \"H200\"\n", "binding = \"rollouts\"\n", "owner = \"combee_fast maintainers\"\n"):
        text = text.replace(line, "")
    card.write_text(text)
    done = _combee("plan", str(card))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "3 missing fields: hardware[0].gpu_type, budget.binding, eval_set.owner" in done.stderr


def test_plan_refuses_an_unreadable_card(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    done = _combee("plan", str(bad))
    assert done.returncode == 2 and "not a readable TOML file" in done.stderr and done.stderr.count("\n") == 1


def test_learn_refuses_to_select_on_the_test_split(tmp_path):
    done = _combee("learn", "--train-split", "train[0:10]", "--val-split", "test[0:10]", *FAST,
                   "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "split 'test[0:10]' has role test" in done.stderr and "select the best playbook" in done.stderr
    assert not (tmp_path / "run" / "final.json").exists()


def test_learn_under_a_card_records_its_uses_and_keeps_the_card(tmp_path):
    card = card_copy(tmp_path)
    out = tmp_path / "run"
    done = _combee("learn", "--card", str(card), "--train-split", "train[0:10]", "--val-split", "selection[0:10]",
                   *FAST, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert (out / "card.toml").read_text() == card.read_text()
    record = json.loads((card.parent / "formula.usage.json").read_text())
    assert [(e["split"], e["role"], e["use"], e["run"]) for e in record] == [
        ("train[0:10]", "train", "train", str(out)), ("selection[0:10]", "selection", "select", str(out))]
    evaluated = _combee("eval", "--card", str(card), "--split", "test", "--playbook", str(out / "best.json"),
                        "--sim-preset", "flat", "--time-scale", "0.0001")
    assert evaluated.returncode == 0, evaluated.stderr
    record = json.loads((card.parent / "formula.usage.json").read_text())
    assert (record[-1]["split"], record[-1]["role"], record[-1]["use"], record[-1]["rows"]) == ("test", "test", "report", 100)
    plan = _combee("plan", str(card))
    assert plan.returncode == 0 and "test report x1" in plan.stdout.splitlines()[-1]


def test_learn_under_a_card_refuses_splits_the_card_does_not_name(tmp_path):
    card = card_copy(tmp_path)
    done = _combee("learn", "--card", str(card), "--train-split", "train[0:10]", "--val-split", "val[0:10]",
                   *FAST, "--out", str(tmp_path / "run"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "its selection split is 'selection'; the run names --val-split 'val[0:10]'" in done.stderr
    assert not (card.parent / "formula.usage.json").exists()
    other = _combee("learn", "--card", str(card), "--task", "finer", *FAST, "--out", str(tmp_path / "r2"))
    assert other.returncode == 2 and "is for task 'formula'" in other.stderr


def test_plan_refuses_a_card_whose_record_contradicts_it(tmp_path):
    card = card_copy(tmp_path)
    (card.parent / "formula.usage.json").write_text(json.dumps([{
        "time": "2026-01-01T00:00:00Z", "run": "runs/x", "command": "learn", "task": "formula", "split": "test",
        "role": "test", "use": "select", "rows": 100, "sha256": "3ac3"}]))
    done = _combee("plan", str(card))
    assert done.returncode == 2 and "never used to tune" in done.stderr and "runs/x used test to select" in done.stderr
