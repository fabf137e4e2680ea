"""The engine's building blocks: indexed stream, seed tree, augmented shuffle, schedules."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from combee_fast.engine.rng import derive_seed, rng_at
from combee_fast.engine.stream import IndexedStream, StageTimeout, indexed_map
from combee_fast.learn.merge import augmented_groups, finish_times, union_ops
from combee_fast.schema import Op, OpKind


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


@given(st.integers(1, 400), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_augmented_shuffle_covers_every_record_p_times_in_sqrt_n_groups(n: int, p: int, seed: int) -> None:
    groups = augmented_groups(n, p, np.random.default_rng(seed))
    assert len(groups) == int(np.floor(np.sqrt(n)))
    assert all(len(set(g)) == len(g) for g in groups)  # a copy twice in one group is kept once
    counts = np.zeros(n, dtype=int)
    for g in groups:
        counts[list(g)] += 1
    assert counts.min() >= 1 and counts.max() <= p
    sizes = [len(g) for g in groups]
    assert max(sizes) <= -(-n * p // len(groups))


@given(st.integers(1, 600), st.integers(1, 3), st.integers(2, 40))
def test_a_group_bound_adds_groups_and_keeps_every_record(n: int, p: int, max_group: int) -> None:
    groups = augmented_groups(n, p, np.random.default_rng(n), max_group=max_group)
    assert len(groups) >= int(np.floor(np.sqrt(n)))
    assert all(len(g) <= max_group for g in groups)
    assert set().union(*groups) == set(range(n))


def test_finish_times_model_the_worker_pool() -> None:
    assert finish_times([3.0, 1.0, 1.0, 1.0], workers=2) == [3.0, 1.0, 2.0, 3.0]
    assert finish_times([2.0] * 4, workers=8) == [2.0] * 4
    assert finish_times([], workers=3) == []


def test_union_ops_keeps_first_occurrences_in_order() -> None:
    a = Op(OpKind.ADD, section="s", content="x")
    b = Op(OpKind.ADD, section="s", content="y")
    assert union_ops([[a, b], [b, a], [a]]) == (a, b)


@settings(deadline=None)  # the first example loads the similarity kernels
@given(
    st.lists(st.lists(st.sampled_from(["a b c d", "a b c e", "x y z", "totally different", "zzz"]), max_size=6), max_size=8),
    st.integers(1, 7),
)
def test_partitions_keep_every_op_once_bounded_with_duplicates_together(texts, max_ops: int) -> None:
    from combee_fast.learn.merge import partition_proposals

    proposals = [[Op(OpKind.ADD, section="s", content=f"{t} #{i}.{j}") for j, t in enumerate(ops)] for i, ops in enumerate(texts)]
    total = sum(len(p) for p in proposals)
    parts = partition_proposals(proposals, max_ops, threshold=0.5)
    flat = [op for part in parts for ops in part for op in ops]
    assert sorted(op.content for op in flat) == sorted(op.content for p in proposals for op in p)
    if total > max_ops:
        assert all(sum(len(ops) for ops in part) <= max_ops for part in parts)
    for part in parts:  # proposal order and op order survive inside a part
        positions = [next(i for i, p in enumerate(proposals) if ops[0] in p) for ops in part]
        assert positions == sorted(positions)


def test_near_duplicate_ops_share_a_part() -> None:
    from combee_fast.learn.merge import partition_proposals

    same = "Convert percentages to decimals before substituting them into the formula"
    proposals = [[Op(OpKind.ADD, section="s", content=f"unrelated lesson number {i} about topic {i * 7}")] for i in range(6)]
    proposals[0] = [*proposals[0], Op(OpKind.ADD, section="s", content=same)]
    proposals[5] = [*proposals[5], Op(OpKind.ADD, section="s", content=same + ".")]
    parts = partition_proposals(proposals, 3)
    holding = [i for i, part in enumerate(parts) if any(op.content.startswith("Convert") for ops in part for op in ops)]
    assert len(parts) >= 3 and len(holding) == 1
