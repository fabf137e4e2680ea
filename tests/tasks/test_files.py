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
            trace(id="t2", answer=None, score=0.0, feedback="timed out", ground_truth="ok", cited=["str-00001"],
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
    assert (second.answer, second.score, second.correct, second.cited) == (None, 0.0, False, ("str-00001",))
    assert (first.version, second.version) == (None, 7)  # the context version the trace ran with, when known
    assert second.example.target == "ok"
    split = task.load("all")
    assert split.examples == tuple(rollout.example for rollout in rollouts)
    verify_split(task.load("all"), split.manifest)


OLDER_TRACES = Path(__file__).parents[1] / "data" / "traces-before-cited.jsonl"
"""A traces file as written before ``cited`` was named so (its key ``bullet_ids``): a run's
``trajectories.jsonl`` line, with its episode, and a hand-written trace."""


def test_traces_written_before_cited_was_named_so_load(tmp_path):
    journal_line, hand_line = TracesTask(path=OLDER_TRACES).load_rollouts("all")
    assert journal_line.cited == journal_line.trajectory.cited == ("build-00001", "gen-00002")
    assert (hand_line.cited, hand_line.version, hand_line.example.target) == (("str-00001",), 3,
                                                                              "installed libfoo-dev")
    renamed = [orjson.dumps({("cited" if key == "bullet_ids" else key): value for key, value in row.items()}).decode()
               for row in map(orjson.loads, OLDER_TRACES.read_bytes().splitlines())]
    assert TracesTask(path=write_lines(tmp_path / "new.jsonl", renamed)).load_rollouts("all") == (journal_line, hand_line)


def test_a_trace_naming_cited_twice_is_no_record(tmp_path):
    path = write_lines(tmp_path / "both.jsonl", [trace(cited=["a"], bullet_ids=["b"])])
    with pytest.raises(TaskDataError, match="bullet_ids"):
        TracesTask(path=path).load("all")


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


def test_a_slice_of_a_large_file_takes_memory_for_its_rows_only(tmp_path):
    """Issue 53: a file was read whole, then every row of it kept, to select ten (about 6x the file's
    size in memory for ``all[0:10]``; 14x to load it all). Rows now stream: measured in a process of
    its own (Python's allocations at their peak), loading ten rows of a 40 MB file costs under 5 MB."""
    import subprocess
    import sys

    data = tmp_path / "large.jsonl"
    with data.open("w") as out:
        for index in range(200_000):
            out.write(f'{{"input": "{"x" * 170}{index}", "target": "{index % 7}"}}\n')
    script = f"""
import tracemalloc
from combee_fast.tasks import get_task
task = get_task("jsonl", path={str(data)!r}, hash_splits=False)
tracemalloc.start()
split = task.load("all[0:10]")
print(len(split.examples), tracemalloc.get_traced_memory()[1])
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    rows, peak = map(int, done.stdout.split())
    assert data.stat().st_size > 39e6 and rows == 10
    assert peak < 5e6, f"{peak:,} bytes allocated at the peak to load 10 rows"


def test_a_row_over_the_bound_is_one_error_naming_file_and_line(tmp_path):
    from combee_fast.tasks.splits import MAX_ROW_BYTES

    data = tmp_path / "long.jsonl"
    data.write_bytes(b'{"input": "a", "target": "b"}\n' + b'{"input": "' + b"y" * MAX_ROW_BYTES + b'", "target": "b"}\n')
    task = get_task("jsonl", path=data, hash_splits=False)
    with pytest.raises(TaskDataError, match=r"long\.jsonl:2: the row is over 16,777,216 bytes, the most of one row"):
        task.load("all")


def test_a_selection_over_the_row_bound_asks_for_a_slice(tmp_path):
    from combee_fast.tasks.splits import MAX_SELECTED_ROWS

    data = tmp_path / "many.jsonl"
    data.write_text('{"input": "a", "target": "b"}\n' * (MAX_SELECTED_ROWS + 1))
    task = get_task("jsonl", path=data, hash_splits=False)
    with pytest.raises(ConfigError, match=r"split 'all' selects over 1,000,000 rows, the most loaded at once: give "
                                          r"a slice, e.g. 'all\[0:1000000\]'"):
        task.load("all")
    assert len(task.load("all[5:15]").examples) == 10


def test_reading_a_user_file_reserves_a_chunk_not_the_whole_limit(tmp_path):
    """``read_regular`` read with ``read(limit + 1)``, which reserves 1 GB for every file it read,
    a config of 40 bytes included."""
    import errno
    import tracemalloc

    from combee_fast.files import READ_CHUNK_BYTES, read_regular

    small = tmp_path / "small.toml"
    small.write_text("[map]\nworkers = 4\n")
    tracemalloc.start()
    try:
        assert read_regular(small) == b"[map]\nworkers = 4\n"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * READ_CHUNK_BYTES, peak
    (large := tmp_path / "large.bin").write_bytes(b"z" * 3000)
    with pytest.raises(OSError) as refused:
        read_regular(large, limit=2999)
    assert refused.value.errno == errno.EFBIG and "larger than 2,999 bytes" in str(refused.value)
    assert read_regular(large, limit=3000) == b"z" * 3000
