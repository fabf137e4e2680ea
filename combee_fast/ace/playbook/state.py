"""The data inside one playbook snapshot, the checks that make it valid, and its rendering.

:class:`PlaybookState` is what :class:`combee_fast.ace.playbook.Playbook` wraps. Its dicts are never
mutated once a state is built; every change makes a new state (see ``playbook_apply``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from combee_fast.ace.playbook.format import (
    bullet_cost,
    bullet_line,
    clean_content,
    header_line,
    id_counter,
    section_cost,
    section_problem,
    text_length,
)
from combee_fast.ace.records import Bullet
from combee_fast.tokens import CHARS_PER_TOKEN


@dataclass(frozen=True, slots=True)
class PlaybookState:
    """One whole version of a playbook.

    ``bullets`` holds the live bullets by id, each section's bullets in the order they were first
    created; ``section_sizes`` counts live bullets per section; ``cost`` is the summed
    :func:`~combee_fast.ace.playbook.format.section_cost` and
    :func:`~combee_fast.ace.playbook.format.bullet_cost` of everything rendered.
    """

    version: int
    sections: tuple[str, ...]
    token_budget: int | None
    max_bullet_chars: int
    next_id: int
    bullets: dict[str, Bullet]
    removed: frozenset[str]
    section_sizes: dict[str, int]
    cost: int

    @property
    def char_limit(self) -> int | None:
        """Longest rendered text the token budget allows (``estimate_tokens`` is ceil(len/4))."""
        return None if self.token_budget is None else self.token_budget * CHARS_PER_TOKEN


def options_problem(sections: Sequence[str], token_budget: int | None, max_bullet_chars: int) -> str | None:
    """Why these playbook options are invalid, or ``None``: section names must be valid and
    distinct, ``token_budget`` positive or ``None``, ``max_bullet_chars`` positive."""
    if token_budget is not None and token_budget <= 0:
        return f"token_budget must be positive or None, got {token_budget}"
    if max_bullet_chars <= 0:
        return f"max_bullet_chars must be positive, got {max_bullet_chars}"
    for section in sections:
        if problem := section_problem(section):
            return f"sections: {problem}"
    if len(set(sections)) != len(sections):
        return f"sections repeat a name: {tuple(sections)}"
    return None


def build_state(
    *,
    version: int,
    sections: Iterable[str],
    token_budget: int | None,
    max_bullet_chars: int,
    next_id: int,
    bullets: Iterable[Bullet],
    removed: Iterable[str],
) -> PlaybookState:
    """A validated state from untrusted parts (a file, parsed text, caller options).

    Raises ``ValueError`` naming the first broken rule: bad options, an invalid section name or
    id, a bullet in an undeclared section, a duplicate or removed id, unusable content, negative
    counters, versions out of order, a ``next_id`` that could collide, or text over the budget.
    """
    if version < 0:
        raise ValueError(f"version must be >= 0, got {version}")
    section_list = tuple(sections)
    if problem := options_problem(section_list, token_budget, max_bullet_chars):
        raise ValueError(problem)
    removed_ids = frozenset(removed)
    highest = max((c for c in map(id_counter, removed_ids) if c is not None), default=0)
    sizes = dict.fromkeys(section_list, 0)
    live: dict[str, Bullet] = {}
    cost = 0
    for bullet in bullets:
        counter = id_counter(bullet.id)
        if counter is None:
            raise ValueError(f"invalid bullet id {bullet.id!r}: expected <slug>-<number>")
        if bullet.id in live:
            raise ValueError(f"duplicate bullet id {bullet.id}")
        if bullet.id in removed_ids:
            raise ValueError(f"bullet {bullet.id} is both live and removed")
        if bullet.section not in sizes:
            raise ValueError(f"bullet {bullet.id} is in undeclared section {bullet.section!r}")
        cleaned, problem = clean_content(bullet.content, max_bullet_chars)
        if problem or cleaned != bullet.content:
            raise ValueError(f"bullet {bullet.id}: {problem or 'content has surrounding whitespace'}")
        if bullet.helpful < 0 or bullet.harmful < 0:
            raise ValueError(f"bullet {bullet.id}: negative counter")
        if not 0 <= bullet.created_version <= bullet.updated_version <= version:
            raise ValueError(
                f"bullet {bullet.id}: versions out of order (created {bullet.created_version}, "
                f"updated {bullet.updated_version}, playbook {version})"
            )
        highest = max(highest, counter)
        live[bullet.id] = bullet
        if sizes[bullet.section] == 0:
            cost += section_cost(bullet.section)
        sizes[bullet.section] += 1
        cost += bullet_cost(bullet)
    if next_id <= highest:
        raise ValueError(f"next_id {next_id} would collide: an id already uses counter {highest}")
    state = PlaybookState(
        version=version,
        sections=section_list,
        token_budget=token_budget,
        max_bullet_chars=max_bullet_chars,
        next_id=next_id,
        bullets=live,
        removed=removed_ids,
        section_sizes=sizes,
        cost=cost,
    )
    limit = state.char_limit
    if limit is not None and text_length(cost) > limit:
        raise ValueError(f"rendered text has {text_length(cost)} chars, over token_budget {token_budget} ({limit} chars)")
    return state


def bullets_in_order(state: PlaybookState) -> tuple[Bullet, ...]:
    """Live bullets in render order: by section in ``state.sections`` order, then creation order."""
    groups: dict[str, list[Bullet]] = {section: [] for section in state.sections}
    for bullet in state.bullets.values():
        groups[bullet.section].append(bullet)
    return tuple(bullet for group in groups.values() for bullet in group)


def render(state: PlaybookState) -> str:
    """The ACE line format described in :mod:`combee_fast.ace.playbook.format`."""
    blocks: list[str] = []
    lines: list[str] = []
    section = None
    for bullet in bullets_in_order(state):
        if bullet.section != section:
            if lines:
                blocks.append("\n".join(lines))
            section = bullet.section
            lines = [header_line(section)]
        lines.append(bullet_line(bullet))
    if lines:
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
