"""Cost per improvement: every learner's summary.json, report.md and ``combee compare`` say the
candidates a run explored and accepted and its tokens per accepted one, counted as the learner
defines a candidate (:mod:`combee_fast.money.improvements`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from combee_fast.ace.kind import ACE
from combee_fast.ace.playbook import Playbook
from combee_fast.ace.records import Delta, Op, OpKind

SMALL = ("--task", "formula", "--train-split", "train[0:12]", "--val-split", "val[0:6]", "--quiet")


def _combee(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", *args], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))


def _ledger(run: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]


def test_an_ace_candidate_is_a_content_op_and_tags_are_not_counted() -> None:
    playbook = Playbook.empty()
    first = playbook.apply(Delta(ops=(Op(kind=OpKind.ADD, section="general", content="check units"),)))[0]
    bullet = first.bullets()[0].id
    _, report = first.apply(Delta(ops=(
        Op(kind=OpKind.TAG, bullet_id=bullet, helpful=1),
        Op(kind=OpKind.ADD, section="general", content="round at the end"),
        Op(kind=OpKind.UPDATE, bullet_id="no-such-bullet", content="x"),
        Op(kind=OpKind.TAG, bullet_id="no-such-bullet", helpful=1),
    )))
    assert report.tags_applied == 1
    assert ACE.improvements(report) == (2, 1)  # the ADD kept, the UPDATE of a missing bullet turned down


@pytest.mark.slow
@pytest.mark.parametrize("method", ["combee", "async-gepa", "textgrad", "combee-textgrad"])
def test_every_learner_reports_its_cost_per_improvement(tmp_path: Path, method: str) -> None:
    out = tmp_path / method
    done = _combee("learn", *SMALL, "--method", method, "--out", str(out))
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    explored, accepted = summary["candidates_explored"], summary["candidates_accepted"]
    assert 0 < accepted <= explored
    assert summary["tokens_per_improvement"] == round(summary["tokens"] / accepted, 1)
    rows = _ledger(out)
    if method.endswith("gepa"):  # every accepted child is a candidate of the pool past the seed
        assert accepted == summary["candidates"] - 1 == len(list((out / "candidates").glob("c*.json"))) - 1
    elif method.endswith("textgrad"):  # each accepted update made one version of the prompt
        assert accepted == rows[-1]["version"]
    else:  # every bullet added is an accepted content op
        assert sum(int(row["added"]) for row in rows) <= accepted
    report = (out / "report.md").read_text()
    assert f"Candidates explored {explored:,}, accepted {accepted:,}; tokens per accepted improvement: " \
           f"{summary['tokens_per_improvement']:,.0f}." in report
    compared = _combee("compare", str(out))
    assert compared.returncode == 0, compared.stderr
    header, _, row = compared.stdout.splitlines()[:3]
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")]))
    assert (cells["explored"], cells["accepted"]) == (f"{explored:,}", f"{accepted:,}")
    assert cells["tokens/improvement"] == f"{summary['tokens_per_improvement']:,.0f}"
