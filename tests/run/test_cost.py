"""GPU-seconds and rollouts per ledger row: the simulated server's busy time, or wall time x GPUs; dollars
shown, never a pretended zero."""

from __future__ import annotations

import pytest

from combee_fast.config import EndpointSpec, SessionConfig, SimConfig, TaskConfig
from combee_fast.learners import role_table
from combee_fast.money.cost import GpuClock
from combee_fast.money.dollars import UNKNOWN, Price, add_dollars, money, total
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.session import open_session
from combee_fast.sim.world import TaskWorld
from combee_fast.tasks.registry import get_task

SMALL = TaskConfig(train_split="train[0:24]", val_split="selection[0:10]")


def test_the_clock_multiplies_busy_or_wall_seconds_by_the_gpus() -> None:
    busy = [2.5]
    simulated = GpuClock(4, busy_s=lambda: busy[0])
    assert simulated.read(wall_s=100.0) == 10.0 and simulated.source == "simulated busy time"
    busy[0] = 3.0
    assert simulated.read(wall_s=0.0) == 12.0
    wall = GpuClock(2)
    assert wall.read(wall_s=1.5) == 3.0 and wall.source == "wall time"
    with pytest.raises(ValueError, match="gpus must be >= 1"):
        GpuClock(0)


async def test_rows_carry_rollouts_and_the_servers_busy_gpu_seconds() -> None:
    config = SessionConfig(task=SMALL, sim=SimConfig("flat", 1e-3))
    async with open_session(config) as session:
        result = await session.train(plan=FixedBatch(8))
        assert session.server is not None
        busy = session.server.busy_s()
        eight = session.gpu_clock(8)
        assert eight is not None and eight.read(0.0) == 8 * busy  # nothing runs now: the reading holds still
    rows = result.ledger
    assert [row.rollouts for row in rows] == [row.calls.get("generator", 0) for row in rows]
    assert result.rollouts == sum(row.rollouts for row in rows) >= 24
    assert all(row.gpu_seconds is not None and row.gpu_seconds > 0 for row in rows)
    assert result.gpu_seconds == pytest.approx(sum(row.gpu_seconds for row in rows))
    assert result.gpu_seconds < busy  # validation ran on the same server and is not a step's cost
    assert result.gpu_seconds >= 0.5 * result.train_sim_seconds  # the steps' critical paths were busy time


async def test_a_real_endpoint_costs_wall_time_times_declared_gpus_or_is_unknown(start_sim_server) -> None:
    server = await start_sim_server(TaskWorld.for_task(get_task("formula"), roles=role_table()), preset="flat", time_scale=1e-4)
    config = SessionConfig(task=SMALL, endpoints={"default": EndpointSpec(server.url, "sim")})
    async with open_session(config) as session:
        assert session.server is None
        unknown = await session.train(plan=FixedBatch(12))
        declared = await session.train(plan=FixedBatch(12), gpus=2)
    assert unknown.gpu_seconds is None and all(row.gpu_seconds is None for row in unknown.ledger)
    assert unknown.rollouts > 0
    assert declared.gpu_seconds == pytest.approx(2 * declared.train_wall_seconds)
    assert all(row.gpu_seconds > 0 for row in declared.ledger)


def test_money_is_never_a_pretended_zero() -> None:
    assert [money(d) for d in (None, 0.0, 1234.5, 0.41249, 0.000042, 1e-9)] == \
        [UNKNOWN, "$0.00", "$1,234.50", "$0.4125", "$0.000042", "<$0.000001"]
    assert Price(3.0, 15.0).dollars(1_000_000, 100_000) == 4.5
    spent: dict[str, float | None] = {}
    add_dollars(spent, {"generator": 1.0, "reflector": None})
    add_dollars(spent, {"generator": 0.5, "reflector": 2.0})
    assert spent == {"generator": 1.5, "reflector": None} and total(spent) is None
    assert total({"generator": 1.5}) == 1.5
