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


class _StopAtOnce:
    """Ends a run before its first step, as a signal arriving during start-up would."""

    ends = "interrupt"

    def check(self, state: TrainState) -> str | None:
        return "interrupted before the first step" if state.steps == 0 else None


async def test_a_run_resumed_from_its_first_checkpoint_ends_as_an_uninterrupted_one(tmp_path: Path) -> None:
    """The checkpoint written before the first step holds the batch plan's state too (the live
    planner's), so a run killed before its first step completed resumes."""
    import msgspec

    from combee_fast.config import CacheConfig, SimConfig, TaskConfig, TrainConfig
    from combee_fast.session import open_session

    config = SessionConfig(task=TaskConfig(train_split="train[0:60]", val_split="val[0:10]"),
                           train=TrainConfig(batch_size=None), sim=SimConfig("flat", 1e-4),
                           cache=CacheConfig(str(tmp_path / "cache.jsonl"), "record"))
    whole = RunDir(tmp_path / "whole")
    async with open_session(config) as session:
        await session.train(run_dir=whole)
    whole.close()
    replay = msgspec.structs.replace(config, cache=CacheConfig(str(tmp_path / "cache.jsonl"), "replay"))
    first = RunDir(tmp_path / "resumed")
    async with open_session(replay) as session:
        stopped = await session.train(run_dir=first, stops=(_StopAtOnce(),))
    first.close()
    assert stopped.interrupted and stopped.steps == 0 and load_checkpoint(tmp_path / "resumed").plan_state is not None
    again = RunDir.reopen(tmp_path / "resumed")
    async with open_session(replay) as session:
        result = await session.train(run_dir=again)
    again.close()
    assert result.steps > 1 and not result.interrupted
    assert (tmp_path / "resumed" / "final.json").read_bytes() == (tmp_path / "whole" / "final.json").read_bytes()
