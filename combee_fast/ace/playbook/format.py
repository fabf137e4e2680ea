"""The rules of playbook text: section names, bullet ids, bullet content, and the ACE line format.

Rendered text is one line per bullet, grouped under a header per non-empty section, sections
separated by one blank line, no trailing newline::

    ## formulas_and_calculations
    [form-00003] helpful=2 harmful=0 :: ROI = (gain - cost) / cost

    ## common_mistakes
    [mist-00004] helpful=0 harmful=1 :: Percent change divides by the old value, not the new one

The length of that text is known without building it (:func:`bullet_cost`, :func:`section_cost`,
:func:`text_length`), which is how the token budget is enforced cheaply.
"""

from __future__ import annotations

import re

from combee_fast.ace.records import Bullet

EMPTY_PLAYBOOK = "(the playbook is empty)"
"""Stands in for an empty playbook in a role's prompt; never parses as a bullet line."""

DEFAULT_SECTIONS: tuple[str, ...] = (
    "strategies_and_hard_rules",
    "formulas_and_calculations",
    "common_mistakes",
    "verification_checklist",
    "domain_concepts",
    "other",
)
MAX_BULLET_CHARS = 1000
"""Default limit on the length of one bullet's content, in characters."""

MAX_SECTION_CHARS = 40
MAX_ID_CHARS = 64

_DEFAULT_SLUGS = {
    "strategies_and_hard_rules": "strat",
    "formulas_and_calculations": "form",
    "common_mistakes": "mist",
    "verification_checklist": "check",
    "domain_concepts": "concept",
    "other": "other",
}
_USER_SLUG_CHARS = 8

SECTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,%d}" % (MAX_SECTION_CHARS - 1))
BULLET_ID = re.compile(r"[A-Za-z0-9_-]+-([0-9]+)")
HEADER_LINE = re.compile(r"## (.*)")
BULLET_LINE = re.compile(r"\[([^\]]*)\] helpful=([0-9]+) harmful=([0-9]+) :: (.*)")
# Every character str.splitlines() breaks on: none may occur inside a bullet.
_LINE_BREAK = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_SECTION_SEPARATORS = re.compile(r"[\s-]+")
_BULLET_ID = re.compile(r"^\[([^\]\s]+)\] helpful=", re.MULTILINE)  # a bullet line's id, in rendered text


def section_problem(name: str) -> str | None:
    """Why ``name`` is not a valid section name (lower_snake, ``[a-z0-9_]``, 1..40 chars,
    starting with a letter), or ``None`` when it is."""
    if SECTION_NAME.fullmatch(name):
        return None
    return f"invalid section name {name!r}: expected lower_snake [a-z0-9_], 1..{MAX_SECTION_CHARS} chars, starting with a letter"


def normalize_section(name: str) -> str:
    """The section an op means: trimmed, lower-cased, runs of spaces/hyphens made ``_``.

    ``"Common Mistakes"`` becomes ``"common_mistakes"``. The result still has to pass
    :func:`section_problem`.
    """
    return _SECTION_SEPARATORS.sub("_", name.strip().lower())


def clean_content(content: str, max_chars: int) -> tuple[str, str | None]:
    """``(cleaned, problem)``: content trimmed of surrounding whitespace, and why it is unusable
    (empty, longer than ``max_chars``, or containing a line break), or ``None`` when usable."""
    cleaned = content.strip()
    if not cleaned:
        return cleaned, "empty content"
    if len(cleaned) > max_chars:
        return cleaned, f"content too long: {len(cleaned)} chars, limit {max_chars}"
    if _LINE_BREAK.search(cleaned):
        return cleaned, "content has a line break: a bullet is one line"
    return cleaned, None


def id_counter(bullet_id: str) -> int | None:
    """The global counter in an id (``form-00042`` -> 42), or ``None`` if it is not a valid id."""
    if len(bullet_id) > MAX_ID_CHARS:
        return None
    match = BULLET_ID.fullmatch(bullet_id)
    return int(match.group(1)) if match else None


def make_id(section: str, counter: int) -> str:
    """The id of a new bullet: the section's slug and the global counter, e.g. ``form-00042``."""
    slug = _DEFAULT_SLUGS.get(section) or section.replace("_", "")[:_USER_SLUG_CHARS]
    return f"{slug}-{counter:05d}"


def header_line(section: str) -> str:
    return f"## {section}"


def bullet_line(bullet: Bullet, *, max_chars: int | None = None) -> str:
    """The line of ``bullet``: ``[id] helpful=X harmful=Y :: content`` (content cut to
    ``max_chars``, with ``...``, when given)."""
    content = bullet.content
    if max_chars is not None and len(content) > max_chars:
        content = content[:max_chars].rstrip() + "..."
    return f"[{bullet.id}] helpful={bullet.helpful} harmful={bullet.harmful} :: {content}"


def ids_in(playbook_text: str) -> tuple[str, ...]:
    """The bullet ids of a rendered playbook (its :func:`bullet_line` lines), in order."""
    return tuple(dict.fromkeys(_BULLET_ID.findall(playbook_text)))


def bullet_cost(bullet: Bullet) -> int:
    """Characters one bullet adds to the rendered text: its line and the newline before it."""
    return len(bullet_line(bullet)) + 1


def section_cost(section: str) -> int:
    """Characters a non-empty section adds besides its bullets: header and blank-line separator."""
    return len(header_line(section)) + 2


def text_length(cost: int) -> int:
    """Rendered length from the summed costs of non-empty sections and live bullets.

    The first section has no separator before it, so the text is 2 characters shorter than the
    sum; an empty playbook renders as the empty string.
    """
    return cost - 2 if cost else 0
