"""ACE's playbook as what Combee learns: the :class:`~combee_fast.protocols.Learner` of a playbook.

- map: the generate/reflect/regenerate chain (:mod:`combee_fast.ace.chain`) per example, or one
  reflection per collected rollout (tasks whose rollouts already exist);
- record: a chain's last usable reflection; propose: one curator call; merge: one reducer call;
- apply: every reflection's helpful/harmful tags summed into one TAG op per bullet, then the
  merged ops, as one :class:`~combee_fast.ace.records.Delta` applied once, off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any

from combee_fast.ace.calls import AceCalls
from combee_fast.ace.chain import SampleTrace, can_continue, continue_sample, reflect_only, run_sample
from combee_fast.methods.base import Applied
from combee_fast.ace.playbook import Playbook
from combee_fast.ace.playbook.deltalog import logged_delta
from combee_fast.protocols.rollouts import Attempts
from combee_fast.schema import Proposal
from combee_fast.ace.records import Delta, Op, OpKind, Reflection


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


class AceLearner:
    """The playbook learner (a :class:`~combee_fast.protocols.Learner` of playbooks, reflections
    and ops) on ACE's role calls ``calls``. A chain regenerates ``max_rounds`` times at most.
    ``from_rollouts``: items are collected rollouts (reflect only, nothing to regenerate).
    ``attempts``: how an attempt is made (default: one generator call; agent episodes)."""

    def __init__(self, calls: AceCalls, *, max_rounds: int, from_rollouts: bool = False,
                 attempts: Attempts | None = None) -> None:
        self.calls = calls
        self.max_rounds = max_rounds
        self.from_rollouts = from_rollouts
        self.attempts = attempts or calls

    async def render(self, artifact: Playbook) -> str:
        return await asyncio.to_thread(artifact.render)

    async def run_item(self, item: Any, artifact: Playbook, text: str, *, epoch: int, rounds: int) -> SampleTrace:
        if self.from_rollouts:
            return await reflect_only(self.calls, item, artifact, epoch=epoch)
        return await run_sample(self.calls, item, artifact, text, epoch=epoch, max_rounds=rounds,
                                attempts=self.attempts)

    def continuation(
        self, trace: SampleTrace, artifact: Playbook, text: str, *, epoch: int
    ) -> Awaitable[SampleTrace] | None:
        if self.from_rollouts or not can_continue(trace, self.max_rounds):
            return None
        return continue_sample(self.calls, trace, artifact, text, epoch=epoch, max_rounds=self.max_rounds,
                               attempts=self.attempts)

    def record(self, trace: SampleTrace) -> Reflection | None:
        return trace.final_reflection

    def insight(self, record: Reflection) -> str:
        return record.key_insight

    async def propose(
        self, records: Sequence[Reflection], artifact: Playbook, text: str, *, source: str,
        seed_path: tuple[int | str, ...],
    ) -> Proposal[Op]:
        return await self.calls.curate(records, artifact, text, source=source, seed_path=seed_path)

    async def merge(
        self, proposals: Sequence[Sequence[Op]], text: str, *, source: str, seed_path: tuple[int | str, ...]
    ) -> Proposal[Op]:
        return await self.calls.reduce(proposals, text, source=source, seed_path=seed_path)

    def edit_text(self, edit: Op) -> str:
        return edit.content

    def edit_target(self, edit: Op) -> str | None:
        return edit.bullet_id

    async def apply(self, artifact: Playbook, traces: Sequence[SampleTrace], edits: Sequence[Op],
                    source: str) -> Applied[Playbook]:
        """Tags of all traces, then ``edits``, as one delta applied once, off the event loop."""
        reflections = [r for t in traces for r in t.reflections if r.error is None]
        delta = Delta(
            ops=tag_ops(traces, artifact) + tuple(edits),
            source=source,
            reflection_ids=tuple(r.id for r in reflections),
            rollout_ids=tuple(r.id for t in traces for r in t.rollouts),
        )
        playbook, report = await asyncio.to_thread(artifact.apply, delta)
        changed = playbook.version != artifact.version
        kept = tuple(
            delta.ops[i].content for i in report.applied if delta.ops[i].kind in (OpKind.ADD, OpKind.UPDATE)
        )
        log = (logged_delta(delta, report, playbook.version),) if changed else ()
        return Applied(playbook, report, kept, log)
