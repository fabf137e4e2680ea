"""`combee verify` in real processes on the simulated endpoint, on a small sliced card."""

from __future__ import annotations

import json
import re

import pytest

from combee_fast.record.usage import usage_path
from tests.cli.test_cli import _combee
from tests.verify.small_card import run_config, small_card

FAST_SERIAL = ("--serial-time-scale", "0.0001", "--resamples", "2000", "--quiet")


@pytest.mark.slow
def test_verify_passes_combee_fails_an_unkept_claim_and_reuses_the_cached_baseline(tmp_path):
    card = small_card(tmp_path / "cards", replace={"speedup = 10.0": "speedup = 3.0"})
    combee = run_config(tmp_path, "combee", "combee", 10)
    cache = tmp_path / "cache"
    done = _combee("verify", str(card), "--config", str(combee), "--cache", str(cache), "--out", str(tmp_path / "v1"),
                   *FAST_SERIAL)
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("verdict=PASS min_speedup=") and "report=" in last
    report = (tmp_path / "v1" / "report.md").read_text()
    for cell in ("h200/seed0", "h200/seed1", "h200/seed2", "hosted/seed0", "hosted/seed1", "hosted/seed2"):
        assert f"| {cell} |" in report
    assert "Serial baseline cells from the cache: 0 of 6" in report and "Role separation" in report
    plans = report.split("Batch plan per cell")[1]
    for cell in ("h200/seed0", "h200/seed1", "h200/seed2", "hosted/seed0", "hosted/seed1", "hosted/seed2"):
        assert re.search(rf"^- {cell}: 10( x \d+)?(, \d+)?$", plans, re.MULTILINE), (cell, plans)
    assert "| speedup (simulated) | speedup (wall clock) |" in report and "## Provenance" in report
    assert all((tmp_path / "v1" / "runs" / cell / "report.md").is_file() and
               (tmp_path / "v1" / "runs" / cell / "prompt.txt").is_file()
               for cell in [p.name for p in (tmp_path / "v1" / "runs").iterdir()])
    assert {p.name for p in (tmp_path / "v1").iterdir()} >= {"report.md", "cells.png", "accuracy-time.png", "index.md"}
    assert len(list(cache.glob("*.json"))) == 6
    record = json.loads(usage_path(card).read_text())
    assert {(e["role"], e["use"]) for e in record} == {("train", "train"), ("selection", "select"), ("test", "report")}

    # the same card, another claim the configuration cannot keep: FAIL naming every cell; no baseline reruns
    stamps = {p: p.stat().st_mtime_ns for p in cache.glob("*.json")}
    card.write_text(card.read_text().replace("speedup = 3.0", "speedup = 1000.0"))
    failed = _combee("verify", str(card), "--config", str(combee), "--cache", str(cache),
                     "--out", str(tmp_path / "v2"), *FAST_SERIAL)
    assert failed.returncode == 1, failed.stderr
    assert failed.stdout.splitlines()[-1].startswith("verdict=FAIL")
    assert failed.stderr.count("broken cell") == 6 and "< claimed 1000x" in failed.stderr
    assert "Serial baseline cells from the cache: 6 of 6" in (tmp_path / "v2" / "report.md").read_text()
    assert {p: p.stat().st_mtime_ns for p in cache.glob("*.json")} == stamps


@pytest.mark.slow
def test_verify_gives_a_verdict_for_a_combee_gepa_configuration_against_serial_gepa(tmp_path):
    card = small_card(tmp_path / "cards", replace={"speedup = 10.0": "speedup = 1.5"})
    gepa = run_config(tmp_path, "cgepa", "combee-gepa", 10,
                      extra="[gepa]\nmax_metric_calls = 100\ncombee_minibatch = 10\nminibatch = 3")
    done = _combee("verify", str(card), "--config", str(gepa), "--cache", str(tmp_path / "cache"),
                   "--out", str(tmp_path / "v"), *FAST_SERIAL)
    assert done.returncode in (0, 1), done.stderr
    assert done.stdout.splitlines()[-1].startswith(("verdict=PASS ", "verdict=FAIL "))
    report = (tmp_path / "v" / "report.md").read_text()
    for cell in ("h200/seed0", "h200/seed1", "h200/seed2", "hosted/seed0", "hosted/seed1", "hosted/seed2"):
        assert f"| {cell} |" in report
    cached = [json.loads(p.read_text()) for p in (tmp_path / "cache").glob("*.json")]
    assert len(cached) == 6 and {cell["method"] for cell in cached} == {"gepa"}  # the serial baseline is serial GEPA


def test_verify_refuses_too_few_seeds(tmp_path):
    card = small_card(tmp_path / "cards")
    combee = run_config(tmp_path, "combee", "combee", 10)
    seeds = _combee("verify", str(card), "--config", str(combee), "--seeds", "0,1")
    assert seeds.returncode == 2 and "at least 3 distinct seeds" in seeds.stderr


@pytest.mark.slow
def test_verify_on_the_noisy_world_reports_difference_intervals_that_are_not_zero(tmp_path):
    """In the default world equal playbooks answer alike (common random numbers), so a cell's
    paired difference can be [0, 0]; in the noisy world answers are drawn per call."""
    card = small_card(tmp_path / "cards", replace={"speedup = 10.0": "speedup = 1.0"})
    combee = run_config(tmp_path, "combee", "combee", 10)
    done = _combee("verify", str(card), "--config", str(combee), "--sim-world", "noisy", "--cache",
                   str(tmp_path / "cache"), "--out", str(tmp_path / "v"), *FAST_SERIAL)
    assert done.returncode in (0, 1), done.stderr
    rows = [line for line in (tmp_path / "v" / "report.md").read_text().splitlines() if line.startswith("| h200/")
            or line.startswith("| hosted/")]
    intervals = [re.findall(r"\[([-+]?[\d.]+), ([-+]?[\d.]+)\]", row)[2] for row in rows[:6]]
    assert len(intervals) == 6 and all(float(lower) < float(upper) for lower, upper in intervals), intervals
    assert len(list((tmp_path / "cache").glob("*.json"))) == 6  # the serial baseline ran in the noisy world too
