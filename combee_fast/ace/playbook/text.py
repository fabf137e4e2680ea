"""Parsing rendered playbook text back into a state: the inverse of ``playbook_state.render``.

Text carries live bullets only: no tombstones, versions or sources. The parsed state therefore
has version 1 (0 when empty), every bullet created and updated at that version, no sources, no
tombstones, and ``next_id`` one above the highest id counter seen. Use save/load to keep history.

Section order is the order of the headers in the text; sections of ``sections`` that the text
does not mention are merged in at their place in that sequence (after the nearest preceding one
present), so ``render(parse(render(p))) == render(p)`` and empty known sections keep their usual
place for later ADDs. Blank lines are ignored, lines are trimmed, a section header may repeat.
"""

from __future__ import annotations

from collections.abc import Sequence

from combee_fast.errors import ConfigError, PlaybookParseError
from combee_fast.ace.playbook.format import (
    BULLET_LINE,
    HEADER_LINE,
    bullet_cost,
    clean_content,
    id_counter,
    section_cost,
    section_problem,
    text_length,
)
from combee_fast.ace.playbook.state import PlaybookState, build_state, options_problem
from combee_fast.ace.records import Bullet
from combee_fast.tokens import CHARS_PER_TOKEN

PARSED_VERSION = 1
"""Version of a playbook parsed from text with bullets (text carries no history)."""
_EXPECTED = "expected '## <section>' or '[<id>] helpful=<n> harmful=<n> :: <content>'"


def merge_sections(seen: Sequence[str], known: Sequence[str]) -> tuple[str, ...]:
    """``seen`` in its order, with each name of ``known`` not in it inserted right after the
    nearest earlier name of ``known`` already placed (at the front when there is none)."""
    merged = list(seen)
    previous: str | None = None
    for name in known:
        if name not in merged:
            merged.insert(0 if previous is None else merged.index(previous) + 1, name)
        previous = name
    return tuple(merged)


def parse_state(
    text: str, *, sections: Sequence[str], token_budget: int | None, max_bullet_chars: int
) -> PlaybookState:
    """The state rendered as ``text``. Raises :class:`PlaybookParseError` naming the first bad
    line (malformed line, invalid section or id, duplicate id, unusable content, or the line at
    which the text first goes over ``token_budget``); :class:`ConfigError` for bad options."""
    if problem := options_problem(sections, token_budget, max_bullet_chars):
        raise ConfigError(f"parse options: {problem}")
    seen_sections: list[str] = []
    bullets: list[Bullet] = []
    first_line_of: dict[str, int] = {}
    section: str | None = None
    sizes: dict[str, int] = {}
    cost = 0
    char_limit = None if token_budget is None else token_budget * CHARS_PER_TOKEN
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if header := HEADER_LINE.fullmatch(line):
            section = header.group(1).strip()
            if problem := section_problem(section):
                raise PlaybookParseError(number, raw, problem)
            if section not in seen_sections:
                seen_sections.append(section)
            continue
        match = BULLET_LINE.fullmatch(line)
        if match is None:
            raise PlaybookParseError(number, raw, f"not a playbook line: {_EXPECTED}")
        if section is None:
            raise PlaybookParseError(number, raw, "bullet before any '## <section>' header")
        bullet_id, helpful, harmful, content = match.groups()
        if id_counter(bullet_id) is None:
            raise PlaybookParseError(number, raw, f"invalid bullet id {bullet_id!r}: expected <slug>-<number>")
        if bullet_id in first_line_of:
            raise PlaybookParseError(number, raw, f"duplicate id {bullet_id} (first on line {first_line_of[bullet_id]})")
        content, problem = clean_content(content, max_bullet_chars)
        if problem:
            raise PlaybookParseError(number, raw, problem)
        bullet = Bullet(
            id=bullet_id,
            section=section,
            content=content,
            helpful=int(helpful),
            harmful=int(harmful),
            created_version=PARSED_VERSION,
            updated_version=PARSED_VERSION,
        )
        if sizes.get(section, 0) == 0:
            cost += section_cost(section)
        sizes[section] = sizes.get(section, 0) + 1
        cost += bullet_cost(bullet)
        if char_limit is not None and text_length(cost) > char_limit:
            raise PlaybookParseError(number, raw, f"playbook goes over token_budget {token_budget} at this line")
        first_line_of[bullet_id] = number
        bullets.append(bullet)
    highest = max((id_counter(b.id) or 0 for b in bullets), default=0)
    return build_state(
        version=PARSED_VERSION if bullets else 0,
        sections=merge_sections(seen_sections, sections),
        token_budget=token_budget,
        max_bullet_chars=max_bullet_chars,
        next_id=highest + 1,
        bullets=bullets,
        removed=(),
    )
