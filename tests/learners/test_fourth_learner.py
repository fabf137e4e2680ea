"""Issue 50's door for built-in learners: a fourth one is its package plus one line in the
registry. The test copies the package tree, writes the memo learner (:mod:`tests.learners.memo`)
into it as ``combee_fast/memo/``, adds its line to ``LEARNERS`` in ``combee_fast/learners.py``
(the only file of the tree that changes) and runs ``combee learn --learner memo`` from that tree
on the terminal task against the in-process simulated endpoint: real episodes in real sandboxes,
the world's agent playing the memo's serving role (the registry's role table holds it, as every
built-in learner's), the memo's own responder writing its notes."""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600),
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")]

ROOT = Path(__file__).resolve().parents[2]
MEMO = Path(__file__).resolve().parent / "memo"
LAST_BUILT_IN = '    "textgrad": "combee_fast.textgrad.kind:TEXTGRAD",\n'
REGISTRY_LINE = '    "memo": "combee_fast.memo.kind:MEMO",\n'
UNCOPIED = shutil.ignore_patterns("__pycache__")


def _tree_with_memo(root: Path) -> list[str]:
    """The package tree copied under ``root`` with the memo learner in it; the lines its
    ``learners.py`` differs by from the original's."""
    package = root / "combee_fast"
    shutil.copytree(ROOT / "combee_fast", package, ignore=UNCOPIED)
    shutil.copytree(MEMO, package / "memo", ignore=UNCOPIED)
    registry = package / "learners.py"
    before = registry.read_text()
    assert before.count(LAST_BUILT_IN) == 1
    registry.write_text(before.replace(LAST_BUILT_IN, LAST_BUILT_IN + REGISTRY_LINE))
    diff = difflib.unified_diff(before.splitlines(keepends=True), registry.read_text().splitlines(keepends=True), n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def test_a_fourth_built_in_learner_is_its_package_and_one_registry_line_and_learns_on_the_terminal_task(
        tmp_path: Path) -> None:
    assert _tree_with_memo(tmp_path / "tree") == ["+" + REGISTRY_LINE]
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", "learn", "--learner", "memo", "--method", "combee", "--task",
         "terminal", "--train-split", "train[0:12]", "--val-split", "selection[0:4]", "--batch-size", "6",
         "--sim-preset", "flat", "--quiet", "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=500,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "tree")})
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["learner"] == "memo" and summary["method"] == "combee-memo"
    assert summary["episodes"] >= 12 and summary["episodes_failed"] == 0 and summary["env_seconds"] > 0
    calls = summary["accounting"]["train"]["calls"]
    assert calls["memo_act"] > summary["episodes"]  # every agent turn, made as the memo's serving role
    assert calls["memo_note"] > 0
    memo = json.loads((out / "final.json").read_text())
    assert memo["memo"] and memo["version"] > 0
    assert " — lesson " in (out / "prompt.txt").read_text()  # the terminal world's lessons, noted by its responder
