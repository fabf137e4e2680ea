"""When to retry a failed attempt and how long to wait first."""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Mapping

RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms`` (OpenAI), else ``Retry-After``
    as seconds or an HTTP date; ``None`` when absent or unreadable (``nan``, text, a bad date).
    A negative value or a date in the past means no wait (0); ``inf`` an endless one."""
    millis = header_number(headers.get("retry-after-ms"))
    if millis is not None:
        return max(millis / 1000.0, 0.0)
    value = headers.get("Retry-After")
    if value is None:
        return None
    seconds = header_number(value)
    if seconds is not None:
        return max(seconds, 0.0)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    try:
        return max(when.timestamp() - time.time(), 0.0)
    except (OverflowError, ValueError, OSError):
        return None


def header_number(value: str | None) -> float | None:
    """A header's ``value`` as a number, or None (absent, text or ``nan``)."""
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return None if math.isnan(number) else number


def backoff_s(attempt: int, *, base_s: float, max_s: float, retry_after: float | None,
              rng: random.Random) -> float:
    """Wait before retry number ``attempt + 1``: exponential ``base_s * 2**attempt`` with equal
    jitter (half fixed, half random), or the server's ``Retry-After`` plus up to 10% jitter;
    both capped at ``max_s``."""
    if retry_after is not None:
        return min(retry_after * (1.0 + 0.1 * rng.random()), max_s)
    exponential = min(base_s * (2.0 ** attempt), max_s)
    return exponential * (0.5 + 0.5 * rng.random())
