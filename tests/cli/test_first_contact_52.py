"""First contact, round three (issue 52): each finding reproduced as a user meets it, through the
CLI against real processes and files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from combee_fast.cli import main
from tests.sim_server_process import sim_server_process


def _combee(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd)


# -- finding 3: honest intervals and a paired comparison ---------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "demo"
    done = _combee("demo", "--train-limit", "40", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def test_compare_paired_on_two_demo_runs_prints_the_difference_with_its_interval_and_exact_test(demo: Path) -> None:
    done = _combee("compare", "--paired", str(demo / "sequential"), str(demo / "naive"))
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("| test |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    rows, a, b, difference, a_better, b_better, p = cells[1:]
    results = {name: [json.loads(line) for line in (demo / name / "results.jsonl").read_text().splitlines()]
               for name in ("sequential", "naive")}
    assert int(rows) == len(results["sequential"]) == len(results["naive"])
    mean = {name: 100 * sum(r["score"] for r in rs) / len(rs) for name, rs in results.items()}
    assert (float(a), float(b)) == (round(mean["sequential"], 1), round(mean["naive"], 1))
    value, interval = difference.split(" [")
    lower, upper = (float(x) for x in interval.rstrip("]").split(", "))
    assert lower <= float(value) <= upper and lower < upper
    pairs = list(zip(results["sequential"], results["naive"]))
    assert int(a_better) == sum(x["score"] > y["score"] for x, y in pairs)
    assert int(b_better) == sum(x["score"] < y["score"] for x, y in pairs)
    assert 0 < float(p) <= 1
    same = _combee("compare", "--paired", str(demo / "combee"), str(demo / "combee"))
    same_row = next(line for line in same.stdout.splitlines() if line.startswith("| test |"))
    assert "+0.0 [-" in same_row and same_row.rstrip(" |").endswith("| 1")  # identical runs: open interval, p = 1


def test_the_demo_page_pairs_each_method_with_sequential_and_no_interval_collapses(demo: Path) -> None:
    report = (demo / "report.md").read_text()
    assert "| naive - sequential |" in report and "| combee - sequential |" in report
    for name in ("sequential", "naive", "combee"):
        interval = json.loads((demo / name / "eval.json").read_text())["interval"]
        assert interval["lower"] < interval["upper"]  # exact: even 100% has a lower end below it


def test_compare_paired_needs_two_runs_with_a_shared_evaluated_split(demo: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--paired", *(str(demo / m) for m in ("sequential", "naive", "combee"))]) != 0
    assert "takes two runs, got 3" in capsys.readouterr().err
    assert main(["compare", "--paired", str(demo / "combee"), str(demo)]) != 0
    assert "share no evaluated split" in capsys.readouterr().err
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "eval.json").write_text(json.dumps({"split": "test", "accuracy": 1.0}))
    (broken / "results.jsonl").write_text('{"row": "x", "score": 1.0}\n{"row": \n')
    assert main(["compare", "--paired", str(demo / "combee"), str(broken)]) != 0
    assert f"{broken / 'results.jsonl'}:2: not a result row" in capsys.readouterr().err


# -- finding 4: a run on a slow endpoint says what it is doing -------------------------------


@pytest.fixture()
def slow_server() -> Iterator[str]:
    """A ``combee sim-server`` on loopback whose every call takes 2 real seconds; its base URL."""
    with sim_server_process("--world", "formula", "--constant-latency", "2", "--time-scale", "1") as url:
        yield url


def test_a_slow_endpoint_gets_heartbeat_lines_while_a_step_runs(slow_server: str, tmp_path: Path) -> None:
    out = tmp_path / "slow"
    done = _combee("learn", "--endpoint", slow_server, "--model", "sim", "--task", "formula", "--train-split",
                   "train[0:4]", "--val-split", "val[0:2]", "--batch-size", "4", "--heartbeat", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr
    beats = [line for line in done.stderr.splitlines() if line.startswith("[working] ")]
    assert any(line.startswith("[working] step 1, ") for line in beats), done.stderr
    assert all(re.search(r"\d+ calls done \(\d+ failed\), \d+ in flight, [\d.,]+ tokens/s since the last line; "
                         r"waiting for ", line) for line in beats), beats
    assert any(re.search(r"waiting for (generator|reflector|curator)( \(\d+\))", line) for line in beats), beats
    summary = json.loads((out / "summary.json").read_text())
    replies = [json.loads(line) for line in (out / "replies.jsonl").read_text().splitlines()]
    accounted = {part: sum(summary["accounting"][part]["calls"].values()) for part in ("train", "validation")}
    assert len(replies) == accounted["train"] + accounted["validation"] > 0  # every answer of the run, once
    by_role = {role: sum(r["role"] == role for r in replies) for role in summary["accounting"]["train"]["calls"]}
    assert by_role["generator"] == summary["accounting"]["train"]["calls"]["generator"] + accounted["validation"]
    assert all(r["step"] == 1 and (r["reply"] or r["failed"]) for r in replies)


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("learned") / "run"
    done = _combee("learn", "--task", "formula", "--train-split", "train[0:8]", "--val-split", "val[0:4]",
                   "--batch-size", "4", "--eval-every", "1", "--time-scale", "0.0001", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out, done


def test_every_validation_keeps_each_examples_input_answer_target_score_and_feedback(learned) -> None:
    out, _ = learned
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    ledger = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    validated = [row["step"] + 1 for row in ledger if row["val_accuracy"] is not None]
    assert sorted({r["step"] for r in rows}) == validated and len(rows) == 4 * len(validated)
    assert {"input", "answer", "target", "score", "feedback", "row", "id"} <= rows[0].keys()
    last = [r for r in rows if r["step"] == validated[-1]]
    assert sum(r["score"] for r in last) / len(last) == pytest.approx(summary["final_val_accuracy"])
    assert all(r["feedback"] and r["target"] for r in last)


def test_the_run_finished_line_and_the_progress_elapsed_agree(learned) -> None:
    _, done = learned
    elapsed = re.findall(r"elapsed (\d+:\d\d:\d\d)", done.stderr)
    finished = re.search(r"Run finished in (\d+:\d\d:\d\d) wall, (\d+:\d\d:\d\d) of it in its steps", done.stderr)
    assert elapsed and finished, done.stderr

    def seconds(clock: str) -> int:
        h, m, s = (int(x) for x in clock.split(":"))
        return 3600 * h + 60 * m + s

    # one clock: the total was read after the last progress line (then the run writes its files)
    assert seconds(finished[2]) <= seconds(finished[1]) and seconds(elapsed[-1]) <= seconds(finished[1])


def test_eval_ends_with_a_human_line_and_keeps_what_was_answered(learned, tmp_path: Path) -> None:
    run, _ = learned
    done = _combee("eval", "--playbook", str(run / "best.json"), "--task", "formula", "--split", "test[0:6]",
                   "--time-scale", "0.0001", "--out", str(tmp_path / "eval"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    tail = done.stderr.strip().splitlines()[-3:]
    assert tail[0].startswith("Evaluation on test[0:6]: ") and "% CI " in tail[0]
    assert "of 6 examples answered" in tail[0]
    assert tail[1].endswith("results.jsonl  (input, answer, target, score, feedback)")
    rows = [json.loads(line) for line in (tmp_path / "eval" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and all(r["input"] and r["target"] and r["feedback"] for r in rows)
    assert sum(r["score"] for r in rows if r["answered"]) / report["answered"] == pytest.approx(report["accuracy"])
    replies = (tmp_path / "eval" / "replies.jsonl").read_text().splitlines()
    assert len(replies) == 6


def test_the_report_says_which_model_at_which_endpoint_served_each_role(learned) -> None:
    out, _ = learned
    report = (out / "report.md").read_text()
    header = next(line for line in report.splitlines() if line.startswith("| role | model at endpoint |"))
    served = re.compile(r"\| (generator|reflector|curator|reducer) \| sim at http://127\.0\.0\.1:\d+/v1 \|")
    rows = [line for line in report.splitlines() if served.match(line)]
    assert header and len(rows) == 4, report


def test_an_agent_reply_its_agent_could_not_use_is_one_line_of_replies_jsonl(tmp_path: Path) -> None:
    """An echoing server answers every agent turn with plain text, no tool call: each reply is
    unusable to the agent, kept once in replies.jsonl and once as a failure in errors.jsonl."""
    config, out = tmp_path / "tools.toml", tmp_path / "run"
    config.write_text('[agent]\ntool_calls = "on"\n')
    with sim_server_process("--world", "echo", "--time-scale", "0.0001") as url:
        done = _combee("learn", "--config", str(config), "--task", "terminal", "--sandbox", "none", "--endpoint", url,
                       "--model", "sim", "--train-split", "train[0:2]", "--val-split", "selection[0:1]",
                       "--batch-size", "2", "--out", str(out), "--quiet")
    assert done.returncode == 3 and "calls failed" in done.stderr, done.stderr
    calls = json.loads((out / "calls.json").read_text())
    replies = [json.loads(line) for line in (out / "replies.jsonl").read_text().splitlines()]
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    turns = [r for r in replies if r["role"] == "generator"]
    assert len(turns) == calls["generator"] > 0  # one line a call
    assert len([e for e in errors if e.get("role") == "generator"]) == len(turns)  # each unusable, kept once


def test_the_plain_compare_table_shows_each_score_with_its_interval(learned, tmp_path: Path) -> None:
    run, _ = learned
    scored = _combee("eval", "--playbook", str(run / "best.json"), "--task", "formula", "--split", "test[0:8]",
                     "--time-scale", "0.0001", "--out", str(run / "eval-test"))
    assert scored.returncode == 0, scored.stderr
    shown = _combee("compare", str(run))
    assert shown.returncode == 0, shown.stderr
    header, _, row = shown.stdout.splitlines()[:3]
    cells = dict(zip([c.strip() for c in header.strip("|").split("|")], [c.strip() for c in row.strip("|").split("|")]))
    evaluation = json.loads((run / "eval-test" / "eval.json").read_text())
    low, high = (100 * evaluation["interval"][end] for end in ("lower", "upper"))
    assert cells["test[0:8]"] == f"{100 * evaluation['accuracy']:.1f}% [{low:.1f}, {high:.1f}]"
    summary = json.loads((run / "summary.json").read_text())
    validation = re.fullmatch(r"([\d.]+)% \[([\d.]+), ([\d.]+)\]", cells["val[0:4] (validation)"])
    assert validation is not None and float(validation[1]) == round(100 * summary["final_val_accuracy"], 1)
    assert float(validation[2]) < float(validation[3])  # 4 rows: a wide interval, never a point
