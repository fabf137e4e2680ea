"""The checkpoint file and the run directory's reopening for a resume (the end-to-end proofs, with
real processes killed, are in tests/cli/test_resume.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from combee_fast.config import HISTORY_KEPT
from combee_fast.errors import ConfigError
from combee_fast.playbook import Playbook
from combee_fast.run.checkpoint import CHECKPOINT_FILE, Checkpoint, load_checkpoint, save_checkpoint
from combee_fast.run.ledger import LedgerRow
from combee_fast.run.rundir import RunDir
from combee_fast.run.train import read_ledger


def _row(step: int) -> LedgerRow:
    return LedgerRow(method="m", epoch=0, step=step, batch_size=1, batch_reason="fixed", first_try_accuracy=0.0,
                     calls={}, models={}, prompt_tokens={}, completion_tokens={}, sim_seconds=0.0, wall_seconds=0.0,
                     cumulative_sim_seconds=0.0, playbook_version=0, bullets=0, added=0, rejected=0, evicted=0,
                     errors=())


def test_reopening_cuts_the_lines_of_an_unfinished_step_and_keeps_the_latest_rows(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path / "run")
    run_dir.write_json("config.json", {})
    run_dir.start()
    for step in range(HISTORY_KEPT + 500):
        run_dir.append_ledger(_row(step))
    lengths = run_dir.file_lengths()
    run_dir.append_ledger(_row(HISTORY_KEPT + 500))  # written, but its step never checkpointed
    run_dir.close()
    reopened = RunDir.reopen(tmp_path / "run", lengths)
    rows = read_ledger(reopened)
    assert len(rows) == HISTORY_KEPT and rows[-1].step == HISTORY_KEPT + 499  # bounded; the cut line is gone
    reopened.append_ledger(_row(HISTORY_KEPT + 500))
    reopened.close()
    assert len((tmp_path / "run" / "ledger.jsonl").read_bytes().splitlines()) == HISTORY_KEPT + 501


def test_a_checkpoint_round_trips_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    playbook = Playbook.empty()
    save_checkpoint(tmp_path, Checkpoint(steps=3, epoch=1, position=40, playbook=playbook, best=playbook,
                                         carried=(("train:1", -2.5),)))
    loaded = load_checkpoint(tmp_path)
    assert (loaded.steps, loaded.epoch, loaded.position, loaded.carried) == (3, 1, 40, (("train:1", -2.5),))
    (tmp_path / CHECKPOINT_FILE).write_bytes(b"not a pickle")
    with pytest.raises(ConfigError, match="unreadable checkpoint"):
        load_checkpoint(tmp_path)
    with pytest.raises(ConfigError, match="not a resumable run directory"):
        load_checkpoint(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="holds no run"):
        RunDir.reopen(tmp_path / "nowhere", {})
