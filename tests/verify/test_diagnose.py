"""`combee diagnose` in real processes on the simulated endpoint: GO for Formula, NO-GO with the
right reason for a world whose reflections carry no information and for a budget too small."""

from __future__ import annotations

import json

import pytest

from combee_fast.record.usage import usage_path
from tests.cli.test_cli import _combee
from tests.verify.small_card import small_card

FAST = ("--hardware", "hosted", "--serial-time-scale", "0.0001", "--resamples", "2000")


def _diagnose(tmp_path, name, *extra, **card):
    path = small_card(tmp_path / name, test="test[0:50]", **card)
    done = _combee("diagnose", str(path), *FAST, "--out", str(tmp_path / name / "out"), *extra)
    return path, done


@pytest.mark.slow
def test_diagnose_says_go_for_formula_and_writes_a_one_page_report_with_a_plot(tmp_path):
    card, done = _diagnose(tmp_path, "go", train="train")
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("decision=GO plateau=yes above_empty=yes converged_score=")
    out = tmp_path / "go" / "out"
    report = (out / "report.md").read_text()
    assert report.startswith("# diagnose formula-combee-b40: GO")
    assert "![held-out score against rollouts](convergence.png)" in report
    decision = report.split("## GO for parallelisation")[1].split("## Provenance")[0].strip().splitlines()
    assert decision[0].startswith("- plateau reached") and "## Provenance" in report
    assert "[diagnose] checkpoint 0 of" in done.stderr and "[diagnose] checkpoint 1 of" in done.stderr
    assert "[sequential] step 1" in done.stderr  # the serial baseline's own progress
    assert "## GO for parallelisation" in report and "| evaluates rollouts |" in report
    assert (out / "convergence.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "[report.md](report.md)" in (out / "index.md").read_text()
    assert "Cost to reach the target score" in report and "rollouts," in report
    filled = (out / "card.diagnosed.toml").read_text()
    assert '= "unknown"' not in filled and "converged_score = 0." in filled
    assert _combee("plan", str(out / "card.diagnosed.toml")).returncode == 0
    record = json.loads(usage_path(card).read_text())
    assert [e["use"] for e in record if e["role"] == "test"] == ["report"]


@pytest.mark.slow
def test_diagnose_says_no_go_when_reflections_carry_no_information(tmp_path):
    _, done = _diagnose(tmp_path, "noinfo", "--sim-world", "uninformative", train="train[0:100]")
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[-1].startswith("decision=NO-GO plateau=yes above_empty=no")
    assert "the method is the problem: change it before scaling" in done.stderr
    assert "add serial rollouts first" not in done.stderr
    assert "## NO-GO for parallelisation" in (tmp_path / "noinfo" / "out" / "report.md").read_text()


@pytest.mark.slow
def test_diagnose_says_no_go_when_the_budget_is_too_small_to_reach_a_plateau(tmp_path):
    _, done = _diagnose(tmp_path, "budget", train="train[0:200]", replace={"rollouts = 5000": "rollouts = 40"})
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[-1].startswith("decision=NO-GO plateau=no")
    assert "add serial rollouts first" in done.stderr and "budget rollouts spent: 40 of 40" in done.stderr
    assert "the method is the problem" not in done.stderr
    ledger = (tmp_path / "budget" / "out" / "baseline" / "ledger.jsonl").read_text().splitlines()
    assert 40 <= sum(json.loads(row)["rollouts"] for row in ledger) < 40 + 4  # the step that spent it ends the run


def test_diagnose_refuses_an_unknown_hardware_class(tmp_path):
    card = small_card(tmp_path / "c")
    done = _combee("diagnose", str(card), "--hardware", "tpu")
    assert done.returncode == 2 and "no hardware class 'tpu'" in done.stderr and done.stderr.count("\n") == 1
