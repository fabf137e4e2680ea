"""Combee's reduce side: summed tags, augmented shuffle, and the reduce tree.

Pure functions plus one async tree walk; the methods in :mod:`combee_fast.learn.methods` compose
them. Everything here is deterministic given its inputs and RNG.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections.abc import Sequence

import msgspec
import numpy as np

from combee_fast.learn.agents import Agents, Proposal
from combee_fast.learn.sample import SampleTrace
from combee_fast.playbook import Playbook
from combee_fast.schema import Op, OpKind


def tag_ops(traces: Sequence[SampleTrace], playbook: Playbook) -> tuple[Op, ...]:
    """One TAG op per bullet, summing the helpful/harmful tags of every reflection in ``traces``.

    Tags naming ids not in ``playbook`` (hallucinated citations) are dropped here. Sorted by id.
    """
    counts: dict[str, list[int]] = {}
    for trace in traces:
        for reflection in trace.reflections:
            for tag in reflection.bullet_tags:
                if tag.tag == "neutral" or tag.bullet_id not in playbook:
                    continue
                pair = counts.setdefault(tag.bullet_id, [0, 0])
                pair[0 if tag.tag == "helpful" else 1] += 1
    return tuple(
        Op(OpKind.TAG, bullet_id=bullet_id, helpful=helpful, harmful=harmful)
        for bullet_id, (helpful, harmful) in sorted(counts.items())
    )


def augmented_groups(
    n: int, duplicates: int, rng: np.random.Generator, *, max_group: int | None = None
) -> list[tuple[int, ...]]:
    """Augmented shuffle: ``duplicates`` copies of each of ``n`` records, shuffled, cut into
    ``k = floor(sqrt(n))`` groups of near-equal size (the paper's rule), or into more groups when
    that is needed to keep every group at most ``max_group`` records. A copy landing twice in one
    group is kept once (it would tell that curator nothing new). Members keep their shuffled order."""
    if n == 0:
        return []
    records = np.repeat(np.arange(n), duplicates)
    rng.shuffle(records)
    k = max(1, math.isqrt(n))
    if max_group is not None:
        k = max(k, -(-len(records) // max_group))
    return [tuple(dict.fromkeys(int(i) for i in chunk)) for chunk in np.array_split(records, k)]


def finish_times(durations: Sequence[float], workers: int) -> list[float]:
    """Simulated finish time of each item when ``workers`` run them in index order (list scheduling),
    as the engine's worker pool does."""
    free_at = [0.0] * max(1, min(workers, len(durations)))
    finished: list[float] = []
    for duration in durations:
        start = heapq.heappop(free_at)
        finished.append(start + duration)
        heapq.heappush(free_at, start + duration)
    return finished


def union_ops(proposals: Sequence[Sequence[Op]]) -> tuple[Op, ...]:
    """Fallback merge when a reducer call fails: every op once, in proposal order."""
    return tuple(dict.fromkeys(op for ops in proposals for op in ops))


class ReduceOutcome(msgspec.Struct, frozen=True):
    ops: tuple[Op, ...]
    calls: tuple[Proposal, ...]
    sim_seconds: float


async def reduce_tree(
    agents: Agents,
    proposals: Sequence[Sequence[Op]],
    playbook_text: str,
    *,
    fan_in: int,
    seed_path: tuple[int | str, ...],
    label: str = "reducer",
) -> ReduceOutcome:
    """Merge proposals with reducer calls of at most ``fan_in`` proposals each, level by level,
    until one remains. Empty proposals are dropped; one proposal needs no call. A failed reducer
    call falls back to :func:`union_ops` of its inputs and stays recorded in ``calls``."""
    if fan_in < 2:
        raise ValueError(f"fan_in must be >= 2, got {fan_in}")
    current = [tuple(ops) for ops in proposals if ops]
    calls: list[Proposal] = []
    sim_seconds = 0.0
    level = 0
    while len(current) > 1:
        chunks = [current[i : i + fan_in] for i in range(0, len(current), fan_in)]
        results = await asyncio.gather(
            *(
                agents.reduce(
                    chunk, playbook_text, source=f"{label}[{level}.{index}]", seed_path=(*seed_path, level, index)
                )
                for index, chunk in enumerate(chunks)
                if len(chunk) > 1
            )
        )
        merged = iter(results)
        next_level: list[tuple[Op, ...]] = []
        for chunk in chunks:
            if len(chunk) == 1:
                next_level.append(chunk[0])
                continue
            result = next(merged)
            next_level.append(result.ops if result.error is None else union_ops(chunk))
        calls.extend(results)
        sim_seconds += max(r.usage.effective_latency_s for r in results)
        current = next_level
        level += 1
    return ReduceOutcome(ops=current[0] if current else (), calls=tuple(calls), sim_seconds=sim_seconds)


def partition_proposals(
    proposals: Sequence[Sequence[Op]], max_ops: int, *, threshold: float = 0.8
) -> list[list[tuple[Op, ...]]]:
    """Split ``proposals`` into parts of at most ``max_ops`` ops each, for separate reducers.

    Ops whose texts are near-duplicates (similarity >= ``threshold``, or the same bullet id) land
    in the same part, so each reducer still sees every version of a lesson it must merge; parts
    are filled largest group first. Each part keeps the proposal structure (one tuple per
    proposal that has ops in it, in proposal order, ops in their original order).
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

    first_by_id: dict[str, int] = {}
    for i, (_, _, op) in enumerate(flat):
        if op.bullet_id is not None:
            parent[root(i)] = root(first_by_id.setdefault(op.bullet_id, i))
    for i, j, _ in near_duplicates([op.content for _, _, op in flat], threshold):
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


def _as_proposals(members: list[int], flat: list[tuple[int, int, Op]]) -> list[tuple[Op, ...]]:
    by_proposal: dict[int, list[Op]] = {}
    for i in members:
        number, _, op = flat[i]
        by_proposal.setdefault(number, []).append(op)
    return [tuple(by_proposal[number]) for number in sorted(by_proposal)]


async def reduce_partitioned(
    agents: Agents,
    proposals: Sequence[Sequence[Op]],
    playbook_text: str,
    *,
    fan_in: int,
    max_ops: int,
    seed_path: tuple[int | str, ...],
) -> ReduceOutcome:
    """Reduce with no call reading more than ``max_ops`` proposed ops: the proposals are split by
    topic (:func:`partition_proposals`, off the event loop), each part is reduced by its own tree
    in parallel, and the parts' results are concatenated. One part is exactly :func:`reduce_tree`."""
    parts = await asyncio.to_thread(partition_proposals, proposals, max_ops)
    if len(parts) == 1:
        return await reduce_tree(agents, parts[0], playbook_text, fan_in=fan_in, seed_path=seed_path)
    outcomes = await asyncio.gather(
        *(
            reduce_tree(
                agents, part, playbook_text, fan_in=fan_in, seed_path=(*seed_path, "part", index),
                label=f"reducer.part{index}",
            )
            for index, part in enumerate(parts)
        )
    )
    return ReduceOutcome(
        ops=tuple(op for outcome in outcomes for op in outcome.ops),
        calls=tuple(call for outcome in outcomes for call in outcome.calls),
        sim_seconds=max((outcome.sim_seconds for outcome in outcomes), default=0.0),
    )
