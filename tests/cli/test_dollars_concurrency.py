"""Dollars and visible concurrency, end to end against a real ``combee sim-server`` on loopback:
prices set per endpoint show the dollars the run's own token counts cost (``summary.json``,
``report.md``, the closing summary on stderr), a bad price is one line and exit 2, and each role's
calls in flight are reported requested and achieved, with a line when a lower limit held a role
below half its cap."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from combee_fast.errors import EXIT_OK, EXIT_USAGE
from tests.sim_server_process import sim_server_process

SPLITS = ("--train-split", "train[0:40]", "--val-split", "val[0:10]", "--batch-size", "20")
PRICES = {"generator": (3.0, 15.0), "reflector": (0.5, 1.5), "curator": (3.0, 15.0), "reducer": (3.0, 15.0)}


SRC = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(SRC)}  # this checkout's package, from any working directory


def _combee(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=ENV)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A ``combee sim-server`` process on a free loopback port; its base URL."""
    with sim_server_process("--preset", "flat", "--time-scale", "0.0005", env=ENV) as url:
        yield url


def _learn(server: str, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    done = _combee("learn", "--endpoint", server, "--model", "sim", *SPLITS, "--out", str(out), *extra, cwd=out.parent)
    assert done.returncode == EXIT_OK, done.stderr
    return done, json.loads((out / "summary.json").read_text())


def _ledger(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]


def test_prices_give_the_dollars_of_the_runs_own_tokens_everywhere(server: str, tmp_path: Path) -> None:
    out = tmp_path / "priced"
    done, summary = _learn(server, out, "--price", "3/15", "--price", "reflector=0.5/1.5")
    rows = _ledger(out)
    expected: dict[str, float] = {}
    for row in rows:  # every row's dollars are its own tokens at its role's price
        for role, prompt in row["prompt_tokens"].items():
            price_in, price_out = PRICES[role]
            dollars = (prompt * price_in + row["completion_tokens"][role] * price_out) / 1e6
            assert math.isclose(row["dollars"][role], dollars, rel_tol=1e-9)
            expected[role] = expected.get(role, 0.0) + dollars
    assert sum(sum(row["prompt_tokens"].values()) + sum(row["completion_tokens"].values()) for row in rows) \
        == summary["tokens"]
    total = sum(expected.values())
    assert total > 0 and math.isclose(summary["dollars"], total, abs_tol=1e-6)
    assert summary["dollars_by_role"].keys() == expected.keys()
    assert all(math.isclose(summary["dollars_by_role"][r], d, abs_tol=1e-6) for r, d in expected.items())
    assert summary["candidates_accepted"] > 0
    assert math.isclose(summary["dollars_per_improvement"], total / summary["candidates_accepted"], abs_tol=1e-6)
    report = (out / "report.md").read_text()
    shown = f"${total:.4f}"
    assert f"| {summary['tokens']:,} | {shown} |" in report  # the cost table
    calls = summary["accounting"]["train"]["calls"]["reflector"]
    assert re.search(rf"\| reflector \| sim at \S+ \| {calls:,} \| 0 \| 0 \| [\d.,]+ \| "
                     rf"\${expected['reflector']:.4f} \|", report), report  # the per-role table: served by, calls...
    assert f"Dollars per accepted improvement: ${total / summary['candidates_accepted']:.4f}" in report
    assert f"  cost: {shown} (generator ${expected['generator']:.4f}, reflector ${expected['reflector']:.4f}" \
        in done.stderr
    assert f"${total / summary['candidates_accepted']:.4f} per accepted improvement" in done.stderr
    # the loop's own validation calls: apart from the learning steps' tokens and dollars, priced alike
    validation = summary["accounting"]["validation"]
    assert list(validation["calls"]) == ["generator"] and validation["calls"]["generator"] % 10 == 0  # val[0:10]
    spent = sum((validation["prompt_tokens"][r] * PRICES[r][0] + validation["completion_tokens"][r] * PRICES[r][1]) / 1e6
                for r in validation["calls"])
    assert summary["validation_tokens"] == sum(validation["prompt_tokens"].values()) + \
        sum(validation["completion_tokens"].values()) > 0
    assert spent > 0 and math.isclose(summary["validation_dollars"], spent, abs_tol=1e-6)
    assert f"The loop's own validation calls, not in the table: {summary['validation_tokens']:,} tokens, " \
           f"${spent:.4f}." in report


def test_without_a_price_the_cost_is_unknown_never_zero(server: str, tmp_path: Path) -> None:
    out = tmp_path / "unpriced"
    done, summary = _learn(server, out, "--price", "generator=3/15")
    assert summary["dollars"] is None and summary["dollars_per_improvement"] is None
    assert summary["dollars_by_role"]["generator"] > 0 and summary["dollars_by_role"]["reflector"] is None
    assert summary["validation_dollars"] > 0  # the generator alone validates, and it has a price
    assert "| unknown (no price) |" in (out / "report.md").read_text()
    assert "  cost: unknown, not every role is priced (generator $" in done.stderr
    assert "reflector unpriced" in done.stderr and "$0.00" not in done.stderr


def test_a_price_in_the_config_file_prices_the_in_process_simulated_endpoint(tmp_path: Path) -> None:
    (tmp_path / "run.toml").write_text("[endpoints.default]\nprice_in = 2.0\nprice_out = 8.0\n")
    out = tmp_path / "embedded"
    done = _combee("learn", "--config", "run.toml", *SPLITS, "--sim-preset", "flat", "--time-scale", "0.0001",
                   "--out", str(out), cwd=tmp_path)
    assert done.returncode == EXIT_OK, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    tokens_in = sum(sum(row["prompt_tokens"].values()) for row in _ledger(out))
    tokens_out = sum(sum(row["completion_tokens"].values()) for row in _ledger(out))
    assert math.isclose(summary["dollars"], (2 * tokens_in + 8 * tokens_out) / 1e6, abs_tol=1e-6)


@pytest.mark.parametrize(("flag", "named"), [
    ("-1/2", "got '-1/2'"), ("3", "got '3'"), ("1/x", "got '1/x'"), ("reflector=0.5/-1", "got 'reflector=0.5/-1'"),
    ("nosuch=1/2", "endpoints for unknown roles: nosuch"),
])
def test_a_bad_price_is_one_line_and_exit_2(server: str, tmp_path: Path, flag: str, named: str) -> None:
    done = _combee("learn", "--endpoint", server, "--model", "sim", *SPLITS, f"--price={flag}",
                   "--out", str(tmp_path / "bad"), cwd=tmp_path)
    assert done.returncode == EXIT_USAGE and done.stderr.count("\n") == 1 and named in done.stderr, done.stderr
    assert not (tmp_path / "bad").exists()


def test_a_price_in_a_config_file_must_be_whole_and_not_negative(tmp_path: Path) -> None:
    for text, named in (("price_in = -1.0\nprice_out = 2.0", "price_in must be >= 0"),
                        ("price_in = 1.0", "give price_in and price_out together")):
        (tmp_path / "run.toml").write_text(f"[endpoints.default]\n{text}\n")
        done = _combee("learn", "--config", "run.toml", *SPLITS, "--out", str(tmp_path / "bad"), cwd=tmp_path)
        assert done.returncode == EXIT_USAGE and done.stderr.count("\n") == 1 and named in done.stderr, done.stderr


def test_calls_in_flight_are_requested_and_achieved_per_role(server: str, tmp_path: Path) -> None:
    out = tmp_path / "capped"
    done, summary = _learn(server, out, "--concurrency", "4")
    generator = summary["concurrency"]["generator"]
    assert generator["requested"] == 4 and 1 < generator["peak"] <= 4 and 1 <= generator["mean"] <= 4
    for row in _ledger(out):
        for role, figures in row["concurrency"].items():
            assert figures["requested"] == 4 and 1 <= figures["peak"] <= 4 and figures["mean"] <= figures["peak"]
    assert f"| unknown (no price) | 4 | {generator['peak']} | {generator['mean']:.1f} |" in (out / "report.md").read_text()
    assert summary["concurrency_notes"] == [] and "below its cap" not in done.stderr  # the cap itself was reached


def test_a_role_held_below_half_its_cap_by_a_lower_limit_is_said(server: str, tmp_path: Path) -> None:
    out = tmp_path / "workers"
    done, summary = _learn(server, out, "--concurrency", "64", "--workers", "2")
    generator = summary["concurrency"]["generator"]
    assert generator["requested"] == 64 and generator["mean"] < 32
    (note,) = [n for n in summary["concurrency_notes"] if n.startswith("generator:")]
    assert "of the 64 its endpoint allows, while work was queued; likely capped by map.workers=2 (--workers)" in note
    assert f"**Below its cap:** {note}" in (out / "report.md").read_text()
    assert f"  below its cap: {note}" in done.stderr


def test_compare_shows_dollars_and_dollars_per_improvement(server: str, tmp_path: Path) -> None:
    out = tmp_path / "priced"
    _, summary = _learn(server, out, "--price", "3/15", "--quiet")
    done = _combee("compare", str(out), cwd=tmp_path)
    assert done.returncode == EXIT_OK, done.stderr
    header, _, row = done.stdout.splitlines()[:3]
    cells = dict(zip(header.strip("|").split("|"), row.strip("|").split("|")))
    cells = {name.strip(): value.strip() for name, value in cells.items()}
    assert cells["dollars"] == f"${summary['dollars']:.4f}"
    assert cells["dollars/improvement"] == f"${summary['dollars_per_improvement']:.4f}"


def test_an_evaluation_says_its_dollars_or_that_they_are_unknown(server: str, tmp_path: Path) -> None:
    out = tmp_path / "learned"
    _learn(server, out, "--quiet")
    for name, price in (("priced", ("--price", "3/15")), ("unpriced", ())):
        done = _combee("eval", "--endpoint", server, "--model", "sim", "--split", "val[0:10]", "--playbook",
                       str(out / "best.json"), "--out", str(tmp_path / name), *price, cwd=tmp_path)
        assert done.returncode == EXIT_OK, done.stderr
        report = json.loads((tmp_path / name / "eval.json").read_text())
        page = (tmp_path / name / "report.md").read_text()
        if price:
            assert report["dollars"] > 0 and report["dollars_by_role"]["generator"] == report["dollars"]
            assert f"dollars ${report['dollars']:.4f} (generator ${report['dollars']:.4f})." in page
        else:
            assert report["dollars"] is None and report["dollars_by_role"] == {"generator": None}
            assert "dollars unknown (no price)." in page
