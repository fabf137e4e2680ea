"""First contact, round three (issue 52): each finding reproduced as a user meets it, through the
CLI against real processes and files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from combee_fast.cli import main


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

