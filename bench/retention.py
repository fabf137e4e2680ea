"""Retention on a real model: of the distinct lessons a run's reflections named, the share its final
playbook holds (Combee's quality mechanism, measured on real replies whatever the model's accuracy).

For Formula a lesson is about one formula, and every question names its own ("Use formula Net
Present Value (NPV) to answer ..."). A reflection names a formula when its text holds the formula's
name or the abbreviation its name gives in parentheses (whole words, any case: "NPV", "net present
value"); the final playbook holds a lesson about it when one of its entries does. ``retention`` is
``|named and held| / |named|`` over the run's usable reflections (read from the bench's record
cache of the run's replies), None when no reflection named a formula.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import orjson

from combee_fast.endpoint.cache import CacheMode, ReplayCache
from combee_fast.schema import Example

_FORMULA = re.compile(r"Use formula (.+?) to answer")
_ABBREVIATION = re.compile(r"^(.*?)\s*\(([^()]{2,})\)\s*$")
REFLECTION_FIELDS = ("error_identification", "root_cause", "correct_approach", "key_insight")
"""The reflection's fields that say what was learned (its reasoning is about the one question)."""


class Formulas:
    """The formulas of a set of Formula examples, each with the patterns that name it."""

    def __init__(self, examples: Iterable[Example]) -> None:
        names = sorted({match.group(1).strip() for example in examples if (match := _FORMULA.search(example.input))})
        self.patterns = {name: _patterns(name) for name in names}

    def named_in(self, text: str) -> set[str]:
        """The formulas ``text`` names."""
        return {name for name, patterns in self.patterns.items() if any(p.search(text) for p in patterns)}

    def named_in_all(self, texts: Iterable[str]) -> set[str]:
        return set().union(*(self.named_in(text) for text in texts))


def _patterns(name: str) -> list[re.Pattern[str]]:
    """Whole-word, case-blind patterns of a formula's name, and of the part before and inside its
    parenthesised abbreviation ("Net Present Value (NPV)": that, "Net Present Value", "NPV")."""
    forms = [name]
    if (parts := _ABBREVIATION.match(name)) is not None:
        forms += [parts.group(1), parts.group(2)]
    return [re.compile(rf"(?<![\w]){re.escape(form)}(?![\w])", re.IGNORECASE) for form in forms if form.strip()]


def reflection_texts(replies: Path) -> list[str]:
    """The lesson fields of every usable reflection recorded in ``replies`` (a record cache)."""
    cache = ReplayCache(replies, CacheMode.REPLAY)
    try:
        records = cache.results()
    finally:
        cache.close()
    texts = []
    for record in records:
        result = record.result
        if result.usage.role != "reflector" or result.error is not None or not result.text:
            continue
        try:
            reply = orjson.loads(result.text)
        except orjson.JSONDecodeError:
            continue
        if isinstance(reply, dict):
            texts.append(" ".join(str(reply.get(field, "")) for field in REFLECTION_FIELDS))
    return texts


def retention(formulas: Formulas, reflections: Sequence[str], playbook_lessons: Sequence[str]) -> tuple[float | None, int]:
    """``(share of the formulas the reflections named that a lesson of the playbook names, how many
    they named)``; the share is None when they named none."""
    named = formulas.named_in_all(reflections)
    if not named:
        return None, 0
    return len(named & formulas.named_in_all(playbook_lessons)) / len(named), len(named)
