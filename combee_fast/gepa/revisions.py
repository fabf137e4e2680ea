"""Revisions of one text as line changes, so an aggregation can keep them by reference.

A text is read as its lines; a revision's *changes* against the text it started from are the
lines of the base it drops (by line number, from 1) and the lines it adds (each with a reference
``"<revision>.<n>"``, both from 1). Reordering lines is not a change. The aggregation replies
with the base lines to remove, the references it keeps and any line it writes anew; the merged
text is composed here, so lines kept by reference survive word for word and the call decodes a
few tokens per kept line instead of rewriting the whole text.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec


class Changes(msgspec.Struct, frozen=True):
    """One revision against its base: base line numbers dropped, and ``(ref, line)`` pairs added."""

    removed: tuple[int, ...]
    added: tuple[tuple[str, str], ...]


def changes(base: str, revision: str, number: int) -> Changes:
    """The changes of revision ``number`` (from 1) against ``base``."""
    base_lines = base.split("\n")
    revised = revision.split("\n")
    have, kept = set(base_lines), set(revised)
    removed = tuple(i + 1 for i, line in enumerate(base_lines) if line not in kept)
    fresh = [line for line in dict.fromkeys(revised) if line not in have and line.strip()]
    return Changes(removed, tuple((f"{number}.{n + 1}", line) for n, line in enumerate(fresh)))


def changes_text(base: str, revisions: Sequence[str]) -> str:
    """Every revision's changes as the aggregator reads them, one block per revision."""
    base_lines = base.split("\n")
    blocks = []
    for number, revision in enumerate(revisions, start=1):
        change = changes(base, revision, number)
        drops = [f"({i}) {base_lines[i - 1]}" for i in change.removed] or ["(none)"]
        adds = [f"[{ref}] {line}" for ref, line in change.added] or ["(none)"]
        blocks.append("\n".join([f"### Revision {number}", "drops:", *drops, "adds:", *adds]))
    return "\n\n".join(blocks)


def compose(base: str, revisions: Sequence[str], remove: Sequence[int], keep: Sequence[str], add: Sequence[str]) -> str:
    """The merged text: ``base`` without the ``remove`` line numbers, then the added lines of
    ``keep`` (unknown references are ignored; each line once), then the ``add`` lines."""
    base_lines = base.split("\n")
    added = {
        ref: line
        for number, revision in enumerate(revisions, start=1)
        for ref, line in changes(base, revision, number).added
    }
    dropped = set(remove)
    lines = [line for i, line in enumerate(base_lines, start=1) if i not in dropped]
    extra = [added[ref] for ref in keep if ref in added] + [line for line in add if line.strip()]
    present = set(lines)
    for line in extra:
        if line not in present:
            lines.append(line)
            present.add(line)
    return "\n".join(lines)


def rebase(base: str, revision: str, onto: str) -> str:
    """``revision``'s changes against ``base`` made to ``onto`` instead: the lines it drops from
    ``base`` dropped from ``onto`` too, and the lines it adds appended (each once, in order)."""
    change = changes(base, revision, 1)
    base_lines = base.split("\n")
    dropped = {base_lines[i - 1] for i in change.removed}
    lines = [line for line in onto.split("\n") if line not in dropped]
    present = set(lines)
    for _, line in change.added:
        if line not in present:
            lines.append(line)
            present.add(line)
    return "\n".join(lines)
