"""User-file tasks: jsonl (configurable fields and scorers) and traces (recorded trajectories)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from combee_fast.errors import ConfigError
from combee_fast.schema import Example, Message, Rollout
from combee_fast.tasks import JsonlTask, TaskDataError, TracesTask, get_task, verify_split


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def qa_file(tmp_path) -> Path:
    return write_lines(
        tmp_path / "qa.jsonl",
        [
            '{"q": "Capital of France?", "a": "Paris", "level": 2, "source": "atlas", "hard": false, "tags": ["geo"]}',
            "",
            '{"q": "Two plus two?", "a": 4}',
            '{"q": "Pi to two places?", "a": "3.14"}',
        ],
    )


def test_jsonl_reads_configured_fields_and_keeps_scalar_extras_as_meta(qa_file):
    task = get_task("jsonl", path=qa_file, input_field="q", target_field="a")
    split = task.load("all")
    assert split.manifest.rows == 3 and split.manifest.source == str(qa_file)
    first, second, _ = split.examples
    assert (first.input, first.target, first.split, first.index) == ("Capital of France?", "Paris", "all", 0)
    assert first.meta == {"level": "2", "source": "atlas", "hard": "false"}
    assert second.target == "4" and second.index == 1
    assert [example.index for example in task.load("all[1:3]").examples] == [1, 2]


def test_jsonl_exact_scorer(qa_file):
    task = JsonlTask(path=qa_file, input_field="q", target_field="a")
    example = task.load("all").examples[0]
    assert task.score(example, "  Paris ").value == 1.0
    wrong = task.score(example, "paris")
    assert wrong.value == 0.0 and wrong.feedback == "Your answer 'paris' does not match the expected 'Paris'."
    assert JsonlTask(path=qa_file, input_field="q", target_field="a", case_sensitive=False).score(example, "PARIS").value == 1.0


def test_jsonl_numeric_scorer_with_tolerance_or_decimals(tmp_path):
    path = write_lines(tmp_path / "n.jsonl", ['{"input": "x", "target": "3.14159"}'])
    tolerant = get_task("jsonl", path=path, scorer="numeric", tolerance=0.01)
    example = tolerant.load("all").examples[0]
    assert tolerant.score(example, "3.15").value == 1.0
    assert tolerant.score(example, "3.152").value == 0.0
    rounded = get_task("jsonl", path=path, scorer="numeric", decimals=3)
    assert rounded.score(example, "3.1416").value == 1.0
    assert rounded.score(example, "3.141").value == 0.0
    exact = get_task("jsonl", path=path, scorer="numeric")
    assert exact.score(example, "3.14159").value == 1.0 and exact.score(example, "3.1416").value == 0.0
    with pytest.raises(ConfigError, match="decimals or tolerance, not both"):
        get_task("jsonl", path=path, scorer="numeric", tolerance=0.1, decimals=2)


def test_jsonl_regex_scorer_matches_the_whole_answer(tmp_path):
    path = write_lines(tmp_path / "r.jsonl", [r'{"input": "x", "target": "\\d{3}-\\d{4}"}'])
    task = get_task("jsonl", path=path, scorer="regex")
    example = task.load("all").examples[0]
    assert task.score(example, " 555-1234 ").value == 1.0
    assert task.score(example, "call 555-1234").value == 0.0


def test_jsonl_named_splits(tmp_path, qa_file):
    val = write_lines(tmp_path / "val.jsonl", ['{"q": "Q", "a": "A"}'])
    task = JsonlTask(splits={"train": qa_file, "val": val}, input_field="q", target_field="a", name="quiz")
    assert task.split_names() == ("train", "val")
    assert task.load("val").examples[0].id == "val:0" and task.load("val").manifest.task == "quiz"
    with pytest.raises(ConfigError, match="exactly one of path="):
        JsonlTask(path=qa_file, splits={"val": val})
    with pytest.raises(ConfigError, match="unknown scorer 'fuzzy'"):
        JsonlTask(path=qa_file, scorer="fuzzy")


@pytest.mark.parametrize(
    ("line", "options", "problem"),
    [
        ('{"input": "x", "target": "y"', {}, "invalid JSON"),
        ('["x", "y"]', {}, "expected a JSON object, got array"),
        ('{"target": "y"}', {}, "missing field 'input'"),
        ('{"input": "x"}', {}, "missing field 'target'"),
        ('{"input": 3, "target": "y"}', {}, "field 'input' must be a string, got number"),
        ('{"input": "x", "target": null}', {}, "field 'target' must be a string or a number, got null"),
        ('{"input": "x", "target": "many"}', {"scorer": "numeric"}, "target 'many' is not a number"),
        ('{"input": "x", "target": "(unclosed"}', {"scorer": "regex"}, "not a valid regular expression"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path, line, options, problem):
    path = write_lines(tmp_path / "bad.jsonl", ['{"input": "ok", "target": "1"}', "", line])
    with pytest.raises(TaskDataError) as caught:
        get_task("jsonl", path=path, **options).load("all")
    assert str(caught.value).startswith(f"{path}:3: ")
    assert problem in str(caught.value)
    assert caught.value.line == 3


def trace(**fields) -> str:
    record = {
        "id": "t1",
        "task": "Fix the failing build.",
        "trajectory": "ran make; saw missing header; installed libfoo-dev; make passed",
        "answer": "installed libfoo-dev",
        "score": 1.0,
        "feedback": "build green",
    }
    record.update(fields)
    return orjson.dumps({key: value for key, value in record.items() if value is not ...}).decode()


def test_traces_become_scored_round_zero_rollouts(tmp_path):
    path = write_lines(
        tmp_path / "traces.jsonl",
        [
            trace(),
            trace(id="t2", answer=None, score=0.0, feedback="timed out", ground_truth="ok", bullet_ids=["str-00001"],
                  version=7),
        ],
    )
    task = TracesTask(path=path)
    rollouts = task.load_rollouts("all")
    assert all(isinstance(rollout, Rollout) for rollout in rollouts)
    first, second = rollouts
    assert first.round == 0 and first.id == "all:0#r0"
    assert first.messages == (
        Message("user", "Fix the failing build."),
        Message("assistant", "ran make; saw missing header; installed libfoo-dev; make passed"),
    )
    assert (first.answer, first.score, first.feedback, first.correct) == ("installed libfoo-dev", 1.0, "build green", True)
    assert first.reasoning == first.messages[1].content and first.usage.role == "trace"
    assert first.example.meta == {"trace_id": "t1"} and first.example.target is None
    assert (second.answer, second.score, second.correct, second.bullet_ids) == (None, 0.0, False, ("str-00001",))
    assert (first.version, second.version) == (None, 7)  # the context version the trace ran with, when known
    assert second.example.target == "ok"
    split = task.load("all")
    assert split.examples == tuple(rollout.example for rollout in rollouts)
    verify_split(task.load("all"), split.manifest)


def test_traces_score_new_answers_only_against_ground_truth(tmp_path):
    path = write_lines(tmp_path / "t.jsonl", [trace(), trace(id="t2", ground_truth="42")])
    task = get_task("traces", path=path, scorer="numeric")
    without, with_truth = task.load("all").examples
    assert task.score(with_truth, "42.0").value == 1.0
    with pytest.raises(ValueError, match=r"all:0 \(trace 't1'\) has no ground_truth"):
        task.score(without, "anything")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (trace(task=...), "Object missing required field `task`"),
        (trace(answer=...), "Object missing required field `answer`"),
        (trace(score="high"), "Expected `float`, got `str` - at `$.score`"),
        (trace(score=1.5), "score must be in [0, 1], got 1.5"),
        (trace(id=7), "Expected `str`, got `int` - at `$.id`"),
        (trace(outcome="x"), "unknown field `outcome`"),
        (trace(id="t0"), "duplicate id 't0' (first on line 1)"),
        ('{"id": "t9", ', "not a trace record"),
    ],
)
def test_trace_errors_name_file_line_and_key(tmp_path, line, problem):
    path = write_lines(tmp_path / "t.jsonl", [trace(id="t0"), line])
    with pytest.raises(TaskDataError) as caught:
        TracesTask(path=path).load_rollouts("all")
    assert str(caught.value).startswith(f"{path}:2: ")
    assert problem in str(caught.value)


def test_examples_are_plain_schema_values(qa_file):
    example = JsonlTask(path=qa_file, input_field="q", target_field="a").load("all").examples[2]
    assert example == Example(2, "Pi to two places?", "3.14", "all", {})


def test_a_byte_order_mark_and_windows_line_endings_are_read_transparently(tmp_path):
    plain = write_lines(tmp_path / "plain.jsonl", ['{"input": "x", "target": "1"}', '{"input": "y", "target": "2"}'])
    marked = tmp_path / "marked.jsonl"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes().replace(b"\n", b"\r\n"))
    plain_split, marked_split = JsonlTask(path=plain).load("all"), JsonlTask(path=marked).load("all")
    assert marked_split.examples == plain_split.examples
    assert marked_split.manifest.sha256 == plain_split.manifest.sha256
