""""Did you mean ...?": the closest known name to a mistyped one, for one-line refusals."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

SUGGEST_CUTOFF = 0.6
"""How alike (difflib's ratio, 0-1) a known name must be to a mistyped one to be suggested."""


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name most like ``name`` (at least :data:`SUGGEST_CUTOFF` alike), or None."""
    found = difflib.get_close_matches(name, list(known), n=1, cutoff=SUGGEST_CUTOFF)
    return found[0] if found else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``" (did you mean 'X'?)"`` for the known name closest to ``name``, else ``""``."""
    match = closest(name, known)
    return f" (did you mean {match!r}?)" if match is not None else ""
