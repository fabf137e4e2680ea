"""Answer scorers shared by the file-backed tasks: exact, numeric, regex.

A scorer compares an answer with an example's target and says, as a grader would to the
reflector, what was wrong. ``target_problem`` lets a task reject a bad target when it loads the
file (naming file and line) instead of mis-scoring every answer later.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import Decimal
from typing import Any, Protocol

from combee_fast.errors import ConfigError
from combee_fast.tasks.base import Score, build_named
from combee_fast.tasks.numbers import parse_number, round_decimal

_SHOWN_CHARS = 200  # how much of an answer the feedback quotes


def quote(text: str) -> str:
    """``text`` quoted for feedback, shortened to a readable length."""
    shown = text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."
    return repr(shown)


class Scorer(Protocol):
    def score(self, answer: str | None, target: str) -> Score: ...

    def target_problem(self, target: str) -> str | None:
        """Why ``target`` cannot be scored against, or ``None`` when it is fine."""
        ...


class ExactScorer:
    """Correct when the answer equals the target after trimming whitespace (optionally ignoring case)."""

    def __init__(self, *, case_sensitive: bool = True) -> None:
        self.case_sensitive = case_sensitive

    def _key(self, text: str) -> str:
        text = text.strip()
        return text if self.case_sensitive else text.casefold()

    def score(self, answer: str | None, target: str) -> Score:
        if answer is None or not answer.strip():
            return Score(0.0, f"No answer was given; the expected answer is {quote(target.strip())}.")
        if self._key(answer) == self._key(target):
            return Score(1.0, f"Correct: the answer {quote(answer.strip())} matches the expected answer.")
        return Score(0.0, f"Your answer {quote(answer.strip())} does not match the expected {quote(target.strip())}.")

    def target_problem(self, target: str) -> str | None:
        return None


class NumericScorer:
    """Correct when the first number in the answer equals the target's number.

    ``decimals``: both are rounded half away from zero to that many places first (ACE's Formula
    rule is ``decimals=2``). ``tolerance``: equal when ``|answer - target| <= tolerance``. Give at
    most one; with neither the numbers must be exactly equal.
    """

    def __init__(self, *, decimals: int | None = None, tolerance: float | None = None) -> None:
        if decimals is not None and tolerance is not None:
            raise ConfigError("numeric scorer: give decimals or tolerance, not both")
        if decimals is not None and not 0 <= decimals <= 12:
            raise ConfigError(f"numeric scorer: decimals must be in 0..12, got {decimals}")
        if tolerance is not None and not (math.isfinite(tolerance) and tolerance >= 0):
            raise ConfigError(f"numeric scorer: tolerance must be a finite number >= 0, got {tolerance}")
        self.decimals = decimals
        self.tolerance = None if tolerance is None else Decimal(repr(tolerance))

    def _show(self, value: Decimal) -> str:
        shown = value if self.decimals is None else round_decimal(value, self.decimals)
        return format(shown, "f")

    def _equal(self, a: Decimal, b: Decimal) -> bool:
        if self.decimals is not None:
            return round_decimal(a, self.decimals) == round_decimal(b, self.decimals)
        if self.tolerance is not None:
            return abs(a - b) <= self.tolerance
        return a == b

    def _rule(self) -> str:
        if self.decimals is not None:
            return f"compared at {self.decimals} decimal places"
        if self.tolerance is not None:
            return f"within a tolerance of {self.tolerance}"
        return "compared exactly"

    def score(self, answer: str | None, target: str) -> Score:
        expected = parse_number(target)
        if expected is None:
            raise ValueError(f"numeric scorer: target {target!r} is not a number")
        shown_target = self._show(expected.value)
        if answer is None or not answer.strip():
            return Score(0.0, f"No answer was given; the expected answer is {shown_target}.")
        parsed = parse_number(answer)
        if parsed is None:
            return Score(
                0.0,
                f"Your answer {quote(answer.strip())} could not be read as a number; "
                f"the expected answer is {shown_target}. Answer with a plain number.",
            )
        if self._equal(parsed.value, expected.value):
            return Score(1.0, f"Correct: {self._show(parsed.value)} matches the expected {shown_target} ({self._rule()}).")
        feedback = (
            f"Your answer {self._show(parsed.value)} does not match the expected {shown_target} ({self._rule()})."
        )
        if parsed.percent and self._equal(parsed.value / 100, expected.value):
            feedback += " Your value as a fraction would be right: give it as a plain decimal, not a percentage."
        return Score(0.0, feedback)

    def target_problem(self, target: str) -> str | None:
        return None if parse_number(target) is not None else f"target {quote(target)} is not a number"


class RegexScorer:
    """Correct when the whole trimmed answer matches the target read as a regular expression."""

    def __init__(self, *, ignore_case: bool = False) -> None:
        self.flags = re.IGNORECASE if ignore_case else 0
        self._pattern = functools.lru_cache(maxsize=4096)(self._compile)

    def _compile(self, target: str) -> re.Pattern[str]:
        return re.compile(target, self.flags)

    def score(self, answer: str | None, target: str) -> Score:
        if answer is None or not answer.strip():
            return Score(0.0, f"No answer was given; the answer must match the pattern {quote(target)}.")
        if self._pattern(target).fullmatch(answer.strip()):
            return Score(1.0, f"Correct: the answer matches the pattern {quote(target)}.")
        return Score(0.0, f"Your answer {quote(answer.strip())} does not match the pattern {quote(target)}.")

    def target_problem(self, target: str) -> str | None:
        try:
            self._pattern(target)
        except re.error as exc:
            return f"target {quote(target)} is not a valid regular expression: {exc}"
        return None


def make_scorer(name: str, **options: Any) -> Scorer:
    """A scorer by name (``exact``, ``numeric``, ``regex``) with its keyword options."""
    factories: dict[str, Any] = {"exact": ExactScorer, "numeric": NumericScorer, "regex": RegexScorer}
    return build_named("scorer", name, factories, options)
