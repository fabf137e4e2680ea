"""The checkpointed state and the run directory's reopening for a resume (the end-to-end proofs,
with real processes killed, are in tests/cli/test_resume.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from combee_fast.config import HISTORY_KEPT, SessionConfig
from combee_fast.errors import ConfigError
from combee_fast.playbook import Playbook
from combee_fast.run.checkpoint import CHECKPOINT_FILE, load_checkpoint
from combee_fast.run.ledger import LedgerRow
from combee_fast.run.rundir import RunDir
from combee_fast.run.state import TrainState


def _row(step: int) -> LedgerRow:
    return LedgerRow(method="m", epoch=0, step=step, batch_size=1, batch_reason="fixed", first_try_accuracy=0.0,
                     calls={}, models={}, prompt_tokens={}, completion_tokens={}, sim_seconds=0.0, wall_seconds=0.0,
                     cumulative_sim_seconds=0.0, version=0, size=0, added=0, rejected=0, evicted=0,
                     errors=())


def test_reopening_cuts_the_lines_of_an_unfinished_step_and_keeps_the_latest_rows(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path / "run")
    run_dir.write_config(SessionConfig())
    run_dir.start()
    for step in range(HISTORY_KEPT + 500):
        run_dir.append_ledger(_row(step))
    state = TrainState.fresh(Playbook.empty())
    run_dir.save_checkpoint(state)  # the lengths of the files now
    run_dir.append_ledger(_row(HISTORY_KEPT + 500))  # written, but its step never checkpointed
    run_dir.close()
    reopened = RunDir.reopen(tmp_path / "run")
    rows = reopened.resumed.ledger
    assert len(rows) == HISTORY_KEPT and rows[-1].step == HISTORY_KEPT + 499  # bounded; the cut line is gone
    reopened.append_ledger(_row(HISTORY_KEPT + 500))
    reopened.close()
    assert len((tmp_path / "run" / "ledger.jsonl").read_bytes().splitlines()) == HISTORY_KEPT + 501


def test_a_checkpoint_round_trips_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path / "run")
    run_dir.write_config(SessionConfig())
    run_dir.start()
    playbook = Playbook.empty()
    state = TrainState(artifact=playbook, best=playbook, steps=3, epoch=1, position=40, carried=("chains", -2.5))
    state.stopping = "not kept"
    run_dir.save_checkpoint(state)
    run_dir.close()
    loaded = load_checkpoint(tmp_path / "run")
    assert (loaded.steps, loaded.epoch, loaded.position, loaded.carried) == (3, 1, 40, ("chains", -2.5))
    assert loaded.stopping is None and not loaded.ledger and loaded.artifact.version == 0
    (tmp_path / "run" / CHECKPOINT_FILE).write_bytes(b"not a pickle")
    with pytest.raises(ConfigError, match="unreadable checkpoint"):
        load_checkpoint(tmp_path / "run")
    with pytest.raises(ConfigError, match="not a resumable run directory"):
        load_checkpoint(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="not a run directory"):
        RunDir.reopen(tmp_path / "nowhere")


def test_a_run_directory_is_held_by_one_process_at_a_time(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path / "run")
    run_dir.write_config(SessionConfig())
    run_dir.start()
    run_dir.save_checkpoint(TrainState.fresh(Playbook.empty()))
    with pytest.raises(ConfigError, match="in use by another combee process"):
        RunDir.reopen(tmp_path / "run")
    run_dir.close()
    RunDir.reopen(tmp_path / "run").close()  # released at close
