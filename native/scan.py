"""Delta scan: merge a log of playbook ops per bullet slot, as final states or every prefix state.

Ops are a struct of arrays (:class:`OpBatch`), one row per op in log order. Each bullet has a
dense integer *slot* in ``[0, n_slots)``. The state of a slot after a run of ops is a
:class:`SlotStates` row; the combine of two runs ``a`` (earlier in the log) then ``b`` is:

* counters (``helpful``, ``harmful``) add;
* content is last-writer-wins by sequence number: ``b``'s content replaces ``a``'s when
  ``b.content_seq >= a.content_seq`` (ties go to the op later in the log); ADD and UPDATE write
  content, TAG and REMOVE do not;
* REMOVE is a tombstone and the tombstone is *absorbing*: once a slot is removed, every later op
  on it (ADD, UPDATE, TAG, or another REMOVE) is rejected. A rejected op changes nothing but the
  slot's ``rejected`` count, so a removed bullet is never silently revived;
* ``applied``/``rejected`` count accepted and rejected ops; ``last_seq`` is the largest
  sequence number among accepted ops.

This combine is associative with identity ``(0, 0, -1, -1, -1, False, 0, 0)``, which is what
lets :func:`final_states` and :func:`prefix_states` fold chunks of the log in parallel and join
them afterwards. Tombstoning and counters follow log order; only content compares ``seq``.

Prefix states are stored per op: row ``i`` of :class:`PrefixStates` is the state of op ``i``'s
slot right after op ``i``. Playbook version ``v`` (after the first ``v`` ops) is therefore, for
every slot, the row of its last op before ``v`` (:meth:`PrefixStates.state_after`), and going
from one version to the next only overwrites the slots the ops in between touched.
"""

from __future__ import annotations

import numpy as np
from numba import prange

import msgspec

from ._jit import chunk_count, helper, kernel

ADD = 0
UPDATE = 1
REMOVE = 2
TAG = 3
KIND_NAMES = ("ADD", "UPDATE", "REMOVE", "TAG")
"""Kind codes used in :attr:`OpBatch.kind`; ``KIND_NAMES[code]`` matches ``schema.OpKind`` names."""


class OpBatch(msgspec.Struct, frozen=True):
    """Ops in log order as a struct of arrays. Build it with :meth:`from_arrays`, which checks it.

    ``slot`` int32 dense bullet slot; ``kind`` int8 (:data:`ADD` .. :data:`TAG`); ``seq`` int64
    sequence number (>= 0); ``helpful``/``harmful`` int32 counter increments; ``content_ref``
    int32 index into the caller's table of content strings, ``-1`` for none (ADD and UPDATE
    need content; TAG and REMOVE must have none).
    """

    slot: np.ndarray
    kind: np.ndarray
    seq: np.ndarray
    helpful: np.ndarray
    harmful: np.ndarray
    content_ref: np.ndarray

    @classmethod
    def from_arrays(
        cls,
        slot: np.ndarray,
        kind: np.ndarray,
        seq: np.ndarray,
        helpful: np.ndarray,
        harmful: np.ndarray,
        content_ref: np.ndarray,
        *,
        n_contents: int | None = None,
    ) -> OpBatch:
        """Coerce to contiguous arrays of the documented dtypes and check every row.

        Raises ``ValueError`` naming the first bad row and field. ``n_contents`` (the size of
        the content table), when given, bounds ``content_ref``.
        """
        arrays = (
            _as_array(slot, np.int32, "slot"),
            _as_array(kind, np.int8, "kind"),
            _as_array(seq, np.int64, "seq"),
            _as_array(helpful, np.int32, "helpful"),
            _as_array(harmful, np.int32, "harmful"),
            _as_array(content_ref, np.int32, "content_ref"),
        )
        n = len(arrays[0])
        for name, array in zip(("kind", "seq", "helpful", "harmful", "content_ref"), arrays[1:]):
            if len(array) != n:
                raise ValueError(f"OpBatch: {name} has {len(array)} rows, slot has {n}")
        row, problem = _first_invalid_op(*arrays, -1 if n_contents is None else n_contents)
        if row >= 0:
            raise ValueError(f"OpBatch row {row}: {_PROBLEMS[problem]} ({_describe(arrays, row)})")
        return cls(*arrays)

    def __len__(self) -> int:
        return len(self.slot)


class SlotStates(msgspec.Struct, frozen=True):
    """One state per slot (arrays of length ``n_slots``); see the module docstring."""

    helpful: np.ndarray  # int64
    harmful: np.ndarray  # int64
    content_ref: np.ndarray  # int32, -1: no content written
    content_seq: np.ndarray  # int64, -1: no content written
    last_seq: np.ndarray  # int64, -1: no accepted op
    removed: np.ndarray  # bool: tombstoned
    applied: np.ndarray  # int32: accepted ops
    rejected: np.ndarray  # int32: ops rejected because the slot was tombstoned


class PrefixStates(msgspec.Struct, frozen=True):
    """Per-op inclusive prefix states: row ``i`` is op ``i``'s slot right after op ``i``.

    ``accepted[i]`` says whether op ``i`` itself was applied (False: its slot was tombstoned).
    """

    slot: np.ndarray  # int32, the ops' slots (shared with the OpBatch)
    n_slots: int
    helpful: np.ndarray
    harmful: np.ndarray
    content_ref: np.ndarray
    content_seq: np.ndarray
    last_seq: np.ndarray
    removed: np.ndarray
    applied: np.ndarray
    rejected: np.ndarray
    accepted: np.ndarray  # bool

    def state_after(self, n_ops: int) -> SlotStates:
        """The state of every slot after the first ``n_ops`` ops (playbook version ``n_ops``).

        One pass over ``n_ops`` ops and ``n_slots`` slots. To walk many versions in order,
        overwrite a running state with the rows of the ops in between instead.
        """
        if not 0 <= n_ops <= len(self.slot):
            raise ValueError(f"state_after: n_ops must be in [0, {len(self.slot)}], got {n_ops}")
        return SlotStates(
            *_gather_last(
                self.slot,
                n_ops,
                self.n_slots,
                self.helpful,
                self.harmful,
                self.content_ref,
                self.content_seq,
                self.last_seq,
                self.removed,
                self.applied,
                self.rejected,
            )
        )


def final_states(ops: OpBatch, n_slots: int, *, chunks: int | None = None) -> SlotStates:
    """The state of every slot after all ``ops``.

    Runs in parallel over ``chunks`` slices of the log (default: one per Numba thread, one in
    all for fewer than 16,384 ops per thread), each folded into its own dense slot table (no
    sort: slots index the table), then joins the tables per slot. Extra memory:
    ``chunks * n_slots * 64`` bytes. Raises ``ValueError`` if a slot is outside ``[0, n_slots)``.
    """
    _check_slots(ops, n_slots)
    n_chunks = chunk_count(len(ops), chunks)
    if n_chunks == 1:
        return SlotStates(*_final_states_serial(*_columns(ops), n_slots))
    return SlotStates(*_final_states_parallel(*_columns(ops), n_slots, n_chunks))


def prefix_states(ops: OpBatch, n_slots: int, *, chunks: int | None = None) -> PrefixStates:
    """Inclusive prefix states after every op (see :class:`PrefixStates`).

    Work-efficient three-phase scan: fold each chunk locally (recording every op's local
    state), scan the chunk totals per slot, then combine each chunk's carry-in into its rows.
    Two passes over the ops; output 46 bytes per op; extra memory ``chunks * n_slots * 64``
    bytes. Raises ``ValueError`` if a slot is outside ``[0, n_slots)``.
    """
    _check_slots(ops, n_slots)
    n_chunks = chunk_count(len(ops), chunks)
    if n_chunks == 1:
        return PrefixStates(ops.slot, n_slots, *_prefix_states_serial(*_columns(ops), n_slots))
    return PrefixStates(ops.slot, n_slots, *_prefix_states_parallel(*_columns(ops), n_slots, n_chunks))


def warmup() -> None:
    """Compile (or load from cache) every kernel in this module for the dtypes the API uses."""
    ops = OpBatch.from_arrays(
        np.array([0, 1, 0], np.int32),
        np.array([ADD, TAG, REMOVE], np.int8),
        np.array([0, 1, 2], np.int64),
        np.array([0, 1, 0], np.int32),
        np.array([0, 0, 0], np.int32),
        np.array([0, -1, -1], np.int32),
    )
    for chunks in (1, 2):  # the serial and the parallel kernel of each entry point
        final_states(ops, 2, chunks=chunks)
        prefix_states(ops, 2, chunks=chunks).state_after(2)


# --- input checks ---------------------------------------------------------------------------

_PROBLEMS = (
    "",
    "slot is negative",
    "kind is not one of ADD=0, UPDATE=1, REMOVE=2, TAG=3",
    "seq is negative",
    "ADD/UPDATE needs content_ref >= 0",
    "TAG/REMOVE must have content_ref -1",
    "content_ref is beyond the content table",
)


def _as_array(values: np.ndarray, dtype: type[np.generic], name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size and not np.can_cast(array.dtype, dtype, casting="same_kind"):
        raise ValueError(f"{name} must hold integers, got dtype {array.dtype}")
    if array.size and array.dtype != dtype:
        info = np.iinfo(dtype)
        low, high = array.min(), array.max()
        if low < info.min or high > info.max:
            raise ValueError(f"{name} values [{low}, {high}] do not fit {np.dtype(dtype).name}")
    return np.ascontiguousarray(array, dtype=dtype)


def _describe(arrays: tuple[np.ndarray, ...], row: int) -> str:
    names = ("slot", "kind", "seq", "helpful", "harmful", "content_ref")
    return ", ".join(f"{name}={array[row]}" for name, array in zip(names, arrays))


def _check_slots(ops: OpBatch, n_slots: int) -> None:
    _check_slot_range(ops.slot, n_slots, "ops")


def _check_slot_range(slots: np.ndarray, n_slots: int, where: str) -> None:
    if n_slots < 0:
        raise ValueError(f"n_slots must be >= 0, got {n_slots}")
    if len(slots) == 0:
        return
    bad = _first_out_of_range(slots, n_slots)
    if bad >= 0:
        raise ValueError(f"{where} row {bad}: slot {slots[bad]} is outside [0, {n_slots})")


def _columns(ops: OpBatch) -> tuple[np.ndarray, ...]:
    return (ops.slot, ops.kind, ops.seq, ops.helpful, ops.harmful, ops.content_ref)


@kernel()
def _first_invalid_op(slot, kind, seq, helpful, harmful, content_ref, n_contents):  # type: ignore[no-untyped-def]
    for i in range(len(slot)):
        k = kind[i]
        ref = content_ref[i]
        if slot[i] < 0:
            return i, 1
        if k < 0 or k > 3:
            return i, 2
        if seq[i] < 0:
            return i, 3
        if k <= UPDATE and ref < 0:
            return i, 4
        if k >= REMOVE and ref != -1:
            return i, 5
        if n_contents >= 0 and ref >= n_contents:
            return i, 6
    return -1, 0


@kernel()
def _first_out_of_range(slot, n_slots):  # type: ignore[no-untyped-def]
    for i in range(len(slot)):
        if slot[i] < 0 or slot[i] >= n_slots:
            return i
    return -1


# --- kernels --------------------------------------------------------------------------------


# A state table is int64[chunks, n_slots, 8]: one 64-byte row per slot state, so folding an op
# touches one cache line. Hot loops index it with scalars only: an array view per op or per
# slot would update the table's shared reference count from every thread. Field positions:
_H, _HM, _REF, _CSEQ, _LAST, _REMOVED, _APPLIED, _REJECTED = range(8)
_IDENTITY = (0, 0, -1, -1, -1, 0, 0, 0)


@kernel()
def _new_table(n_chunks, n_slots):  # type: ignore[no-untyped-def]
    table = np.zeros((n_chunks, n_slots, 8), np.int64)
    table[:, :, _REF] = -1
    table[:, :, _CSEQ] = -1
    table[:, :, _LAST] = -1
    return table


@helper()
def _fold_op(table, c, s, k, q, h, hm, ref):  # type: ignore[no-untyped-def]
    """Apply one op to slot ``s`` of chunk table ``c`` in place; True if it was accepted."""
    if table[c, s, _REMOVED]:
        table[c, s, _REJECTED] += 1
        return False
    table[c, s, _APPLIED] += 1
    table[c, s, _H] += h
    table[c, s, _HM] += hm
    if q > table[c, s, _LAST]:
        table[c, s, _LAST] = q
    if k == REMOVE:
        table[c, s, _REMOVED] = 1
    elif k <= UPDATE and q >= table[c, s, _CSEQ]:
        table[c, s, _REF] = ref
        table[c, s, _CSEQ] = q
    return True


@helper()
def _combine(a, b):  # type: ignore[no-untyped-def]
    """The combine of two states (8-tuples of int64), ``a`` earlier in the log."""
    if a[_REMOVED]:
        return (a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[_REJECTED] + b[_APPLIED] + b[_REJECTED])
    newer = b[_CSEQ] >= a[_CSEQ]
    return (
        a[_H] + b[_H],
        a[_HM] + b[_HM],
        b[_REF] if newer else a[_REF],
        b[_CSEQ] if newer else a[_CSEQ],
        max(a[_LAST], b[_LAST]),
        b[_REMOVED],
        a[_APPLIED] + b[_APPLIED],
        a[_REJECTED] + b[_REJECTED],
    )


@helper()
def _get(table, c, s):  # type: ignore[no-untyped-def]
    return (
        table[c, s, 0], table[c, s, 1], table[c, s, 2], table[c, s, 3],
        table[c, s, 4], table[c, s, 5], table[c, s, 6], table[c, s, 7],
    )  # fmt: skip


@helper()
def _put(table, c, s, state):  # type: ignore[no-untyped-def]
    for f in range(8):
        table[c, s, f] = state[f]


@kernel()
def _split_columns(rows):  # type: ignore[no-untyped-def]
    """Struct of arrays with the public dtypes from ``rows`` (int64[n, 8])."""
    return (
        rows[:, _H].copy(),
        rows[:, _HM].copy(),
        rows[:, _REF].astype(np.int32),
        rows[:, _CSEQ].copy(),
        rows[:, _LAST].copy(),
        rows[:, _REMOVED] != 0,
        rows[:, _APPLIED].astype(np.int32),
        rows[:, _REJECTED].astype(np.int32),
    )


@kernel()
def _fold_range(table, c, slot, kind, seq, helpful, harmful, content_ref, lo, hi):  # type: ignore[no-untyped-def]
    """Fold ops ``lo:hi`` into chunk table ``c``."""
    for i in range(lo, hi):
        _fold_op(table, c, slot[i], kind[i], seq[i], helpful[i], harmful[i], content_ref[i])


@kernel()
def _final_states_serial(slot, kind, seq, helpful, harmful, content_ref, n_slots):  # type: ignore[no-untyped-def]
    table = _new_table(1, n_slots)
    _fold_range(table, 0, slot, kind, seq, helpful, harmful, content_ref, 0, len(slot))
    return _split_columns(table[0])


@kernel(parallel=True)
def _final_states_parallel(slot, kind, seq, helpful, harmful, content_ref, n_slots, n_chunks):  # type: ignore[no-untyped-def]
    n = len(slot)
    table = _new_table(n_chunks, n_slots)
    for c in prange(n_chunks):
        _fold_range(table, c, slot, kind, seq, helpful, harmful, content_ref, c * n // n_chunks, (c + 1) * n // n_chunks)
    for s in prange(n_slots):
        state = _get(table, 0, s)
        for c in range(1, n_chunks):
            state = _combine(state, _get(table, c, s))
        _put(table, 0, s, state)
    return _split_columns(table[0])


@kernel()
def _new_prefix_columns(n):  # type: ignore[no-untyped-def]
    return (
        np.empty(n, np.int64),
        np.empty(n, np.int64),
        np.empty(n, np.int32),
        np.empty(n, np.int64),
        np.empty(n, np.int64),
        np.empty(n, np.bool_),
        np.empty(n, np.int32),
        np.empty(n, np.int32),
        np.empty(n, np.bool_),
    )


@kernel()
def _record_range(table, c, slot, kind, seq, helpful, harmful, content_ref, lo, hi, out):  # type: ignore[no-untyped-def]
    """Fold ops ``lo:hi`` into chunk table ``c``, writing each op's inclusive state to ``out``."""
    out_h, out_hm, out_ref, out_cseq, out_last, out_removed, out_applied, out_rejected, accepted = out
    for i in range(lo, hi):
        s = slot[i]
        accepted[i] = _fold_op(table, c, s, kind[i], seq[i], helpful[i], harmful[i], content_ref[i])
        out_h[i] = table[c, s, _H]
        out_hm[i] = table[c, s, _HM]
        out_ref[i] = table[c, s, _REF]
        out_cseq[i] = table[c, s, _CSEQ]
        out_last[i] = table[c, s, _LAST]
        out_removed[i] = table[c, s, _REMOVED] != 0
        out_applied[i] = table[c, s, _APPLIED]
        out_rejected[i] = table[c, s, _REJECTED]


@kernel()
def _carry_range(table, c, slot, lo, hi, out):  # type: ignore[no-untyped-def]
    """Prepend each op's carry-in (chunk table ``c``) to its recorded local state."""
    out_h, out_hm, out_ref, out_cseq, out_last, out_removed, out_applied, out_rejected, accepted = out
    for i in range(lo, hi):
        carry = _get(table, c, slot[i])
        if carry[_APPLIED] == 0 and carry[_REJECTED] == 0:
            continue  # identity carry: the local state is already the global one
        if carry[_REMOVED]:
            accepted[i] = False
        local = (
            out_h[i], out_hm[i], np.int64(out_ref[i]), out_cseq[i],
            out_last[i], np.int64(out_removed[i]), np.int64(out_applied[i]), np.int64(out_rejected[i]),
        )  # fmt: skip
        state = _combine(carry, local)
        out_h[i] = state[_H]
        out_hm[i] = state[_HM]
        out_ref[i] = state[_REF]
        out_cseq[i] = state[_CSEQ]
        out_last[i] = state[_LAST]
        out_removed[i] = state[_REMOVED] != 0
        out_applied[i] = state[_APPLIED]
        out_rejected[i] = state[_REJECTED]


@kernel()
def _prefix_states_serial(slot, kind, seq, helpful, harmful, content_ref, n_slots):  # type: ignore[no-untyped-def]
    out = _new_prefix_columns(len(slot))
    table = _new_table(1, n_slots)
    _record_range(table, 0, slot, kind, seq, helpful, harmful, content_ref, 0, len(slot), out)
    return out


@kernel(parallel=True)
def _prefix_states_parallel(slot, kind, seq, helpful, harmful, content_ref, n_slots, n_chunks):  # type: ignore[no-untyped-def]
    n = len(slot)
    out = _new_prefix_columns(n)
    table = _new_table(n_chunks, n_slots)
    # Phase 1: fold every chunk from the identity, recording each op's local inclusive state.
    for c in prange(n_chunks):
        _record_range(table, c, slot, kind, seq, helpful, harmful, content_ref, c * n // n_chunks, (c + 1) * n // n_chunks, out)
    # Phase 2: exclusive scan of the chunk totals per slot; row c becomes chunk c's carry-in.
    for s in prange(n_slots):
        carry = _IDENTITY
        for c in range(n_chunks):
            total = _get(table, c, s)
            _put(table, c, s, carry)
            carry = _combine(carry, total)
    # Phase 3: prepend each chunk's carry-in to its local states.
    for c in prange(1, n_chunks):
        _carry_range(table, c, slot, c * n // n_chunks, (c + 1) * n // n_chunks, out)
    return out


@kernel()
def _gather_last(slot, n_ops, n_slots, helpful, harmful, content_ref, content_seq, last_seq, removed, applied, rejected):  # type: ignore[no-untyped-def]
    last = np.full(n_slots, -1, np.int64)
    for i in range(n_ops):
        last[slot[i]] = i
    table = _new_table(1, n_slots)
    for s in range(n_slots):
        i = last[s]
        if i >= 0:
            state = (
                helpful[i], harmful[i], np.int64(content_ref[i]), content_seq[i],
                last_seq[i], np.int64(removed[i]), np.int64(applied[i]), np.int64(rejected[i]),
            )  # fmt: skip
            _put(table, 0, s, state)
    return _split_columns(table[0])
