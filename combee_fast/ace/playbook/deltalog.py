"""The delta log of a run (``deltas.jsonl``) and its replay with the Numba delta-scan kernel.

Each apply that changed the playbook is logged as the ops that took effect, in apply order: ADDs
carry the id they were given, evictions by the token budget appear as REMOVEs. Replaying the log
from an empty playbook with :func:`combee_fast.native.prefix_states` gives the counters, content
and tombstones of every bullet at every version in one parallel scan, without re-applying deltas:
auditing a run, or answering "what did the playbook say at version v" in the online mode.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from combee_fast.errors import CombeeError
from combee_fast.files import read_regular
from combee_fast.ace.playbook import ApplyReport
from combee_fast.schema import SCHEMA_VERSION
from combee_fast.ace.records import Delta, Op, OpKind

_KIND_CODES = {OpKind.ADD: 0, OpKind.UPDATE: 1, OpKind.REMOVE: 2, OpKind.TAG: 3}


class LoggedDelta(msgspec.Struct, frozen=True):
    """The ops one apply made take effect, and the playbook version they produced."""

    version: int
    source: str
    ops: tuple[Op, ...]
    schema_version: int = SCHEMA_VERSION


class BulletState(msgspec.Struct, frozen=True):
    content: str
    helpful: int
    harmful: int


def logged_delta(delta: Delta, report: ApplyReport, version: int) -> LoggedDelta:
    """What ``report`` says took effect of ``delta``, as replayable ops."""
    added = iter(report.added_ids)
    ops: list[Op] = []
    for index in report.applied:
        op = delta.ops[index]
        if op.kind is OpKind.ADD:
            op = msgspec.structs.replace(op, bullet_id=next(added))
        ops.append(op)
    ops.extend(Op(OpKind.REMOVE, bullet_id=bullet.id) for bullet in report.evicted)
    return LoggedDelta(version=version, source=delta.source, ops=tuple(ops))


def read_delta_log(path: str | Path) -> list[LoggedDelta]:
    """The log at ``path``; a bad line raises :class:`CombeeError` naming the file and line."""
    decoder = msgspec.json.Decoder(LoggedDelta)
    entries = []
    for number, line in enumerate(read_regular(path).splitlines(), start=1):
        try:
            entries.append(decoder.decode(line))
        except msgspec.DecodeError as exc:
            raise CombeeError(f"{path}:{number}: not a delta log entry: {exc}") from None
    return entries


class ReplayedLog:
    """Every version of a logged run, from one prefix scan over all its ops."""

    def __init__(self, entries: Sequence[LoggedDelta]) -> None:
        from combee_fast.native import prefix_states

        self.versions = [entry.version for entry in entries]
        self._ends = np.cumsum([len(entry.ops) for entry in entries], dtype=np.int64)
        self._ids, self._contents, batch = _encode(entries)
        self._prefix = prefix_states(batch, len(self._ids))

    def bullets_at(self, version: int) -> dict[str, BulletState]:
        """The live bullets (id -> content and counters) at playbook ``version``."""
        position = int(np.searchsorted(self.versions, version, side="right"))
        if position == 0:
            return {}
        return _live(self._ids, self._contents, self._prefix.state_after(int(self._ends[position - 1])))


def replay(entries: Iterable[LoggedDelta]) -> ReplayedLog:
    """Every version of the logged run (one prefix scan; memory grows with ops x bullets touched)."""
    return ReplayedLog(list(entries))


def final_bullets(entries: Sequence[LoggedDelta]) -> dict[str, BulletState]:
    """The live bullets after the whole log, from one final-state scan (no per-version memory):
    what ``final.json`` must hold, recomputed from ``deltas.jsonl`` alone."""
    from combee_fast.native import final_states

    ids, contents, batch = _encode(entries)
    state = final_states(batch, len(ids))
    return _live(ids, contents, state)


def _live(ids: list[str], contents: list[str], state: Any) -> dict[str, BulletState]:
    live = np.flatnonzero(~state.removed & (state.content_ref >= 0))
    return {
        ids[slot]: BulletState(contents[state.content_ref[slot]], int(state.helpful[slot]), int(state.harmful[slot]))
        for slot in live
    }


def _encode(entries: Sequence[LoggedDelta]) -> tuple[list[str], list[str], Any]:
    """The log's ops as the scan kernel's struct of arrays: (bullet id per slot, op contents, batch)."""
    from combee_fast.native import OpBatch

    ops = [op for entry in entries for op in entry.ops]
    ids = list(dict.fromkeys(op.bullet_id or "" for op in ops))
    slot_of = {bullet_id: slot for slot, bullet_id in enumerate(ids)}
    has_content = [op.kind in (OpKind.ADD, OpKind.UPDATE) for op in ops]
    batch = OpBatch.from_arrays(
        np.fromiter((slot_of[op.bullet_id or ""] for op in ops), np.int32, len(ops)),
        np.fromiter((_KIND_CODES[op.kind] for op in ops), np.int8, len(ops)),
        np.arange(len(ops), dtype=np.int64),
        np.fromiter((op.helpful for op in ops), np.int32, len(ops)),
        np.fromiter((op.harmful for op in ops), np.int32, len(ops)),
        np.array([i if content else -1 for i, content in enumerate(has_content)], dtype=np.int32),
        n_contents=len(ops),
    )
    return ids, [op.content for op in ops], batch
