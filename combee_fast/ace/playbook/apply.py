"""Applying a :class:`~combee_fast.ace.records.Delta` to a playbook state: op rules, tag aggregation,
token-budget eviction.

Ops are checked in order against the state as the earlier ops of the same delta left it. An op
either takes effect whole or is rejected with a reason; rejection never stops the rest of the
delta. Fields an op kind does not use are ignored.

- ADD needs ``section`` and ``content``. The section is normalised (``"Common Mistakes"`` ->
  ``common_mistakes``); an unknown valid name creates a user-defined section. The new bullet gets
  id ``<slug>-<counter>`` from the global counter, counters 0, and ``Delta.rollout_ids`` as its
  sources.
- UPDATE needs ``bullet_id`` and ``content``: replaces the content, keeps the counters, sets the
  sources to ``Delta.rollout_ids``. Content equal to the current content is rejected
  ("unchanged").
- An ADD or UPDATE whose content another live bullet already has, word for word, is rejected
  ("duplicate"): small models repeat one operation until their reply ends (Qwen2.5-Coder-0.5B
  wrote one ADD five times and another three times in a single reply).
- REMOVE needs ``bullet_id``: the id becomes a tombstone, never live again and never reused.
- TAG needs ``bullet_id`` and non-negative ``helpful``/``harmful``, not both zero. Accepted tags
  are summed by :func:`aggregate_tags` and added once, after the other ops (counters commute with
  content changes; tags on a bullet removed later in the same delta are dropped with it).

Content is trimmed of surrounding whitespace, then must be non-empty, at most
``max_bullet_chars`` long and one line. Ops on a removed id are rejected with reason "removed".

Token budget: an ADD or UPDATE whose bullet could not fit even alone in its section is rejected.
After the ops, while the rendered text is over budget, live bullets are evicted in this order:
lowest ``helpful - harmful`` first, then oldest ``created_version``, then lowest id counter, then
id. Evicted bullets become tombstones and are reported. The cost is O(ops + bullets) plus
O(evicted * log bullets); nothing is rendered.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

import msgspec

from combee_fast.ace.playbook.format import (
    bullet_cost,
    clean_content,
    id_counter,
    make_id,
    normalize_section,
    section_cost,
    section_problem,
    text_length,
)
from combee_fast.ace.playbook.state import PlaybookState
from combee_fast.ace.records import Bullet, Delta, Op, OpKind


class RejectedOp(msgspec.Struct, frozen=True):
    """An op that did not take effect, and why."""

    op_index: int
    op: Op
    reason: str


class ApplyReport(msgspec.Struct, frozen=True):
    """What one apply did. ``applied`` and ``rejected`` together cover every op of the delta;
    ``tags_applied`` counts the TAG ops among ``applied``."""

    applied: tuple[int, ...] = ()
    added_ids: tuple[str, ...] = ()
    rejected: tuple[RejectedOp, ...] = ()
    evicted: tuple[Bullet, ...] = ()
    tags_applied: int = 0


def aggregate_tags(ops: Iterable[Op]) -> dict[str, tuple[int, int]]:
    """Summed ``(helpful, harmful)`` increments per bullet id over already-accepted TAG ops.

    The one place TAG counters are combined, so a vectorised kernel can take it over.
    """
    totals: dict[str, tuple[int, int]] = {}
    for op in ops:
        key = op.bullet_id
        if key is None:
            raise ValueError(f"TAG op without bullet_id: {op!r}")
        helpful, harmful = totals.get(key, (0, 0))
        totals[key] = (helpful + op.helpful, harmful + op.harmful)
    return totals


class _Working:
    """Mutable copies of a state's parts while one delta is applied; the base is untouched."""

    def __init__(self, base: PlaybookState, delta: Delta) -> None:
        self.base = base
        self.version = base.version + 1
        self.rollout_ids = delta.rollout_ids
        self.bullets = dict(base.bullets)
        self.sizes = dict(base.section_sizes)
        self.sections = list(base.sections)
        self.removed: set[str] = set()
        self.next_id = base.next_id
        self.cost = base.cost
        self.limit = base.char_limit
        self.holders = {bullet.content: bullet.id for bullet in self.bullets.values()}
        """The id of a live bullet with each content (one, if older playbooks hold copies)."""

    # -- checks ------------------------------------------------------------------------------

    def find_live(self, bullet_id: str | None) -> Bullet | str:
        """The live bullet with ``bullet_id``, or the reason there is none."""
        if bullet_id is None:
            return "missing bullet_id"
        bullet = self.bullets.get(bullet_id)
        if bullet is not None:
            return bullet
        if bullet_id in self.removed or bullet_id in self.base.removed:
            return f"removed: bullet {bullet_id} was removed"
        return f"unknown id {bullet_id!r}"

    def duplicate_problem(self, content: str, bullet_id: str | None = None) -> str | None:
        """Why ``content`` may not be written (to ``bullet_id``, or a new bullet): another live
        bullet already has it."""
        holder = self.holders.get(content)
        if holder is None or holder == bullet_id:
            return None
        return f"duplicate: bullet {holder} already has this content"

    def fit_problem(self, bullet: Bullet) -> str | None:
        """Why ``bullet`` could never fit the budget, even as the only bullet rendered."""
        if self.limit is None:
            return None
        alone = text_length(section_cost(bullet.section) + bullet_cost(bullet))
        if alone <= self.limit:
            return None
        return f"does not fit token_budget {self.base.token_budget} even alone ({alone} chars rendered)"

    # -- edits (each called only after its checks passed) ------------------------------------

    def put(self, bullet: Bullet) -> None:
        old = self.bullets.get(bullet.id)
        if old is None:
            if self.sizes[bullet.section] == 0:
                self.cost += section_cost(bullet.section)
            self.sizes[bullet.section] += 1
        else:
            self.cost -= bullet_cost(old)
            self._forget(old)
        self.bullets[bullet.id] = bullet
        self.holders.setdefault(bullet.content, bullet.id)
        self.cost += bullet_cost(bullet)

    def drop(self, bullet_id: str) -> Bullet:
        bullet = self.bullets.pop(bullet_id)
        self._forget(bullet)
        self.removed.add(bullet_id)
        self.cost -= bullet_cost(bullet)
        self.sizes[bullet.section] -= 1
        if self.sizes[bullet.section] == 0:
            self.cost -= section_cost(bullet.section)
        return bullet

    def _forget(self, bullet: Bullet) -> None:
        """``bullet``'s content no longer held by it."""
        if self.holders.get(bullet.content) == bullet.id:
            del self.holders[bullet.content]

    # -- op kinds: each returns a rejection reason or None once applied -----------------------

    def add(self, op: Op, added_ids: list[str]) -> str | None:
        if not op.section.strip():
            return "missing section"
        section = normalize_section(op.section)
        if problem := section_problem(section):
            return problem
        content, problem = clean_content(op.content, self.base.max_bullet_chars)
        if problem:
            return problem
        if problem := self.duplicate_problem(content):
            return problem
        bullet = Bullet(
            id=make_id(section, self.next_id),
            section=section,
            content=content,
            created_version=self.version,
            updated_version=self.version,
            source_rollout_ids=self.rollout_ids,
        )
        if problem := self.fit_problem(bullet):
            return problem
        if section not in self.sizes:
            self.sections.append(section)
            self.sizes[section] = 0
        self.next_id += 1
        self.put(bullet)
        added_ids.append(bullet.id)
        return None

    def update(self, op: Op) -> str | None:
        current = self.find_live(op.bullet_id)
        if isinstance(current, str):
            return current
        content, problem = clean_content(op.content, self.base.max_bullet_chars)
        if problem:
            return problem
        if content == current.content:
            return f"unchanged: bullet {current.id} already has this content"
        if problem := self.duplicate_problem(content, current.id):
            return problem
        bullet = msgspec.structs.replace(
            current, content=content, updated_version=self.version, source_rollout_ids=self.rollout_ids
        )
        if problem := self.fit_problem(bullet):
            return problem
        self.put(bullet)
        return None

    def remove(self, op: Op) -> str | None:
        found = self.find_live(op.bullet_id)
        if isinstance(found, str):
            return found
        self.drop(found.id)
        return None

    def tag(self, op: Op) -> str | None:
        found = self.find_live(op.bullet_id)
        if isinstance(found, str):
            return found
        if op.helpful < 0 or op.harmful < 0:
            return f"negative increment (helpful={op.helpful}, harmful={op.harmful})"
        if op.helpful == 0 and op.harmful == 0:
            return "no increment: helpful and harmful are both 0"
        return None

    def add_tags(self, totals: dict[str, tuple[int, int]]) -> None:
        for bullet_id, (helpful, harmful) in totals.items():
            current = self.bullets.get(bullet_id)
            if current is None:  # removed by a later op of the same delta
                continue
            self.put(
                msgspec.structs.replace(
                    current,
                    helpful=current.helpful + helpful,
                    harmful=current.harmful + harmful,
                    updated_version=self.version,
                )
            )

    def evict_to_budget(self) -> list[Bullet]:
        """Drop bullets in eviction order until the rendered text fits the budget."""
        if self.limit is None or text_length(self.cost) <= self.limit:
            return []
        queue = [
            (b.helpful - b.harmful, b.created_version, id_counter(b.id), b.id) for b in self.bullets.values()
        ]
        heapq.heapify(queue)
        evicted: list[Bullet] = []
        while text_length(self.cost) > self.limit:
            *_, bullet_id = heapq.heappop(queue)
            evicted.append(self.drop(bullet_id))
        return evicted

    def state(self) -> PlaybookState:
        return PlaybookState(
            version=self.version,
            sections=tuple(self.sections),
            token_budget=self.base.token_budget,
            max_bullet_chars=self.base.max_bullet_chars,
            next_id=self.next_id,
            bullets=self.bullets,
            removed=self.base.removed | self.removed if self.removed else self.base.removed,
            section_sizes=self.sizes,
            cost=self.cost,
        )


def apply_delta(base: PlaybookState, delta: Delta) -> tuple[PlaybookState, ApplyReport]:
    """The state after ``delta`` and what happened; ``base`` itself when no op took effect."""
    work = _Working(base, delta)
    applied: list[int] = []
    added_ids: list[str] = []
    rejected: list[RejectedOp] = []
    accepted_tags: list[Op] = []
    for index, op in enumerate(delta.ops):
        if op.kind is OpKind.ADD:
            reason = work.add(op, added_ids)
        elif op.kind is OpKind.UPDATE:
            reason = work.update(op)
        elif op.kind is OpKind.REMOVE:
            reason = work.remove(op)
        elif op.kind is OpKind.TAG:
            reason = work.tag(op)
            if reason is None:
                accepted_tags.append(op)
        else:
            reason = f"unknown op kind {op.kind!r}"
        if reason is None:
            applied.append(index)
        else:
            rejected.append(RejectedOp(op_index=index, op=op, reason=reason))
    if not applied:
        return base, ApplyReport(rejected=tuple(rejected))
    work.add_tags(aggregate_tags(accepted_tags))
    evicted = work.evict_to_budget()
    report = ApplyReport(
        applied=tuple(applied), added_ids=tuple(added_ids), rejected=tuple(rejected), evicted=tuple(evicted),
        tags_applied=len(accepted_tags),
    )
    return work.state(), report
