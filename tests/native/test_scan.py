"""Delta scan kernels against the one-op-at-a-time reference, and the combine's laws."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from combee_fast.native import scan
from combee_fast.native.scan import ADD, REMOVE, TAG, UPDATE, OpBatch
from combee_fast.native.reference.scan import (
    IDENTITY,
    State,
    combine,
    op_states,
    reference_final_states,
    reference_prefix_states,
)

FIELDS = State._fields


@st.composite
def op_batches(draw: st.DrawFn, max_ops: int = 60) -> tuple[OpBatch, int]:
    n_slots = draw(st.integers(1, 6))
    n = draw(st.integers(0, max_ops))
    kinds = draw(st.lists(st.sampled_from([ADD, UPDATE, REMOVE, TAG]), min_size=n, max_size=n))
    slots = draw(st.lists(st.integers(0, n_slots - 1), min_size=n, max_size=n))
    seqs = draw(st.lists(st.integers(0, 30), min_size=n, max_size=n))  # unsorted, with ties
    helpful = draw(st.lists(st.integers(-2, 3), min_size=n, max_size=n))
    harmful = draw(st.lists(st.integers(-2, 3), min_size=n, max_size=n))
    refs = [draw(st.integers(0, 99)) if k <= UPDATE else -1 for k in kinds]
    return OpBatch.from_arrays(slots, kinds, seqs, helpful, harmful, refs), n_slots


def rows(states: scan.SlotStates | scan.PrefixStates) -> list[State]:
    columns = [getattr(states, name).tolist() for name in FIELDS]
    return [State(*values) for values in zip(*columns)]


def batch(*ops: tuple[int, int, int, int, int, int]) -> OpBatch:
    """Ops as (slot, kind, seq, helpful, harmful, content_ref) rows."""
    columns = list(zip(*ops)) if ops else [[]] * 6
    return OpBatch.from_arrays(*(np.array(c, dtype=np.int64) for c in columns))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(op_batches(), st.integers(1, 7))
def test_final_states_match_reference_for_any_chunking(case: tuple[OpBatch, int], chunks: int) -> None:
    ops, n_slots = case
    assert rows(scan.final_states(ops, n_slots, chunks=chunks)) == reference_final_states(ops, n_slots)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(op_batches(), st.integers(1, 7))
def test_prefix_states_match_reference_for_any_chunking(case: tuple[OpBatch, int], chunks: int) -> None:
    ops, n_slots = case
    prefix = scan.prefix_states(ops, n_slots, chunks=chunks)
    expected, accepted = reference_prefix_states(ops, n_slots)
    assert rows(prefix) == expected
    assert prefix.accepted.tolist() == accepted


@settings(max_examples=100, deadline=None)
@given(op_batches(), st.data())
def test_state_after_any_prefix_is_the_final_state_of_that_prefix(case: tuple[OpBatch, int], data: st.DataObject) -> None:
    ops, n_slots = case
    cut = data.draw(st.integers(0, len(ops)))
    head = OpBatch(*(getattr(ops, name)[:cut] for name in OpBatch.__struct_fields__))
    prefix = scan.prefix_states(ops, n_slots, chunks=data.draw(st.integers(1, 4)))
    assert rows(prefix.state_after(cut)) == reference_final_states(head, n_slots)


@settings(max_examples=300, deadline=None)
@given(op_batches(max_ops=12), op_batches(max_ops=12), op_batches(max_ops=12))
def test_combine_is_associative(a: tuple[OpBatch, int], b: tuple[OpBatch, int], c: tuple[OpBatch, int]) -> None:
    def summary(case: tuple[OpBatch, int]) -> State:  # all ops of a case folded onto one slot
        state = IDENTITY
        for op in op_states(case[0]):
            state = combine(state, op)
        return state

    x, y, z = summary(a), summary(b), summary(c)
    assert combine(x, combine(y, z)) == combine(combine(x, y), z)
    assert combine(IDENTITY, x) == x == combine(x, IDENTITY)


def test_empty_log_gives_identity_states() -> None:
    empty = batch()
    assert rows(scan.final_states(empty, 3)) == [IDENTITY] * 3
    prefix = scan.prefix_states(empty, 3)
    assert len(prefix.helpful) == 0
    assert rows(prefix.state_after(0)) == [IDENTITY] * 3


def test_tombstone_absorbs_later_ops_and_counts_them_as_rejected() -> None:
    ops = batch(
        (0, ADD, 0, 0, 0, 7),
        (0, TAG, 1, 2, 1, -1),
        (0, REMOVE, 2, 0, 0, -1),
        (0, ADD, 3, 0, 0, 8),  # a re-ADD must not revive the bullet
        (0, UPDATE, 4, 0, 0, 9),
        (0, TAG, 5, 5, 5, -1),
        (0, REMOVE, 6, 0, 0, -1),
    )
    final = rows(scan.final_states(ops, 1))[0]
    assert final == State(helpful=2, harmful=1, content_ref=7, content_seq=0, last_seq=2, removed=True, applied=3, rejected=4)
    assert scan.prefix_states(ops, 1).accepted.tolist() == [True, True, True, False, False, False, False]


def test_content_is_last_writer_by_sequence_number_not_log_position() -> None:
    ops = batch((0, ADD, 5, 0, 0, 1), (0, UPDATE, 3, 0, 0, 2), (0, UPDATE, 5, 0, 0, 3))
    final = rows(scan.final_states(ops, 1))[0]
    assert (final.content_ref, final.content_seq) == (3, 5)  # seq 3 loses; the later seq-5 tie wins


def test_large_log_agrees_across_chunkings_and_with_prefix() -> None:
    rng = np.random.default_rng(7)
    n, n_slots = 200_000, 1_000
    kind = rng.choice(4, n, p=[0.05, 0.1, 0.01, 0.84]).astype(np.int8)
    ops = OpBatch.from_arrays(
        rng.integers(0, n_slots, n), kind, rng.integers(0, n, n), rng.integers(0, 3, n), rng.integers(0, 2, n),
        np.where(kind <= UPDATE, rng.integers(0, 1000, n), -1),
    )
    one = rows(scan.final_states(ops, n_slots, chunks=1))
    assert rows(scan.final_states(ops, n_slots, chunks=5)) == one
    assert rows(scan.prefix_states(ops, n_slots, chunks=3).state_after(n)) == one
    assert sum(state.rejected for state in one) > 0 and sum(state.removed for state in one) > 0


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ((-1, ADD, 0, 0, 0, 0), "slot is negative"),
        ((0, 9, 0, 0, 0, 0), "kind is not one of"),
        ((0, TAG, -4, 0, 0, -1), "seq is negative"),
        ((0, UPDATE, 0, 0, 0, -1), "ADD/UPDATE needs content_ref"),
        ((0, REMOVE, 0, 0, 0, 3), "TAG/REMOVE must have content_ref -1"),
    ],
)
def test_bad_rows_are_named(row: tuple[int, ...], message: str) -> None:
    with pytest.raises(ValueError, match=rf"OpBatch row 1: {message}"):
        batch((0, ADD, 0, 0, 0, 0), row)


def test_slot_beyond_n_slots_and_content_beyond_table_are_named() -> None:
    with pytest.raises(ValueError, match=r"ops row 1: slot 4 is outside \[0, 4\)"):
        scan.final_states(batch((0, TAG, 0, 1, 0, -1), (4, TAG, 1, 1, 0, -1)), 4)
    with pytest.raises(ValueError, match="content_ref is beyond the content table"):
        OpBatch.from_arrays([0], [ADD], [0], [0], [0], [5], n_contents=5)
    with pytest.raises(ValueError, match="seq has 2 rows, slot has 1"):
        OpBatch.from_arrays([0], [TAG], [0, 1], [0], [0], [-1])
    with pytest.raises(ValueError, match="slot must hold integers"):
        OpBatch.from_arrays([0.5], [TAG], [0], [0], [0], [-1])
    with pytest.raises(ValueError, match="helpful values .* do not fit int32"):
        OpBatch.from_arrays([0], [TAG], [0], [2**40], [0], [-1])


def test_parallel_kernels_run_concurrently_from_executor_threads() -> None:
    """Kernels release the GIL; callers run them in executors, several at a time."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(11)
    n, n_slots = 100_000, 500
    ops = OpBatch.from_arrays(
        rng.integers(0, n_slots, n), np.full(n, TAG), np.arange(n), rng.integers(0, 3, n), rng.integers(0, 2, n), np.full(n, -1)
    )
    expected = rows(scan.final_states(ops, n_slots, chunks=1))
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: rows(scan.final_states(ops, n_slots, chunks=2)), range(8)))
    assert all(result == expected for result in results)
