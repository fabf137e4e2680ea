"""`combee plan`, and `learn`/`eval` under a card, in real processes on the simulated endpoint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from combee_fast.record.usage import usage_path
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
    assert not (tmp_path / "run").exists()


def test_learn_under_a_card_records_its_uses_and_keeps_the_card(tmp_path):
    card = card_copy(tmp_path)
    out = tmp_path / "run"
    done = _combee("learn", "--card", str(card), "--train-split", "train[0:10]", "--val-split", "selection[0:10]",
                   *FAST, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert (out / "card.toml").read_text() == card.read_text()
    record = json.loads(usage_path(card).read_text())
    assert [(e["split"], e["role"], e["use"], e["run"]) for e in record] == [
        ("train[0:10]", "train", "train", str(out)), ("selection[0:10]", "selection", "select", str(out))]
    evaluated = _combee("eval", "--card", str(card), "--split", "test", "--playbook", str(out / "best.json"),
                        "--sim-preset", "flat", "--time-scale", "0.0001")
    assert evaluated.returncode == 0, evaluated.stderr
    record = json.loads(usage_path(card).read_text())
    assert (record[-1]["split"], record[-1]["role"], record[-1]["use"], record[-1]["rows"]) == ("test", "test", "report", 100)
    plan = _combee("plan", str(card))
    assert plan.returncode == 0 and "test report x1" in plan.stdout.splitlines()[-1]


def test_eval_under_a_card_with_an_external_test_file(tmp_path):
    from combee_fast.tasks.ace_format import DATA_DIR
    from combee_fast.tasks.formula import FORMULA_FILES, FormulaTask

    held_out = tmp_path / "heldout.jsonl"
    held_out.write_bytes(b"\n".join((DATA_DIR / FORMULA_FILES["val"]).read_bytes().splitlines()[250:270]) + b"\n")
    card = card_copy(tmp_path)
    sha = FormulaTask(test_file=str(held_out)).load("test").manifest.sha256
    text = card.read_text().replace("options = {}", f'options = {{test_file = "{held_out}"}}')
    text = text.replace("rows = 100", "rows = 20").replace("3ac33fda31cdec0c707f01e11c44d219b5d470d44bea7944e73295a12d28b7ae", sha)
    card.write_text(text)
    assert _combee("plan", str(card)).returncode == 0
    from combee_fast.ace.playbook import Playbook

    empty = tmp_path / "empty.json"
    Playbook.empty().save(empty)
    done = _combee("eval", "--card", str(card), "--task-option", f"test_file={held_out}", "--split", "test",
                   "--playbook", str(empty), "--sim-preset", "flat", "--time-scale", "0.0001")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["examples"] == 20
    record = json.loads(usage_path(card).read_text())
    assert [(e["split"], e["use"], e["rows"], e["sha256"]) for e in record] == [("test", "report", 20, sha)]


def test_learn_under_a_card_refuses_splits_the_card_does_not_name(tmp_path):
    card = card_copy(tmp_path)
    done = _combee("learn", "--card", str(card), "--train-split", "train[0:10]", "--val-split", "val[0:10]",
                   *FAST, "--out", str(tmp_path / "run"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "its selection split is 'selection'; the run names --val-split 'val[0:10]'" in done.stderr
    assert not usage_path(card).exists()
    other = _combee("learn", "--card", str(card), "--task", "finer", *FAST, "--out", str(tmp_path / "r2"))
    assert other.returncode == 2 and "is for task 'formula'" in other.stderr


def test_plan_refuses_a_card_whose_record_contradicts_it(tmp_path):
    card = card_copy(tmp_path)
    usage_path(card).write_text(json.dumps([{
        "time": "2026-01-01T00:00:00Z", "run": "runs/x", "command": "learn", "task": "formula", "split": "test",
        "role": "test", "use": "select", "rows": 100, "sha256": "3ac3"}]))
    done = _combee("plan", str(card))
    assert done.returncode == 2 and "never used to tune" in done.stderr and "runs/x used test to select" in done.stderr


def test_learn_under_a_card_stops_cleanly_when_its_budget_is_spent_and_says_which(tmp_path):
    card = card_copy(tmp_path)
    card.write_text(card.read_text().replace("tokens = 50_000_000", "tokens = 20_000"))
    out = tmp_path / "run"
    done = _combee("learn", "--card", str(card), "--train-split", "train[0:40]", "--val-split", "selection[0:10]",
                   "--sim-preset", "flat", "--time-scale", "0.0001", "--batch-size", "4", "--quiet", "--out", str(out))
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_by"].startswith("budget tokens spent: ") and summary["samples"] < 40
    assert "stopped early: budget tokens spent" in done.stderr
    assert (out / "final.json").exists() and (out / "best.json").exists()


def test_a_gepa_run_under_a_card_stops_cleanly_on_its_budget_and_keeps_it_when_resumed(tmp_path):
    card = card_copy(tmp_path)
    card.write_text(card.read_text().replace("rollouts = 5000", "rollouts = 60"))
    out = tmp_path / "run"
    done = _combee("learn", "--card", str(card), "--method", "gepa", "--train-split", "train[0:40]",
                   "--val-split", "selection[0:10]", "--sim-preset", "flat", "--time-scale", "0.0001", "--quiet",
                   "--out", str(out))
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["learner"] == "gepa" and summary["stopped_by"].startswith("budget rollouts spent: ")
    assert 60 <= summary["rollouts"] < 60 + 10 + 2 * 3  # the step that spent it: at most a validation and two gradings
    assert (out / "card.toml").exists() and (out / "final.json").exists()
    resumed = _combee("learn", "--resume", str(out), "--quiet")  # the card's budget still holds
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["stopped_by"] == summary["stopped_by"]
    assert json.loads(resumed.stdout)["rollouts"] == summary["rollouts"]


def test_verify_refuses_a_configuration_whose_endpoints_are_no_hardware_class_of_the_card(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('method = "combee"\n[endpoints.default]\nurl = "http://127.0.0.1:9/v1"\nmodel = "m"\n')
    done = _combee("verify", str(card_copy(tmp_path)), "--config", str(config), "--out", str(tmp_path / "v"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"--config {config}: the configuration names endpoints (generator=http://127.0.0.1:9/v1" in done.stderr
    assert "[[hardware]] class with endpoints" in done.stderr and not (tmp_path / "v").exists()


def test_plan_escapes_a_cards_control_and_bidi_characters(tmp_path):
    """A card's escape codes and U+202E reached the terminal raw (issue 53): `combee plan` writes
    them as \\xNN and \\uNNNN, so a card cannot retitle the terminal or reorder a line."""
    card = card_copy(tmp_path)
    text = card.read_text().replace('name = "formula-combee-b40"', 'name = "b40\\u001b]0;pwned\\u0007\\u202etxt.exe"', 1)
    card.write_text(text)
    done = _combee("plan", str(card))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "card b40\\x1b]0;pwned\\x07\\u202etxt.exe: complete"
    assert "\x1b" not in done.stdout + done.stderr and "\u202e" not in done.stdout + done.stderr
