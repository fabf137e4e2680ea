"""Issue 35: a budget stop never discards work already paid for.

Combee carries the chains still retrying at the end of a step into the next one (``map.sync_rounds``):
their attempts and reflections were made, and paid for. A card's budget spent by that step ends
the run; the carried chains must still reach the artifact (a drain step, no new item), and the
checkpoint must carry nothing left undone. Real simulated endpoint, real run folder."""

from __future__ import annotations

import json
from pathlib import Path

from combee_fast.config import SessionConfig, SimConfig, TaskConfig, TrainConfig
from combee_fast.record.checkpoint import read_checkpoint
from combee_fast.session import open_session
from combee_fast.verify.budget import BudgetGuard
from combee_fast.verify.card import Budget

CONFIG = SessionConfig(task=TaskConfig(train_split="train[0:60]", val_split="selection[0:10]"),
                       train=TrainConfig(batch_size=20), sim=SimConfig("flat", 1e-4))


async def test_a_card_budget_spent_by_a_step_folds_in_the_chains_that_step_carried(tmp_path: Path) -> None:
    rollouts = 20  # the first step of 20 examples spends it (retries included)
    guard = BudgetGuard(Budget(rollouts=rollouts, tokens=10**12, gpu_seconds=1e12, wall_clock_s=1e9,
                               binding="rollouts"))
    async with open_session(CONFIG) as session:
        result = await session.train(out=tmp_path / "run", stops=[guard])
        kind, method, plan = session.choice.kind, session.method(), await session.batch_plan()
        kept = read_checkpoint(tmp_path / "run").state(kind, method=method.name, plan_state_type=plan.state_type,
                                                       carried_type=method.carried_type(kind.artifact_type))
    rows = [json.loads(line) for line in (tmp_path / "run" / "ledger.jsonl").read_text().splitlines()]
    assert result.stopped_by is not None and result.stopped_by.startswith("budget rollouts spent")
    assert rows[0]["batch_size"] == 20 and rows[0]["rollouts"] >= rollouts  # the budget was spent by step 1
    assert [row["batch_reason"] for row in rows[1:]] == ["drain"] * (len(rows) - 1) and len(rows) > 1
    assert sum(row["batch_size"] for row in rows) == 20 == result.samples  # no new item after the stop
    assert rows[-1]["size"] > rows[0]["size"] == rows[0]["added"]  # the carried chains' lessons are in
    assert len(result.final) == rows[-1]["size"]
    assert kept.carried is None and kept.steps == len(rows)  # nothing paid for is left behind
