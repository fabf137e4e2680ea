"""Split roles and the held-out splits carved from the bundled files."""

from __future__ import annotations

import json

import pytest

from combee_fast.errors import ConfigError
from combee_fast.tasks.finer import FinerTask
from combee_fast.tasks.formula import FormulaTask
from combee_fast.tasks.heldout import check_use, split_role
from combee_fast.tasks.jsonl import JsonlTask


@pytest.mark.parametrize("task", [FormulaTask(), FinerTask()], ids=lambda t: t.name)
def test_bundled_tasks_carve_selection_and_test_from_val_without_overlap(task):
    val, selection, test = task.load("val"), task.load("selection"), task.load("test")
    assert selection.manifest.rows + test.manifest.rows == val.manifest.rows
    assert [e.input for e in val.examples] == [e.input for e in selection.examples + test.examples]
    assert not {e.input for e in selection.examples} & {e.input for e in test.examples}
    assert not {e.input for e in task.load("train").examples} & {e.input for e in test.examples}
    assert task.split_names()[:2] == ("train", "val")  # the existing specs come first, unchanged


def test_the_existing_formula_splits_keep_their_content_hashes():
    formula = FormulaTask()
    assert formula.load("train").manifest.sha256 == "aea676feb2354462ba22d3c2c73a18b780e1193b05597beaeb0250ae9021b482"
    assert formula.load("val").manifest.sha256 == "09948f7f24af5f2331f69a047ef086649873756cbf8626d19d23029346e98933"
    assert formula.load("test").manifest.rows == 100 and formula.load("selection").manifest.rows == 200


def test_roles_come_from_the_task_then_the_name_and_a_card_overrides(tmp_path):
    formula = FormulaTask()
    assert [split_role(formula, s) for s in ("train", "val", "selection", "test", "test[0:10]")] == [
        "train", "selection", "selection", "test", "test"]
    path = tmp_path / "a.jsonl"
    path.write_text('{"input": "q", "target": "a"}\n')
    files = JsonlTask(splits={"train_a": path, "dev": path, "test_b": path})
    assert [split_role(files, s) for s in ("train_a", "dev", "test_b[0:1]")] == ["train", "selection", "test"]
    assert split_role(files, "dev", {"dev": "test"}) == "test"


@pytest.mark.parametrize(("use", "doing", "instead"), [
    ("select", "select the best playbook on", "--val-split selection"),
    ("tune", "tune the batch size on", "--train-split train"),
    ("train", "learn from", "--train-split train"),
])
def test_only_a_report_may_use_a_test_split(use, doing, instead):
    formula = FormulaTask()
    with pytest.raises(ConfigError, match=f"split 'test\\[0:5\\]' has role test.*does not {doing} it.*{instead}") as caught:
        check_use(formula, "test[0:5]", use)
    assert "\n" not in str(caught.value)
    assert check_use(formula, "test", "report") == "test"
    assert check_use(formula, "selection", use) == "selection"


@pytest.mark.parametrize("task_class", [FormulaTask, FinerTask], ids=["formula", "finer"])
def test_an_external_test_file_replaces_the_bundled_test_split(tmp_path, task_class):
    from combee_fast.tasks.ace_format import DATA_DIR
    from combee_fast.tasks.finer import FINER_FILE
    from combee_fast.tasks.formula import FORMULA_FILES

    source = DATA_DIR / (FORMULA_FILES["val"] if task_class is FormulaTask else FINER_FILE)
    external = tmp_path / "heldout.jsonl"
    external.write_bytes(b"\n".join(source.read_bytes().splitlines()[-7:]) + b"\n")
    task = task_class(test_file=str(external))
    test = task.load("test")
    assert test.manifest.rows == 7 and test.manifest.source == str(external)
    assert split_role(task, "test") == "test"
    assert task.load("train").manifest == task_class().load("train").manifest  # nothing else moves


def test_splits_are_compared_with_the_test_split_by_content_not_by_name(tmp_path):
    from combee_fast.tasks.heldout import check_disjoint, row_keys

    formula = FormulaTask()
    for spec in ("selection", "val[0:200]", "train"):
        check_disjoint(formula, formula.load(spec), "select")  # disjoint from test: allowed
    with pytest.raises(ConfigError) as raised:
        check_disjoint(formula, formula.load("val[190:210]"), "tune")
    assert "split 'val[190:210]' shares 10 of its 20 rows with test split 'test'" in str(raised.value)
    assert "tune the batch size on it" in str(raised.value)
    check_disjoint(formula, formula.load("val"), "report")  # reporting on test rows is what test is for
    copy = tmp_path / "copy.jsonl"  # the test rows under another file and another name
    copy.write_text("".join(json.dumps({"input": e.input, "target": e.target}) + "\n"
                            for e in formula.load("test[0:3]").examples))
    task = JsonlTask(splits={"train": str(copy), "heldout": str(copy)})
    copied = task.load("train")
    assert row_keys(copied) == row_keys(formula.load("test[0:3]")) and split_role(task, "heldout") == "selection"
    with pytest.raises(ConfigError, match="shares 3 of its 3 rows with test split 'heldout'"):
        check_disjoint(task, copied, "train", declared={"heldout": "test"})


@pytest.mark.parametrize("task", [FormulaTask(), FinerTask()], ids=lambda t: t.name)
def test_the_default_selection_split_is_disjoint_from_test_and_val_is_not(task):
    from combee_fast.config import TaskConfig
    from combee_fast.tasks.heldout import check_disjoint

    check_disjoint(task, task.load(TaskConfig().val_split), "select")
    with pytest.raises(ConfigError, match="shares 100 of its"):
        check_disjoint(task, task.load("val"), "select")
