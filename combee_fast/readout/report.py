"""One page per run: ``report.md``, written from the run's events and its result.

:class:`RunFacts` is a consumer of the run's :mod:`~combee_fast.run.events` (steps, versions,
failed calls, the stop); :func:`run_report` turns it, the run's outcome and its provenance into
Markdown: the result with its 95% interval, the cost (rollouts, tokens, GPU-seconds, calls per
role, candidates explored and accepted, tokens and dollars per accepted improvement, calls in
flight per role requested and achieved, and a line for each role held below its cap), what was learned, the
start-up probe's batching curve and the planner's predicted against measured step seconds, the learning curve (:func:`curve_png`, when the run validated more than
once) and where the run came from. :func:`eval_report` is the page of ``combee eval``. Nothing
here reads or writes a file: the run directory writes the page and its plot.
"""

from __future__ import annotations

import collections
import io
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np

from combee_fast.config import HISTORY_KEPT
from combee_fast.methods.base import EvalResult
from combee_fast.money.dollars import money, total, validation_line
from combee_fast.money.improvements import improvement_line
from combee_fast.native.proportion import ScoreInterval, score_interval
from combee_fast.readout.predictions import batching_lines
from combee_fast.record.ledger import CallCounts
from combee_fast.record.provenance import Provenance
from combee_fast.run.events import Event, RunStopped, StepDone, VersionApplied

LESSONS_SHOWN = 12
"""Lessons of the learned artifact quoted on the page (the whole text is in ``prompt.txt``)."""
LESSON_CHARS = 200


class CurvePoint(msgspec.Struct, frozen=True):
    """One validation along the run: after ``step`` steps, ``sim_seconds`` of critical path."""

    step: int
    sim_seconds: float
    accuracy: float
    size: int


class RunFacts:
    """What a run's events say, kept for its page (bounded: the latest validations only)."""

    def __init__(self) -> None:
        self.steps = 0
        self.versions = 0
        self.curve: collections.deque[CurvePoint] = collections.deque(maxlen=HISTORY_KEPT)
        self.stopped: RunStopped | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, StepDone):
            row = event.row
            self.steps = row.step + 1
            if row.val_accuracy is not None:
                self.curve.append(CurvePoint(row.step + 1, row.cumulative_sim_seconds, row.val_accuracy, row.size))
        elif isinstance(event, VersionApplied):
            self.versions += 1
        elif isinstance(event, RunStopped):
            self.stopped = event


def answered_interval(result: EvalResult) -> ScoreInterval | None:
    """The mean score over the answered examples with its exact (Clopper-Pearson) 95% interval,
    which keeps its coverage at any count, 0% and 100% included (None: none answered)."""
    scores = result.scores
    if result.outcomes and len(result.outcomes) == len(scores):
        scores = tuple(score for score, (_, error) in zip(scores, result.outcomes) if error is None)
    if not scores:
        return None
    return score_interval(np.asarray(scores, dtype=np.float64))


def percent_interval(interval: ScoreInterval | None) -> str:
    """``89.5% [95% CI 85.0, 93.5]`` (``n/a`` for None)."""
    if interval is None:
        return "n/a (no example answered)"
    return (f"{100 * interval.mean:.1f}% [{100 * interval.level:.0f}% CI {100 * interval.lower:.1f}, "
            f"{100 * interval.upper:.1f}]")


def curve_png(curve: Sequence[CurvePoint], *, title: str) -> bytes | None:
    """A PNG of validation accuracy against critical-path seconds, one point per validation
    (None for fewer than two validations: the table says it all)."""
    if len(curve) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    axes.plot([p.sim_seconds for p in curve], [100 * p.accuracy for p in curve], "o-", color="tab:blue")
    axes.set_xlabel("training time, critical path (s)")
    axes.set_ylabel("validation accuracy (%)")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()


def provenance_lines(record: Provenance) -> list[str]:
    """The provenance as a Markdown table."""
    splits = "; ".join(f"{m.task} `{m.split}` ({m.rows} rows, sha256 `{m.sha256[:16]}`)" for m in record.splits)
    rows = [("package", f"{record.package} {record.version}"),
            ("git commit", record.commit or "not a git checkout"), ("host", record.host),
            ("command", f"`{record.command}`"), ("python", record.python), ("started (UTC)", record.started),
            ("ended (UTC)", record.ended or "still running"), ("seed", str(record.seed)),
            ("splits", splits or "none")]
    return ["| | |", "|---|---|", *(f"| {name} | {_cell(value)} |" for name, value in rows)]


def _cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def calls_lines(counts: CallCounts, result: Any = None, served: Mapping[str, str] | None = None) -> list[str]:
    """Calls per role: which model at which endpoint served it (``served``: role -> that, when
    given), made, failed (by kind), retried attempts; with a run's
    :class:`~combee_fast.run.train.TrainResult` ``result``, also its generated tokens per item
    learned from, its dollars and its calls in flight, requested and achieved (peak,
    time-weighted mean)."""
    extra = result is not None
    lines = ["| role |" + (" model at endpoint |" if served else "") + " calls | failed | retried attempts |"
             + (" generated tokens per item | dollars | in flight: requested | peak | mean |" if extra else ""),
             "|---|" + ("---|" if served else "") + "---:|---|---:|" + ("---:|---:|---:|---:|---:|" if extra else "")]
    dollars = result.summary.get("dollars_by_role", {}) if extra else {}
    flight = result.concurrency if extra else {}
    per_item = counts.generated_per_item(result.samples) if extra else {}
    for role in dict.fromkeys([*counts.calls, *counts.errors]):
        kinds = counts.errors.get(role, {})
        failures = ", ".join(f"{label} {n}" for label, n in sorted(kinds.items())) or "0"
        by = f" {served.get(role, 'n/a')} |" if served else ""
        line = (f"| {role} |{by} {counts.calls.get(role, 0):,} | {failures} | "
                f"{sum(counts.retries.get(role, {}).values()):,} |")
        if extra:
            spent = money(dollars[role]) if role in dollars else "n/a"
            seen = flight.get(role)
            line += f" {per_item.get(role, 0.0):,.1f} | {spent} | " + (
                f"{seen['requested']:,} | {seen['peak']:,} | {seen['mean']:.1f} |" if seen else "n/a | n/a | n/a |")
        lines.append(line)
    return lines


def _lessons(lessons: Sequence[str]) -> list[str]:
    shown = [f"- {' '.join(text.split())[:LESSON_CHARS]}" for text in lessons[:LESSONS_SHOWN]]
    more = len(lessons) - LESSONS_SHOWN
    return shown + ([f"- ... and {more} more (all of them in `prompt.txt`)"] if more > 0 else [])


def run_report(
    *, title: str, outcome: str, result: Any, facts: RunFacts, counts: CallCounts, record: Provenance,
    val_split: str, lessons: Sequence[str], learned: Mapping[str, Any], plot: str | None = None,
    served: Mapping[str, str] | None = None,
) -> str:
    """The Markdown of a learning run's page. ``result``: its
    :class:`~combee_fast.run.train.TrainResult`, or None when it failed (``outcome`` says how it
    ended); ``counts``: the training calls per role so far; ``lessons``/``learned``: what the
    learner says it holds; ``plot``: the file name of the curve's PNG beside the page, if one was
    drawn (:func:`curve_png`); ``served``: which model at which endpoint served each role."""
    lines = [f"# {title}", "", f"**{outcome}**", ""]
    lines += ["## Result", ""]
    if result is not None and result.final_eval is not None:
        final = result.final_eval
        lines.append(f"- Final artifact on `{val_split}` ({final.examples} examples, {final.answered} answered): "
                     f"{percent_interval(answered_interval(final))}")
    if result is not None and result.best_val_accuracy is not None:
        lines.append(f"- Best validation accuracy on `{val_split}`: {100 * result.best_val_accuracy:.1f}% "
                     "(`best.json`; its rendered context, to paste into an agent, is `prompt.txt`)")
    if result is None or (result.final_eval is None and result.best_val_accuracy is None):
        lines.append("- No validation result (see the outcome above); what was learned so far is in `final.json`"
                     " and `prompt.txt`.")
    lines += ["", "## Cost", ""]
    if result is not None:
        gpu = "unknown (give --gpus)" if result.gpu_seconds is None else f"{result.gpu_seconds:,.1f}"
        summary = result.summary
        validating = validation_line(summary)
        lines += ["| rollouts | LLM calls | tokens | dollars | GPU-seconds | training critical path (s) | "
                  "training wall (s) |",
                  "|---:|---:|---:|---:|---:|---:|---:|",
                  f"| {result.rollouts:,} | {result.calls:,} | {result.tokens:,} | {money(summary.get('dollars'))} | "
                  f"{gpu} | {result.train_sim_seconds:,.1f} | {result.train_wall_seconds:,.1f} |", "",
                  improvement_line(summary), "", *((validating, "") if validating else ()),
                  "Calls per role (training; dollars at each endpoint's price, `--price`; calls in flight: "
                  "requested is the endpoint's cap, peak and time-weighted mean are measured):", "",
                  *calls_lines(counts, result, served),
                  *(f"\n**Below its cap:** {note}" for note in result.concurrency_notes)]
    else:
        lines += [f"{facts.steps} step(s) completed; calls per role (training) so far:", "",
                  *calls_lines(counts, served=served)]
    lines += ["", "## What was learned", "",
              *(f"- {name}: {value}" for name, value in learned.items()), "", *_lessons(lessons), ""]
    if result is not None:
        lines += batching_lines(result.batching, result.ledger)
    curve = list(facts.curve)
    lines += ["## Learning curve", ""]
    if plot is not None:
        lines += [f"![validation accuracy against training time]({plot})", ""]
    lines += ["| step | critical path (s) | validation accuracy | size |", "|---:|---:|---:|---:|",
              *(f"| {p.step} | {p.sim_seconds:,.1f} | {100 * p.accuracy:.1f}% | {p.size} |" for p in curve), ""]
    lines += ["## Provenance", "", *provenance_lines(record), ""]
    return "\n".join(lines)


def eval_report(*, title: str, split: str, result: EvalResult, record: Provenance, seen: Mapping[str, int],
                counts: CallCounts, dollars: Mapping[str, float | None],
                served: Mapping[str, str] | None = None) -> str:
    """The Markdown of ``combee eval``'s page: the score with its interval, the rows of the
    evaluated split that the artifact's own run learned from or selected on (``seen``: split ->
    shared rows, by content), the cost (``dollars`` per role: :mod:`~combee_fast.money.dollars`)
    and the provenance; ``served``: which model at which endpoint served each role."""
    lines = [f"# {title}", "", "## Result", "",
             f"- Accuracy on `{split}` ({result.examples} examples, {result.answered} answered): "
             f"{percent_interval(answered_interval(result))}",
             f"- Unanswered: {result.unanswered}"
             + (f" ({', '.join(f'{k} {n}' for k, n in result.unanswered_by_kind.items())})" if result.unanswered else ""),
             "- Per-example results: `results.jsonl`", ""]
    if seen:
        lines += ["**Warning:** rows of this split were seen by the run that made the artifact: "
                  + ", ".join(f"{n} shared with its split `{name}`" for name, n in seen.items())
                  + "; this score is not a held-out one.", ""]
    else:
        lines += ["No row of this split was learned from or selected on by the run that made the artifact "
                  "(compared by content), as far as its `splits.json` tells.", ""]
    spent = ", ".join(f"{role} {money(d) if d is not None else 'unpriced'}" for role, d in dollars.items()) \
        if any(d is not None for d in dollars.values()) else ""
    lines += ["## Cost", "", f"Critical path {result.sim_seconds:,.1f} s; dollars {money(total(dollars))}"
              + (f" ({spent})" if spent else "") + ".", "", *calls_lines(counts, served=served), ""]
    lines += ["## Provenance", "", *provenance_lines(record), ""]
    return "\n".join(lines)
