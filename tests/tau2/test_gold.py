"""tau2 scoring through the real MCP servers: every task's gold actions score 1, a wrong item 0.

Each episode starts the domain's wheel server (a real process), runs the actions through the SDK
client, and is graded by the server's own call log replayed against the gold replay.
"""

from __future__ import annotations

import asyncio

import pytest

from combee_fast.tasks.tau2.domain import Action
from combee_fast.tasks.tau2.task import Tau2DomainTask

from .helpers import children, play, replaced


async def _all_gold(domain: str, ids: list[str] | None = None) -> dict[str, str]:
    task = Tau2DomainTask(domain)
    room = asyncio.Semaphore(3)
    failed: dict[str, str] = {}

    async def one(task_id: str) -> None:
        async with room:
            score, _ = await play(task, task_id)
        if score.value != 1.0:
            failed[task_id] = score.feedback

    await asyncio.gather(*(one(i) for i in (ids or list(task.domain.tasks))))
    return failed


async def test_a_few_gold_replays_score_one_and_leave_no_process() -> None:
    before = children()
    assert await _all_gold("retail", ["0", "5", "20"]) == {}
    assert await _all_gold("airline", ["0", "1", "3"]) == {}
    assert children() - before == set()


@pytest.mark.slow
@pytest.mark.parametrize("domain", ["retail", "airline"])
async def test_every_gold_replay_scores_one(domain: str) -> None:
    assert await _all_gold(domain) == {}


async def test_a_different_item_id_scores_zero_naming_the_field() -> None:
    task = Tau2DomainTask("retail")
    gold = task.domain.tasks["0"].evaluation_criteria.actions  # type: ignore[union-attr]
    exchange = gold[-1]
    assert exchange.name == "exchange_delivered_order_items"
    keyboard = task.domain.fresh_db()["products"]["1656367028"]["variants"]
    other = next(item for item, variant in keyboard.items()
                 if variant["available"] and item != exchange.arguments["new_item_ids"][0])
    wrong = [*gold[:-1], Action(exchange.name, replaced(exchange.arguments, "new_item_ids", 0, other))]
    score, observations = await play(task, "0", wrong)
    assert not observations[-1].startswith("Error"), observations[-1]  # the server took the wrong exchange
    assert score.value == 0.0
    assert "orders['#W2378156']" in score.feedback and other in score.feedback, score.feedback
    assert "7706410293" in score.feedback, score.feedback


async def test_required_information_left_unsaid_scores_zero_naming_it() -> None:
    task = Tau2DomainTask("airline")
    task_id = next(i for i, t in task.domain.tasks.items() if t.evaluation_criteria
                   and t.evaluation_criteria.communicate_info)
    info = task.domain.tasks[task_id].evaluation_criteria.communicate_info  # type: ignore[union-attr]
    score, _ = await play(task, task_id, say=[])
    assert score.value == 0.0
    assert "never told" in score.feedback and repr(info[0]) in score.feedback, score.feedback
