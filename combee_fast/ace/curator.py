"""Curator: turns reflections (and playbook statistics) into ADD/UPDATE/REMOVE ops on the playbook.

User message tags (each on its own line, content between): ``<playbook>``, ``<playbook_stats>``,
``<reflections>`` (one JSON object per line with keys rollout_id, error_identification,
root_cause, correct_approach, key_insight). Output: see :mod:`combee_fast.ace.ops`.
"""

from __future__ import annotations

from typing import Any, Sequence

import orjson

from combee_fast.ace.playbook.format import bullet_line
from combee_fast.roles.base import fill, load_prompt
from combee_fast.ace.ops import OPS_SCHEMA, parse_ops
from combee_fast.schema import CallError, Message
from combee_fast.ace.records import Bullet, Op, Reflection

CURATOR_MAX_TOKENS = 2048
CURATOR_SCHEMA: dict[str, Any] = OPS_SCHEMA
CURATOR_SYSTEM_PROMPT = load_prompt("curator.txt", beside=__file__)
CURATOR_USER_TEMPLATE = load_prompt("curator_user.txt", beside=__file__)

NO_REFLECTIONS = "(no reflections)"
NO_ENTRIES_YET = "(no entries yet: every usable lesson in the reflections is new)"
"""Stands in for an empty playbook and its statistics in the curator's prompt. Not the generator's
``(the playbook is empty)``: Qwen2.5-Coder-0.5B, shown that, answered every call "The playbook is
empty, so no lessons are new." with no operation (the 1.5B and the simulated endpoint did not)."""
STATS_CONTENT_CHARS = 120
"""Bullet content shown in the statistics is cut to this length: the full text is in the playbook."""


def reflection_json_line(reflection: Reflection) -> str:
    """One reflection as the curator reads it: a single JSON line with the five diagnosis keys."""
    return orjson.dumps(
        {
            "rollout_id": reflection.rollout_id,
            "error_identification": reflection.error_identification,
            "root_cause": reflection.root_cause,
            "correct_approach": reflection.correct_approach,
            "key_insight": reflection.key_insight,
        }
    ).decode()


def _section(title: str, bullets: Sequence[Bullet]) -> list[str]:
    lines = [bullet_line(bullet, max_chars=STATS_CONTENT_CHARS) for bullet in bullets]
    return [title, *(lines or ["(none)"])]


def playbook_stats_text(bullets: Sequence[Bullet], *, top: int = 5) -> str:
    """Counts plus up to ``top`` bullets each: most helpful, problematic (harmful > helpful), unused (0/0).

    Most helpful: by helpful count, then fewer harmful, then id. Problematic: by harmful minus
    helpful, then id. Unused: oldest first (created_version, then id).
    """
    if not bullets:
        return NO_ENTRIES_YET
    helpful = sorted((b for b in bullets if b.helpful > 0), key=lambda b: (-b.helpful, b.harmful, b.id))
    problematic = sorted((b for b in bullets if b.harmful > b.helpful), key=lambda b: (b.helpful - b.harmful, b.id))
    unused = sorted((b for b in bullets if b.helpful == 0 and b.harmful == 0), key=lambda b: (b.created_version, b.id))
    summary = (
        f"{len(bullets)} entries: {len(helpful)} tagged helpful at least once, "
        f"{len(problematic)} problematic (harmful > helpful), {len(unused)} never tagged"
    )
    return "\n".join(
        [
            summary,
            *_section(f"Most helpful (top {top}):", helpful[:top]),
            *_section(f"Problematic (top {top}):", problematic[:top]),
            *_section(f"Unused (oldest {top}):", unused[:top]),
        ]
    )


def curator_messages(playbook_text: str, stats_text: str, reflections: Sequence[Reflection]) -> tuple[Message, ...]:
    """System + user messages for one curator call over ``reflections`` (in the order given)."""
    user = fill(
        CURATOR_USER_TEMPLATE,
        playbook=playbook_text if playbook_text.strip() else NO_ENTRIES_YET,
        stats=stats_text if stats_text.strip() else NO_ENTRIES_YET,
        reflections="\n".join(map(reflection_json_line, reflections)) or NO_REFLECTIONS,
    )
    return (Message("system", CURATOR_SYSTEM_PROMPT), Message("user", user))


def parse_curator(data: Any, text: str | None) -> tuple[Op, ...] | CallError:
    """The curator's reply as ops (:func:`~combee_fast.ace.ops.parse_ops`); an operation copying
    the curator's own instructions is dropped."""
    return parse_ops(data, text, own_prompt=CURATOR_SYSTEM_PROMPT)
