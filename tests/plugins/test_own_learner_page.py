"""Issue 52, finding 2: docs/own-learner.md's learner, written on :class:`~combee_fast.protocols.LearnerBase`
and installed from outside the tree as a user installs a plug-in (``pip install`` of a project
offering it by entry point), is accounted exactly: each real model call counted once in
``summary.json`` as in ``calls.json``, and priced (its no-call proposals and right answers carry
``NO_CALL``). Before, its no-call parts were calls of a nameless role: 95 calls where calls.json
held 52, and ``--price 1/2`` said ``cost: unknown``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.docs_pages import block_of
from tests.plugins.projects import learner_project, pip_install

COMBEE = Path(sys.executable).with_name("combee")


def test_the_own_learner_page_example_installed_as_a_plugin_is_counted_once_per_call_and_priced(
        tmp_path: Path) -> None:
    example = block_of("docs/own-learner.md", "KIND = HintsKind()", "python").code
    assert "(LearnerBase)" in example  # the page's learner is written on the small base
    site = pip_install(learner_project(tmp_path, "combee-hints", learner="hints", attribute="KIND", module=example),
                       tmp_path / "site")
    work, out = tmp_path / "work", tmp_path / "work" / "run"
    work.mkdir()
    done = subprocess.run([str(COMBEE), "learn", "--learner", "hints", "--method", "combee", "--train-split",
                           "train[0:20]", "--val-split", "selection[0:6]", "--batch-size", "10", "--time-scale",
                           "0.0001", "--price", "1/2", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=work,
                          env={**os.environ, "PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    calls = json.loads((out / "calls.json").read_text())
    accounted = [summary["accounting"][part]["calls"] for part in ("train", "validation")]
    assert all(counted.keys() <= {"hints_solve", "hints_hint"} for counted in accounted), accounted
    assert calls["hints_hint"] > 0 and calls["failed"] == 0
    assert sum(sum(counted.values()) for counted in accounted) == calls["hints_solve"] + calls["hints_hint"]
    assert summary["dollars"] is not None and summary["dollars"] > 0
    cost = next(line for line in done.stderr.splitlines() if line.strip().startswith("cost:"))
    assert "unknown" not in cost and "$" in cost, cost
