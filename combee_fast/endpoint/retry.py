"""When to retry a failed attempt and how long to wait first."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping

RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms`` (OpenAI), else ``Retry-After``
    as seconds or an HTTP date; ``None`` when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def backoff_s(attempt: int, *, base_s: float, max_s: float, retry_after: float | None,
              rng: random.Random) -> float:
    """Wait before retry number ``attempt + 1``: exponential ``base_s * 2**attempt`` with equal
    jitter (half fixed, half random), or the server's ``Retry-After`` plus up to 10% jitter;
    both capped at ``max_s``."""
    if retry_after is not None:
        return min(retry_after * (1.0 + 0.1 * rng.random()), max_s)
    exponential = min(base_s * (2.0 ** attempt), max_s)
    return exponential * (0.5 + 0.5 * rng.random())
