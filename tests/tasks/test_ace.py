"""The bundled ACE tasks (formula, finer) on their real data files, and split pinning."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import msgspec
import orjson
import pytest

from combee_fast.errors import ConfigError, SplitChangedError
from combee_fast.schema import Example
from combee_fast.tasks import FinerTask, FormulaTask, SplitManifest, Task, TaskDataError, get_task, verify_split
from combee_fast.tasks.ace_format import DATA_DIR
from combee_fast.tasks.finer import FINER_FILE
from combee_fast.tasks.formula import FORMULA_FILES, formula_name


def file_lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().split(b"\n") if line.strip()]


@pytest.fixture(scope="module")
def formula() -> FormulaTask:
    return FormulaTask()


@pytest.fixture(scope="module")
def finer() -> FinerTask:
    return FinerTask()


def test_bundled_data_travels_with_its_notice_and_licence():
    readme = (DATA_DIR / "README.md").read_text()
    assert "Apache License 2.0" in readme and "keep this notice" in readme
    assert "Apache License" in (DATA_DIR / "LICENSE-Apache-2.0.txt").read_text()
    for name in [*FORMULA_FILES.values(), FINER_FILE]:
        assert name in readme


def test_every_builtin_task_satisfies_the_protocol(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"input": "q", "target": "a"}\n')
    for task in (get_task("formula"), get_task("finer"), get_task("jsonl", path=path), get_task("traces", path=path)):
        assert isinstance(task, Task)


def test_get_task_rejects_unknown_names_and_options():
    with pytest.raises(ConfigError, match="unknown task 'nope'.*formula"):
        get_task("nope")
    with pytest.raises(ConfigError, match="task 'formula': bad options"):
        get_task("formula", colour="red")


def test_formula_splits_have_the_documented_sizes_and_fifty_formulas(formula):
    train, val = formula.load("train"), formula.load("val")
    assert (train.manifest.rows, len(train.examples), val.manifest.rows) == (500, 500, 300)
    train_formulas = {example.meta["formula"] for example in train.examples}
    assert len(train_formulas) == 50
    assert {example.meta["formula"] for example in val.examples} <= train_formulas
    first = train.examples[0]
    assert first.meta == {"formula": "Current Ratio"} and first.id == "train:0" and first.target == "2.0"
    assert [example.index for example in val.examples] == list(range(300))


def test_formula_meta_matches_the_question_text_of_every_row(formula):
    for example in formula.load("train").examples + formula.load("val").examples:
        assert example.input.startswith(f"Use formula {example.meta['formula']} to answer")


@pytest.mark.parametrize(
    ("question", "name"),
    [
        ("Use formula Net Present Value (NPV) to answer the question.", "Net Present Value (NPV)"),
        ("use the formula  Jensen's Alpha\n to answer this", "Jensen's Alpha"),
        ("Use formula Modigliani–Miller Theorem to answer", "Modigliani–Miller Theorem"),
        ("Compute the current ratio.", None),
    ],
)
def test_formula_name_is_parsed_robustly(question, name):
    assert formula_name(question) == name


def test_every_formula_row_scores_one_against_its_own_target(formula):
    for example in formula.load("train").examples + formula.load("val").examples:
        score = formula.score(example, example.target)
        assert score.value == 1.0, (example.id, score)


@pytest.mark.parametrize(
    ("answer", "target", "value"),
    [
        ("$1,234.5", "1234.50", 1.0),
        ("1234.5 dollars", "1234.5", 1.0),
        ("The answer is 1234.504.", "1234.50", 1.0),
        ("1234.51", "1234.50", 0.0),
        ("-3.2", "-3.20", 1.0),
        ("\u22123.2", "-3.2", 1.0),
        ("-$3.20", "-3.2", 1.0),
        ("12%", "12.0", 1.0),
        ("1.2e3", "1200", 1.0),
        (".5", "0.50", 1.0),
        ("2.505", "2.51", 1.0),  # half away from zero, exactly: binary floats would say 2.50
        ("2.5049", "2.51", 0.0),
        ("-2.505", "-2.51", 1.0),
    ],
)
def test_formula_scores_numbers_at_two_decimals(formula, answer, target, value):
    example = Example(0, "q", target, "train")
    assert formula.score(example, answer).value == value


def test_formula_feedback_says_what_a_grader_would(formula):
    example = formula.load("val[0:1]").examples[0]
    expected = f"{float(example.target):.2f}"
    wrong = formula.score(example, "123456.789")
    assert wrong.value == 0.0
    assert wrong.feedback.startswith(f"Your answer 123456.79 does not match the expected {expected}")
    unreadable = formula.score(example, "about a third")
    assert unreadable.value == 0.0 and "could not be read as a number" in unreadable.feedback
    assert expected in unreadable.feedback
    missing = formula.score(example, None)
    assert missing.value == 0.0 and missing.feedback.startswith("No answer")
    percent = formula.score(Example(0, "q", "0.2", "val"), "20%")
    assert percent.value == 0.0 and "not a percentage" in percent.feedback


def test_finer_cuts_its_file_into_train_and_val(finer):
    lines = file_lines(DATA_DIR / FINER_FILE)
    train, val = finer.load("train"), finer.load("val")
    assert (train.manifest.rows, val.manifest.rows) == (300, 200)
    assert orjson.loads(lines[0])["context"] == train.examples[0].input
    assert orjson.loads(lines[300])["context"] == val.examples[0].input
    assert val.examples[0].index == 0 and val.examples[0].id == "val:0"
    assert train.manifest.sha256 == hashlib.sha256(b"".join(line + b"\n" for line in lines[:300])).hexdigest()


def test_every_finer_row_has_four_entities_and_scores_one_on_its_target(finer):
    for example in finer.load("train").examples + finer.load("val").examples:
        tags = example.meta["tags"].split(",")
        entities = orjson.loads(example.meta["entities"])
        assert len(tags) == len(entities) == 4
        assert example.meta["tags"] == example.target
        assert all(f'entity "{entity}"' in example.input for entity in entities)
        assert finer.score(example, example.target).value == 1.0


def test_finer_scores_per_entity_and_names_the_wrong_ones(finer):
    example = finer.load("val[0:1]").examples[0]
    tags = example.target.split(",")
    entities = orjson.loads(example.meta["entities"])
    answer = ", ".join([tags[0], "Revenues", tags[2], tags[3]])
    score = finer.score(example, answer)
    assert score.value == 0.75
    assert f'entity 2 "{entities[1]}"' in score.feedback and f"expected {tags[1]}" in score.feedback
    assert "entity 1" not in score.feedback
    short = finer.score(example, ",".join(tags[:2]))
    assert short.value == 0.5 and "gave no tag" in short.feedback and "You gave 2 tags for 4 entities" in short.feedback
    assert finer.score(example, "\n".join(tags)).value == 1.0
    assert finer.score(example, None).value == 0.0


def test_slices_keep_row_indices_and_are_pinned_separately(formula):
    whole = formula.load("val")
    part = formula.load("val[10:20]")
    assert part.manifest.split == "val[10:20]" and part.manifest.rows == 10
    assert [example.index for example in part.examples] == list(range(10, 20))
    assert part.examples == whole.examples[10:20]
    assert part.manifest.sha256 != whole.manifest.sha256
    assert formula.load("val[:5]").manifest.split == "val[0:5]"
    assert formula.load("val[295:]").manifest.split == "val[295:300]"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("holdout", "has no split 'holdout'; splits: train, val, selection, test"),
        ("val[0:301]", r"slice \[0:301\] of split 'val' is out of range \(the split has 300 rows\)"),
        ("val[20:10]", "out of range"),
        ("val[-5:]", "bad split spec"),
        ("val[1:2:3]", "bad split spec"),
    ],
)
def test_bad_split_specs_are_refused_clearly(formula, spec, message):
    with pytest.raises(ConfigError, match=message):
        formula.load(spec)


@pytest.fixture
def data_copy(tmp_path) -> Path:
    for name in FORMULA_FILES.values():
        shutil.copy(DATA_DIR / name, tmp_path / name)
        (tmp_path / name).chmod(0o644)
    return tmp_path


def rewrite_row(path: Path, row: int, target: str) -> None:
    lines = path.read_bytes().split(b"\n")
    record = orjson.loads(lines[row])
    record["target"] = target
    lines[row] = orjson.dumps(record)
    path.write_bytes(b"\n".join(lines))


def test_verify_split_refuses_a_changed_file_and_names_both_hashes(data_copy):
    task = FormulaTask(data_dir=data_copy)
    recorded = task.load("val").manifest
    recorded_slice = task.load("val[0:100]").manifest
    verify_split(task.load("val"), recorded)  # unchanged: accepted
    rewrite_row(data_copy / FORMULA_FILES["val"], 150, "999.99")
    changed = task.load("val")
    with pytest.raises(SplitChangedError) as caught:
        verify_split(changed, recorded)
    message = str(caught.value)
    assert "'formula'" in message and "'val'" in message
    assert recorded.sha256 in message and changed.manifest.sha256 in message
    verify_split(task.load("val[0:100]"), recorded_slice)  # the edit lies outside this slice


def test_verify_split_refuses_a_manifest_of_another_split(formula):
    recorded = formula.load("val").manifest
    with pytest.raises(SplitChangedError, match="recorded task 'formula' split 'val'"):
        verify_split(formula.load("train"), recorded)


def test_manifest_round_trips_and_line_endings_do_not_change_the_hash(data_copy):
    task = FormulaTask(data_dir=data_copy)
    recorded = task.load("train").manifest
    assert msgspec.json.decode(msgspec.json.encode(recorded), type=SplitManifest) == recorded
    path = data_copy / FORMULA_FILES["train"]
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n") + b"\r\n\r\n")
    verify_split(task.load("train"), recorded)


def test_a_malformed_bundled_style_file_names_file_and_line(data_copy):
    path = data_copy / FORMULA_FILES["train"]
    lines = path.read_bytes().split(b"\n")
    lines[3] = b'{"context": "Compute it.", "target": "1.0"}'
    lines[7] = b'{"context": 5}'
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(TaskDataError, match=rf"{path}:4: no 'Use formula <NAME> to answer'"):
        FormulaTask(data_dir=data_copy).load("train")
    with pytest.raises(TaskDataError, match=rf"{path}:8: not an ACE row"):
        FormulaTask(data_dir=data_copy).load("train[5:10]")


def test_missing_data_file_is_named(tmp_path):
    with pytest.raises(TaskDataError, match="formula_train_subset_500.jsonl: cannot read file"):
        FormulaTask(data_dir=tmp_path).load("train")


def test_finer_refuses_a_file_too_short_for_its_splits(tmp_path):
    lines = file_lines(DATA_DIR / FINER_FILE)
    (tmp_path / FINER_FILE).write_bytes(b"\n".join(lines[:350]) + b"\n")
    task = FinerTask(data_dir=tmp_path)
    assert task.load("train").manifest.rows == 300
    with pytest.raises(TaskDataError, match=rf"{FINER_FILE}: split 'val' needs 500 rows but the file has 350"):
        task.load("val")
