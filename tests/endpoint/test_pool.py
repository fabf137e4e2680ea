"""Two simulated replicas behind one role: balanced load, and a replica stopped mid-run loses nothing."""

from __future__ import annotations

import asyncio

from combee_fast.config import config_from_dict
from combee_fast.endpoint.pool import replica_fault
from combee_fast.learners import role_table
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.schema import CallError
from combee_fast.session import open_session
from combee_fast.sim.server import SimServer
from combee_fast.sim.world import TaskWorld
from combee_fast.tasks.registry import get_task

ROLE_CALLS = ("generator", "reflector", "curator", "reducer")


def _config(a: str, b: str):
    return config_from_dict({
        "task": {"train_split": "train[0:20]", "val_split": "val[0:10]"},
        "train": {"batch_size": 10},
        "transport": {"concurrency": 16, "backoff_base_s": 0.01, "backoff_max_s": 0.05, "max_retries": 1,
                      "replica_down_s": 60.0},
        "endpoints": {"default": {"url": a, "model": "sim", "replicas": [b]}},
    })


def _calls(server: SimServer) -> int:
    return sum(n for role, n in server.counters().requests_by_role.items() if role in ROLE_CALLS)


async def _servers() -> tuple[SimServer, SimServer]:
    world = TaskWorld.for_task(get_task("formula"), roles=role_table())
    a = SimServer(world, preset="flat", time_scale=0.0005, seed=1)
    b = SimServer(world, preset="flat", time_scale=0.0005, seed=2)
    await a.start()
    await b.start()
    return a, b


async def test_two_replicas_share_the_calls() -> None:
    a, b = await _servers()
    try:
        async with open_session(_config(a.url, b.url)) as session:
            result = await session.train(plan=FixedBatch(10))
            caps = session.capabilities()
    finally:
        await a.stop()
        await b.stop()
    total = _calls(a) + _calls(b)
    share = _calls(a) / total
    print(f"\nreplica shares: {_calls(a)} and {_calls(b)} of {total} calls ({100 * share:.1f}% / {100 - 100 * share:.1f}%)")
    assert 0.4 <= share <= 0.6
    assert result.rollouts >= 20 and not result.counts.errors
    assert [entry["endpoint"] for entry in caps] == [a.url, b.url]


async def test_stopping_one_replica_mid_run_loses_no_call() -> None:
    a, b = await _servers()

    async def stop_b_after(calls: int) -> None:
        while _calls(b) < calls:
            await asyncio.sleep(0.005)
        await b.stop()

    try:
        async with open_session(_config(a.url, b.url)) as session:
            stopper = asyncio.create_task(stop_b_after(8))
            result = await session.train(plan=FixedBatch(10))
            await stopper
            totals = session.clients["generator"].usage_totals()
    finally:
        await a.stop()
        await b.stop()
    assert result.rollouts >= 20 and result.final_eval is not None and result.final_eval.unanswered == 0
    assert not result.counts.errors and not result.val_counts.errors  # every call ended on the live replica
    errors = {a.url: 0, b.url: 0}
    for (_, _, endpoint), t in totals.items():
        errors[endpoint] += t.errors
    assert errors[b.url] >= 1 and errors[a.url] == 0  # errors are kept per replica
    print(f"\nafter stopping one replica: {_calls(a)} calls on the live one, {_calls(b)} on the stopped one; "
          f"{session.clients['generator'].failovers} fail-overs")


def test_only_replica_faults_move_a_call() -> None:
    assert replica_fault(CallError(kind="connection", message="refused"))
    assert replica_fault(CallError(kind="http_status", message="HTTP 503", status=503))
    assert not replica_fault(CallError(kind="malformed_json", message="x"))
    assert not replica_fault(CallError(kind="http_status", message="HTTP 400", status=400))
    assert not replica_fault(None)
