"""Plain-Python reference for :mod:`.scan`: one op at a time, through the combine itself.

Slow and obvious on purpose; the property tests hold the kernels to it.
"""

from __future__ import annotations

from typing import NamedTuple

from combee_fast.native.scan import REMOVE, UPDATE, OpBatch


class State(NamedTuple):
    """One slot's state, fields as in :class:`.scan.SlotStates`."""

    helpful: int = 0
    harmful: int = 0
    content_ref: int = -1
    content_seq: int = -1
    last_seq: int = -1
    removed: bool = False
    applied: int = 0
    rejected: int = 0


IDENTITY = State()


def singleton(kind: int, seq: int, helpful: int, harmful: int, content_ref: int) -> State:
    """The state of a slot after exactly one op, starting from nothing."""
    writes_content = kind <= UPDATE
    return State(
        helpful=helpful,
        harmful=harmful,
        content_ref=content_ref if writes_content else -1,
        content_seq=seq if writes_content else -1,
        last_seq=seq,
        removed=kind == REMOVE,
        applied=1,
    )


def combine(a: State, b: State) -> State:
    """``a`` then ``b``: counters add, content last-writer-wins by seq, tombstones absorb."""
    if a.removed:
        return a._replace(rejected=a.rejected + b.applied + b.rejected)
    newer_content = b.content_seq >= a.content_seq
    return State(
        helpful=a.helpful + b.helpful,
        harmful=a.harmful + b.harmful,
        content_ref=b.content_ref if newer_content else a.content_ref,
        content_seq=b.content_seq if newer_content else a.content_seq,
        last_seq=max(a.last_seq, b.last_seq),
        removed=b.removed,
        applied=a.applied + b.applied,
        rejected=a.rejected + b.rejected,
    )


def op_states(ops: OpBatch) -> list[State]:
    """The singleton state of every op."""
    return [
        singleton(int(k), int(q), int(h), int(hm), int(r))
        for k, q, h, hm, r in zip(ops.kind, ops.seq, ops.helpful, ops.harmful, ops.content_ref)
    ]


def reference_final_states(ops: OpBatch, n_slots: int) -> list[State]:
    """Every slot's state after all ops."""
    states = [IDENTITY] * n_slots
    for s, op in zip(ops.slot, op_states(ops)):
        states[s] = combine(states[s], op)
    return states


def reference_prefix_states(ops: OpBatch, n_slots: int) -> tuple[list[State], list[bool]]:
    """Per op: its slot's state right after it, and whether it was accepted."""
    states = [IDENTITY] * n_slots
    after: list[State] = []
    accepted: list[bool] = []
    for s, op in zip(ops.slot, op_states(ops)):
        accepted.append(not states[s].removed)
        states[s] = combine(states[s], op)
        after.append(states[s])
    return after, accepted
