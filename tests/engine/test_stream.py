"""The engine's stream: indexed results, bounded queues, early starts, timeouts; the seed tree."""

from __future__ import annotations

import asyncio
import random

import pytest

from combee_fast.engine.rng import derive_seed, rng_at
from combee_fast.engine.stream import IndexedStream, indexed_map
from combee_fast.errors import StageTimeout


async def test_results_come_back_in_index_order_whatever_the_completion_order() -> None:
    delays = [random.Random(7).random() / 200 for _ in range(50)]

    async def slow_square(index: int, value: int) -> int:
        await asyncio.sleep(delays[index])
        return value * value

    assert await indexed_map(list(range(50)), slow_square, concurrency=8) == [i * i for i in range(50)]


async def test_never_more_than_concurrency_in_flight_and_the_queue_stays_bounded() -> None:
    in_flight = peak = 0

    async def work(index: int, value: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.001)
        in_flight -= 1
        return value

    stream = IndexedStream(list(range(200)), work, concurrency=5, queue_size=3)
    await stream.run()
    assert peak == 5


async def test_a_later_stage_can_start_on_one_result_before_the_rest() -> None:
    release = asyncio.Event()

    async def work(index: int, value: int) -> int:
        if index != 0:
            await release.wait()
        return value

    stream = IndexedStream([10, 11, 12], work, concurrency=3)
    running = asyncio.create_task(stream.run())
    assert await asyncio.wait_for(stream.future(0), 1) == 10
    assert not stream.future(1).done()
    release.set()
    assert await running == [10, 11, 12]


async def test_a_timeout_stops_the_stream_and_leaves_nothing_pending() -> None:
    async def work(index: int, value: int) -> int:
        await asyncio.sleep(10 if index == 3 else 0)
        return value

    stream = IndexedStream(list(range(6)), work, concurrency=2, item_timeout_s=0.05)
    with pytest.raises(StageTimeout, match="item 3"):
        await stream.run()
    assert all(stream.future(i).done() for i in range(6))
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()


def test_seeds_depend_on_the_path_not_on_call_order() -> None:
    first = [derive_seed(1, "generator", 0, f"train:{i}", 0) for i in range(5)]
    second = [derive_seed(1, "generator", 0, f"train:{i}", 0) for i in reversed(range(5))][::-1]
    assert first == second and len(set(first)) == 5
    assert derive_seed(1, "a", 1) != derive_seed(1, "a", "1") != derive_seed(2, "a", 1)
    assert (rng_at(3, "shuffle", 0, 1).permutation(10) == rng_at(3, "shuffle", 0, 1).permutation(10)).all()
