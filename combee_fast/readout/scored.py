"""Per-row scores of an evaluation: the lines of its ``results.jsonl`` (:func:`result_rows`), read
back (:func:`scored_rows`), and two runs paired on the rows both scored (:func:`paired_lines`,
``combee compare --paired A B``).

Rows pair by content (the ``row`` key, :func:`~combee_fast.tasks.heldout.row_key`), so two
evaluations of one split pair whatever order they ran in; a row either side did not answer is
left out. The statistics are :func:`~combee_fast.native.proportion.paired_comparison`'s: the
difference with an interval that keeps its coverage at any number of rows, and the exact sign
(McNemar) test on the rows where the two differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from combee_fast.errors import ConfigError
from combee_fast.files import read_regular
from combee_fast.methods.base import EvalResult
from combee_fast.native.proportion import PairedComparison, paired_comparison
from combee_fast.readout.compare import evaluations
from combee_fast.record.rundir import read_run
from combee_fast.schema import Example
from combee_fast.tasks.heldout import row_key

RESULTS_FILE = "results.jsonl"


class _Row(msgspec.Struct):
    row: str
    score: float
    answered: bool = True


def result_rows(examples: Sequence[Example], result: EvalResult) -> list[dict[str, Any]]:
    """One line of ``results.jsonl`` per example of ``result``: index, id, content key, score,
    whether it was answered and the failure's kind when it was not; with the learner's
    predictions, also the input, the answer given, the target and the grader's feedback."""
    if len(result.predictions) == len(examples):
        return [{"index": e.index, **msgspec.structs.asdict(p), "answered": p.error is None}
                for e, p in zip(examples, result.predictions)]
    errors: list[str | None] = [None] * len(result.scores)
    if len(result.outcomes) == len(result.scores):
        errors = [error.label if error is not None else None for _, error in result.outcomes]
    return [{"index": e.index, "id": e.id, "row": row_key(e), "score": score, "answered": error is None,
             "error": error} for e, score, error in zip(examples, result.scores, errors)]


def scored_rows(folder: Path) -> dict[str, float]:
    """row key -> score of the answered rows in ``folder``'s ``results.jsonl``;
    :class:`ConfigError` naming the file and line when it cannot be read."""
    path = folder / RESULTS_FILE
    try:
        data = read_regular(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    decoder = msgspec.json.Decoder(_Row)
    scores = {}
    for number, line in enumerate(data.splitlines(), start=1):
        try:
            row = decoder.decode(line)
        except msgspec.DecodeError as exc:
            raise ConfigError(f"{path}:{number}: not a result row ({exc})") from None
        if row.answered:
            scores[row.row] = row.score
    return scores


def comparison_lines(first: str, second: str, compared: Sequence[tuple[str, PairedComparison]], *,
                     what: str = "split") -> list[str]:
    """A Markdown table of ``first`` against ``second``, a row per ``what`` (a split...), and what
    its columns are."""
    lines = [f"| {what} | rows | {first} % | {second} % | difference, points [{_level(compared)} CI] | "
             f"{first} better | {second} better | exact sign test p |", "|---|---:|---:|---:|---|---:|---:|---:|"]
    for split, c in compared:
        lines.append(f"| {split} | {c.count} | {100 * c.mean_a:.1f} | {100 * c.mean_b:.1f} | "
                     f"{100 * c.difference:+.1f} [{100 * c.lower:+.1f}, {100 * c.upper:+.1f}] | {c.a_better} | "
                     f"{c.b_better} | {c.p_value:.3g} |")
    return lines + ["", "Rows are paired by content and only rows both answered count. The difference's interval "
                    "keeps its coverage at any number of rows (exact intervals of how often the two disagree and "
                    "of who wins then); p is the two-sided exact sign test (McNemar's, for 0/1 scores) on the "
                    "rows where they differ."]


def paired_lines(first: str, second: str) -> list[str]:
    """``combee compare --paired A B``: the runs ``first`` and ``second`` on every split both
    evaluated, paired per row; :class:`ConfigError` when they share none."""
    a, b = evaluations(read_run(first)), evaluations(read_run(second))
    shared = [split for split in a if split in b]
    if not shared:
        raise ConfigError(f"{first} and {second} share no evaluated split (theirs: {', '.join(a) or 'none'}; "
                          f"{', '.join(b) or 'none'}): score both with `combee eval RUN/best.json --split SPLIT`")
    compared = []
    for split in shared:
        left, right = scored_rows(a[split][0]), scored_rows(b[split][0])
        rows = [key for key in left if key in right]
        if not rows:
            raise ConfigError(f"{first} and {second}: no row of {split} was answered by both")
        compared.append((split, paired_comparison([left[k] for k in rows], [right[k] for k in rows])))
    return [f"A: {first}", f"B: {second}", "", *comparison_lines("A", "B", compared)]


def _level(compared: Sequence[tuple[str, PairedComparison]]) -> str:
    return f"{100 * compared[0][1].level:.0f}%"
