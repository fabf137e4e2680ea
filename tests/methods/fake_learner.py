"""A learner of our own, for driving the methods with no HTTP: the artifact is a set of notes,
an item's trace is one "attempt" whose lesson is the item's text, a proposal keeps its records'
lessons, a merge keeps every distinct one, and an apply adds the merged notes.

It shows a newcomer the whole :class:`~combee_fast.protocols.Learner` contract on a page.
Call latencies are reported in simulated seconds so the methods' critical paths can be checked.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

import msgspec

from combee_fast.methods.base import Applied
from combee_fast.schema import CallError, Proposal, Usage


class Notes(msgspec.Struct, frozen=True):
    """The artifact: lessons in the order they were learned, and a version."""

    lessons: tuple[str, ...] = ()
    version: int = 0

    def __len__(self) -> int:
        return len(self.lessons)


class Attempt(msgspec.Struct, frozen=True):
    """The trace of one item: its lesson, whether it got the item right, and its call."""

    item_id: str
    lesson: str
    correct: bool
    usage: Usage
    retrying: bool = False

    @property
    def sim_seconds(self) -> float:
        return self.usage.effective_latency_s

    @property
    def reward(self) -> float:
        return 1.0 if self.correct else 0.0

    def call_outcomes(self) -> list[tuple[Usage, CallError | None]]:
        return [(self.usage, None)]

    def errors(self) -> list[tuple[str, CallError]]:
        return []


class Change(msgspec.Struct, frozen=True):
    added_ids: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()


def _usage(role: str, seconds: float) -> Usage:
    return Usage(role=role, sim_latency_s=seconds)


class NotesLearner:
    """``items`` are strings; an item ending in ``!`` is answered right, one ending in ``?`` is
    still retrying after its step's rounds (carried); ``jitter`` makes calls complete in a random
    order (real seconds), which must never change what is learned."""

    def __init__(self, *, jitter: random.Random | None = None) -> None:
        self.jitter = jitter
        self.proposed: list[tuple[str, tuple[str, ...]]] = []  # (source, records) of every propose call
        self.merged: list[int] = []  # proposals each merge call read

    async def _pause(self) -> None:
        if self.jitter is not None:
            await asyncio.sleep(self.jitter.random() / 500)

    async def render(self, artifact: Notes) -> str:
        return "\n".join(artifact.lessons)

    async def run_item(self, item: str, artifact: Notes, text: str, *, epoch: int, rounds: int) -> Attempt:
        await self._pause()
        return Attempt(item, f"lesson of {item.rstrip('!?')}", item.endswith("!"), _usage("generator", 1.0),
                       retrying=item.endswith("?") and rounds < 3)

    def continuation(self, trace: Attempt, artifact: Notes, text: str, *, epoch: int) -> Any:
        if not trace.retrying:
            return None

        async def rest() -> Attempt:
            await self._pause()
            return Attempt(trace.item_id, trace.lesson + " (retried)", True, _usage("generator", 5.0))

        return rest()

    def record(self, trace: Attempt) -> str | None:
        return None if trace.retrying else trace.lesson

    def insight(self, record: str) -> str:
        return record

    async def propose(self, records: Sequence[str], artifact: Notes, text: str, *, source: str,
                      seed_path: tuple[int | str, ...]) -> Proposal[str]:
        await self._pause()
        self.proposed.append((source, tuple(records)))
        fresh = tuple(r for r in records if r not in artifact.lessons)
        return Proposal(source=source, edits=tuple(dict.fromkeys(fresh)), usage=_usage("curator", 2.0))

    async def merge(self, proposals: Sequence[Sequence[str]], text: str, *, source: str,
                    seed_path: tuple[int | str, ...]) -> Proposal[str]:
        await self._pause()
        self.merged.append(len(proposals))
        merged = tuple(dict.fromkeys(edit for edits in proposals for edit in edits))
        return Proposal(source=source, edits=merged, usage=_usage("reducer", 3.0))

    def edit_text(self, edit: str) -> str:
        return edit

    def edit_target(self, edit: str) -> str | None:
        return None

    async def apply(self, artifact: Notes, traces: Sequence[Attempt], edits: Sequence[str], source: str) -> Applied[Notes]:
        added = tuple(e for e in dict.fromkeys(edits) if e not in artifact.lessons)
        if not added:
            return Applied(artifact, Change(), (), ())
        return Applied(Notes(artifact.lessons + added, artifact.version + 1), Change(added_ids=added), added, (source,))
