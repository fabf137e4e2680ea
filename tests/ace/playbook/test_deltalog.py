"""Replaying a run's delta log with the scan kernel reproduces every saved playbook version."""

from __future__ import annotations

import pytest

from combee_fast.config import SessionConfig, SimConfig, TaskConfig
from combee_fast.errors import CombeeError
from combee_fast.ace.playbook import Playbook
from combee_fast.ace.playbook.deltalog import BulletState, final_bullets, read_delta_log, replay
from combee_fast.record.rundir import RunDir
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.session import open_session


def _state(playbook: Playbook) -> dict[str, BulletState]:
    return {b.id: BulletState(b.content, b.helpful, b.harmful) for b in playbook.bullets()}


@pytest.mark.parametrize(("method", "budget"), [("combee", None), ("sequential", None), ("naive", 400)])
async def test_replay_matches_every_saved_version(tmp_path, method: str, budget: int | None) -> None:
    config = SessionConfig(
        task=TaskConfig(train_split="train[0:60]", val_split="val[0:5]"), method=method,
        token_budget=budget, sim=SimConfig("flat", 1e-4),
    )
    run_dir = RunDir(tmp_path)
    async with open_session(config) as session:
        result = await session.train(plan=FixedBatch(1 if method == "sequential" else 12), run_dir=run_dir)
    run_dir.close()
    log = read_delta_log(tmp_path / "deltas.jsonl")
    assert [entry.version for entry in log] == sorted({entry.version for entry in log})
    replayed = replay(log)
    saved = sorted((tmp_path / "playbooks").glob("v*.json"))
    assert saved
    for path in saved:
        playbook = Playbook.load(path)
        assert replayed.bullets_at(playbook.version) == _state(playbook), path.name
    assert replayed.bullets_at(result.final.version) == _state(result.final)
    assert final_bullets(log) == _state(Playbook.load(tmp_path / "final.json"))  # the final-state scan
    if budget is not None:
        assert any(op.kind.value == "REMOVE" for entry in log for op in entry.ops), "the budget evicted"
    assert replayed.bullets_at(0) == {}


def test_a_corrupt_log_line_is_named(tmp_path) -> None:
    path = tmp_path / "deltas.jsonl"
    path.write_text('{"version": 1, "source": "x", "ops": []}\n{"version": 2, "sou\n')
    with pytest.raises(CombeeError, match=r"deltas.jsonl:2"):
        read_delta_log(path)
