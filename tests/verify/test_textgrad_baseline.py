"""TextGrad as a card's serial baseline: ``plan`` lists the serial methods a card may name and
refuses any other; ``diagnose`` and ``verify`` run serial TextGrad, in real processes on the
simulated endpoint, on a small sliced card."""

from __future__ import annotations

import json

import pytest

from combee_fast.textgrad.variable import PromptVariable
from tests.cli.test_cli import _combee
from tests.verify.small_card import run_config, small_card

TEXTGRAD_BASELINE = {'method = "sequential"': 'method = "textgrad"'}
FAST_SERIAL = ("--serial-time-scale", "0.0001", "--resamples", "2000")


def test_plan_lists_the_serial_baselines_a_card_may_name_and_refuses_another(tmp_path) -> None:
    card = small_card(tmp_path / "ok", replace=TEXTGRAD_BASELINE)
    done = _combee("plan", str(card))
    assert done.returncode == 0, done.stderr
    assert "serial baseline: textgrad (" in done.stdout
    named = next(line for line in done.stdout.splitlines() if line.startswith("serial baselines a card may name: "))
    assert all(f"{name} (" in named for name in ("sequential", "gepa", "textgrad"))
    bad = small_card(tmp_path / "bad", replace={'method = "sequential"': 'method = "combee-textgrad"'})
    refused = _combee("plan", str(bad))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "serial_baseline.method 'combee-textgrad' is not a serial method" in refused.stderr
    assert "sequential, gepa, textgrad" in refused.stderr


@pytest.mark.slow
def test_diagnose_runs_serial_textgrad_when_the_card_names_it(tmp_path) -> None:
    card = small_card(tmp_path / "c", train="train[0:60]", test="test[0:50]", replace=TEXTGRAD_BASELINE)
    out = tmp_path / "out"
    done = _combee("diagnose", str(card), "--hardware", "hosted", *FAST_SERIAL, "--out", str(out))
    assert done.returncode in (0, 1), done.stderr
    assert done.stdout.splitlines()[-1].startswith(("decision=GO ", "decision=NO-GO "))
    rows = [json.loads(line) for line in (out / "baseline" / "ledger.jsonl").read_text().splitlines()]
    assert {row["method"] for row in rows} == {"textgrad"} and all(row["batch_size"] == 1 for row in rows)
    assert sum(row["calls"]["textgrad_forward"] for row in rows) == 60
    final = PromptVariable.load(out / "baseline" / "final.json")
    assert len(final) > len(PromptVariable.seed()) and (out / "baseline" / "prompts").is_dir()
    assert '= "unknown"' not in (out / "card.diagnosed.toml").read_text()


@pytest.mark.slow
def test_verify_compares_combee_textgrad_with_serial_textgrad_in_every_cell(tmp_path) -> None:
    card = small_card(tmp_path / "cards", train="train[0:40]", replace={**TEXTGRAD_BASELINE,
                                                                         "speedup = 10.0": "speedup = 2.0"})
    config = run_config(tmp_path, "ctg", "combee-textgrad", 10)
    done = _combee("verify", str(card), "--config", str(config), "--cache", str(tmp_path / "cache"),
                   "--out", str(tmp_path / "v"), *FAST_SERIAL, "--quiet")
    assert done.returncode in (0, 1), done.stderr
    assert done.stdout.splitlines()[-1].startswith(("verdict=PASS ", "verdict=FAIL "))
    report = (tmp_path / "v" / "report.md").read_text()
    for cell in ("h200/seed0", "h200/seed1", "h200/seed2", "hosted/seed0", "hosted/seed1", "hosted/seed2"):
        assert f"| {cell} |" in report
    cached = [json.loads(p.read_text()) for p in (tmp_path / "cache").glob("*.json")]
    assert len(cached) == 6 and {cell["method"] for cell in cached} == {"textgrad"}
    ours = list((tmp_path / "v" / "runs").iterdir())
    assert len(ours) == 6 and all(json.loads(line)["method"] == "combee-textgrad" for run in ours
                                  for line in (run / "ledger.jsonl").read_text().splitlines())
