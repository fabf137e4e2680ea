"""Parallel-scan reduce: curator groups, the reducer tree, the topic split.

Each shuffled group gets one proposer (curator) call, started as soon as every record of its
group exists; all run against the same base snapshot. Their proposals are merged by reducer calls
of at most ``fan_in`` proposals each, level by level (a tree for large n). With
``max_reduce_ops`` no reducer reads more than that many proposed edits: the proposals are split
by topic (near-duplicates and edits of the same part together) and each part is reduced by its
own tree, in parallel. Generic over what is learned: the :class:`~combee_fast.protocols.Proposer`
makes the calls. Deterministic given its inputs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import msgspec

from combee_fast.protocols.learning import Proposer
from combee_fast.schema import Proposal

E = TypeVar("E")


class ReduceOutcome(msgspec.Struct, frozen=True):
    """The merged edits, every reducer call made (failed ones included), and the critical path."""

    edits: tuple[Any, ...]
    calls: tuple[Proposal[Any], ...]
    sim_seconds: float


async def curate_group(
    learner: Proposer[Any, Any],
    records: Sequence[Awaitable[Any | None]],
    artifact: Any,
    text: str,
    *,
    source: str,
    seed_path: tuple[int | str, ...],
) -> Proposal[Any] | None:
    """Wait for the group's records (None: that item gave nothing to read), then one proposer
    call over the usable ones; None when no record was usable."""
    usable = [record for record in await asyncio.gather(*records) if record is not None]
    if not usable:
        return None
    return await learner.propose(usable, artifact, text, source=source, seed_path=seed_path)


def group_finish_times(
    groups: Sequence[Sequence[int]], finished: Sequence[float], proposals: Sequence[Proposal[Any] | None]
) -> list[float]:
    """When each group's proposal was done: its last record's finish time plus the call's latency."""
    return [
        max(finished[i] for i in members) + (p.usage.effective_latency_s if p is not None else 0.0)
        for members, p in zip(groups, proposals)
    ]


def union_edits(proposals: Sequence[Sequence[E]]) -> tuple[E, ...]:
    """Fallback merge when a reducer call fails: every edit once, in proposal order (edits are hashable)."""
    return tuple(dict.fromkeys(edit for edits in proposals for edit in edits))


async def reduce_tree(
    learner: Proposer[Any, Any],
    proposals: Sequence[Sequence[Any]],
    text: str,
    *,
    fan_in: int,
    seed_path: tuple[int | str, ...],
    label: str = "reducer",
) -> ReduceOutcome:
    """Merge proposals with reducer calls of at most ``fan_in`` proposals each, level by level,
    until one remains. Empty proposals are dropped; one proposal needs no call. A failed reducer
    call falls back to :func:`union_edits` of its inputs and stays recorded in ``calls``."""
    if fan_in < 2:
        raise ValueError(f"fan_in must be >= 2, got {fan_in}")
    current = [tuple(edits) for edits in proposals if edits]
    calls: list[Proposal[Any]] = []
    sim_seconds = 0.0
    level = 0
    while len(current) > 1:
        chunks = [current[i : i + fan_in] for i in range(0, len(current), fan_in)]
        results = await asyncio.gather(
            *(
                learner.merge(chunk, text, source=f"{label}[{level}.{index}]", seed_path=(*seed_path, level, index))
                for index, chunk in enumerate(chunks)
                if len(chunk) > 1
            )
        )
        merged = iter(results)
        next_level: list[tuple[Any, ...]] = []
        for chunk in chunks:
            if len(chunk) == 1:
                next_level.append(chunk[0])
                continue
            result = next(merged)
            next_level.append(result.edits if result.error is None else union_edits(chunk))
        calls.extend(results)
        sim_seconds += max(r.usage.effective_latency_s for r in results)
        current = next_level
        level += 1
    return ReduceOutcome(edits=current[0] if current else (), calls=tuple(calls), sim_seconds=sim_seconds)


def partition_proposals(
    proposals: Sequence[Sequence[E]],
    max_ops: int,
    *,
    text_of: Callable[[E], str],
    target_of: Callable[[E], str | None],
    threshold: float = 0.8,
) -> list[list[tuple[E, ...]]]:
    """Split ``proposals`` into parts of at most ``max_ops`` edits each, for separate reducers.

    Edits whose texts are near-duplicates (similarity >= ``threshold``, native similarity kernel)
    or that change the same target land in the same part, so each reducer still sees every
    version of a lesson it must merge; parts are filled largest group first. Each part keeps the
    proposal structure (one tuple per proposal with edits in it, in proposal order, edits in
    their original order).
    """
    flat = [(number, position, op) for number, ops in enumerate(proposals) for position, op in enumerate(ops)]
    if len(flat) <= max_ops:
        return [[tuple(ops) for ops in proposals if ops]]
    from combee_fast.native.similarity import near_duplicates

    parent = list(range(len(flat)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_by_target: dict[str, int] = {}
    for i, (_, _, op) in enumerate(flat):
        if (target := target_of(op)) is not None:
            parent[root(i)] = root(first_by_target.setdefault(target, i))
    for i, j, _ in near_duplicates([text_of(op) for _, _, op in flat], threshold):
        parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(flat)):
        groups.setdefault(root(i), []).append(i)
    pieces = [g[k : k + max_ops] for g in groups.values() for k in range(0, len(g), max_ops)]
    parts: list[list[int]] = []
    for piece in sorted(pieces, key=lambda g: (-len(g), g[0])):
        home = next((part for part in parts if len(part) + len(piece) <= max_ops), None)
        if home is None:
            parts.append(home := [])
        home.extend(piece)
    return [_as_proposals(sorted(part), flat) for part in parts]


def _as_proposals(members: list[int], flat: list[tuple[int, int, E]]) -> list[tuple[E, ...]]:
    by_proposal: dict[int, list[E]] = {}
    for i in members:
        number, _, op = flat[i]
        by_proposal.setdefault(number, []).append(op)
    return [tuple(by_proposal[number]) for number in sorted(by_proposal)]


async def reduce_proposals(
    learner: Proposer[Any, Any],
    proposals: Sequence[Sequence[Any]],
    text: str,
    *,
    fan_in: int,
    max_ops: int | None,
    seed_path: tuple[int | str, ...],
) -> ReduceOutcome:
    """Reduce with no call reading more than ``max_ops`` proposed edits (None: one tree, no split):
    the proposals are split by topic (:func:`partition_proposals`, off the event loop), each part
    is reduced by its own tree in parallel, and the parts' results are concatenated."""
    if max_ops is None:
        return await reduce_tree(learner, proposals, text, fan_in=fan_in, seed_path=seed_path)
    parts = await asyncio.to_thread(
        partition_proposals, proposals, max_ops, text_of=learner.edit_text, target_of=learner.edit_target
    )
    if len(parts) == 1:
        return await reduce_tree(learner, parts[0], text, fan_in=fan_in, seed_path=seed_path)
    outcomes = await asyncio.gather(
        *(
            reduce_tree(
                learner, part, text, fan_in=fan_in, seed_path=(*seed_path, "part", index),
                label=f"reducer.part{index}",
            )
            for index, part in enumerate(parts)
        )
    )
    return ReduceOutcome(
        edits=tuple(edit for outcome in outcomes for edit in outcome.edits),
        calls=tuple(call for outcome in outcomes for call in outcome.calls),
        sim_seconds=max((outcome.sim_seconds for outcome in outcomes), default=0.0),
    )
