"""A plug-in learner's own settings and flag: ``combee-notes`` (installed with pip, outside the
tree) declares :class:`~tests.plugins.combee_notes.kind.NotesSettings` (a run's ``[learners.notes]``
section) and ``--max-notes``; ``combee learn --learner notes`` offers the flag, a run given it (or
the section in a ``--config`` file) keeps at most that many notes, and its ``config.json`` records
the section, which ``--resume`` and ``combee show`` read back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.combee_notes.notes import MAX_NOTES

pytestmark = pytest.mark.slow

RUN = ("--task", "formula", "--method", "combee", "--train-split", "train[0:60]", "--val-split", "val[0:10]",
       "--batch-size", "20", "--quiet")


def _combee(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd)


def _notes(out: Path) -> int:
    return len(json.loads((out / "final.json").read_text())["notes"])


def test_a_plugin_learner_declares_its_own_settings_and_flag(plugin_env: dict[str, str], tmp_path: Path) -> None:
    shown = _combee("learn", "--learner", "notes", "--help", env=plugin_env, cwd=tmp_path)
    assert shown.returncode == 0 and "learner notes:" in shown.stdout and "--max-notes MAX_NOTES" in shown.stdout
    assert f"(default: {MAX_NOTES})" in " ".join(shown.stdout.split("learner notes:", 1)[1].split())

    free = _combee("learn", "--learner", "notes", *RUN, "--out", str(tmp_path / "free"), env=plugin_env, cwd=tmp_path)
    assert free.returncode == 0, free.stderr
    assert _notes(tmp_path / "free") > 2  # the run learns more than the cap below
    assert json.loads((tmp_path / "free" / "config.json").read_text())["learners"] == {"notes": {"max_notes": MAX_NOTES}}

    capped = _combee("learn", "--learner", "notes", "--max-notes", "2", *RUN, "--out", str(tmp_path / "flag"),
                     env=plugin_env, cwd=tmp_path)
    assert capped.returncode == 0, capped.stderr
    assert _notes(tmp_path / "flag") == 2
    assert json.loads((tmp_path / "flag" / "config.json").read_text())["learners"] == {"notes": {"max_notes": 2}}
    assert _combee("show", str(tmp_path / "flag"), env=plugin_env, cwd=tmp_path).returncode == 0

    (config := tmp_path / "notes.toml").write_text('learner = "notes"\n\n[learners.notes]\nmax_notes = 1\n')
    section = _combee("learn", "--config", str(config), *RUN, "--out", str(tmp_path / "section"), env=plugin_env,
                      cwd=tmp_path)
    assert section.returncode == 0, section.stderr
    assert _notes(tmp_path / "section") == 1

    bad = _combee("learn", "--learner", "notes", "--max-notes", "0", *RUN, "--out", str(tmp_path / "bad"),
                  env=plugin_env, cwd=tmp_path)
    assert bad.returncode == 2 and "--max-notes: must be a positive integer" in bad.stderr
    (typo := tmp_path / "typo.toml").write_text('learner = "notes"\n\n[learners.notes]\nmax_note = 1\n')
    refused = _combee("learn", "--config", str(typo), *RUN, "--out", str(tmp_path / "typo"), env=plugin_env,
                      cwd=tmp_path)
    assert refused.returncode == 2 and "learners.notes" in refused.stderr and "max_note" in refused.stderr
    assert not (tmp_path / "typo").exists()
