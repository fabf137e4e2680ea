"""The human summary that ends a ``combee learn`` run (:func:`closing_lines`) or a ``combee eval``
(:func:`eval_lines`) on stderr, beside the JSON line on stdout.

A few lines a person reads when the run is over: how long it took and what it spent (steps,
calls, tokens, rollouts, and the figures per accepted improvement when ``summary.json`` has
them), its dollars (per role, per accepted improvement; unknown without prices), a line per role
held below its concurrency cap, the best validation score and the final artifact's score with its 95% interval, and where
the prompt, the artifact and the report are.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from combee_fast.money.dollars import UNKNOWN, money
from combee_fast.readout.progress import clock
from combee_fast.readout.report import answered_interval, percent_interval

OPTIONAL_FIGURES = (("tokens_per_improvement", "tokens per accepted improvement"),
                    ("candidates_explored", "candidates explored"))
"""Figures of ``summary.json`` shown when a run records them: (key, how the summary names it)."""


def cost_text(summary: Mapping[str, Any]) -> str:
    """``$0.0123 (generator $0.0100, ...), $0.0041 per accepted improvement``; with a role
    unpriced the total is unknown, and the roles priced and not are named."""
    by_role = summary.get("dollars_by_role", {})
    spent = summary.get("dollars")
    if spent is None and not any(d is not None for d in by_role.values()):
        return f"{UNKNOWN}; give each endpoint's price: --price [ROLE=]IN/OUT, dollars per million tokens"
    roles = ", ".join(f"{role} {money(d) if d is not None else 'unpriced'}" for role, d in by_role.items())
    per = summary.get("dollars_per_improvement")
    return (("unknown, not every role is priced" if spent is None else money(spent)) + (f" ({roles})" if roles else "")
            + (f", {money(per)} per accepted improvement" if per is not None else ""))


def closing_lines(result: Any, summary: Mapping[str, Any], out: str, *, val_split: str,
                  elapsed: float | None = None) -> list[str]:
    """The summary's lines for the :class:`~combee_fast.run.train.TrainResult` ``result``, whose
    ``summary.json`` is ``summary``, written into the run directory ``out``; ``elapsed``: the
    real seconds since the run began, as its progress counted them (its steps' are part of it)."""
    how = "interrupted" if result.interrupted else "stopped early" if result.stopped_by else "finished"
    spent = [f"{result.steps} step(s)", f"{result.calls:,} calls", f"{result.tokens:,} tokens",
             f"{result.rollouts:,} rollouts"]
    spent += [f"{summary[key]:,} {name}" if isinstance(summary[key], int) else f"{summary[key]:,.1f} {name}"
              for key, name in OPTIONAL_FIGURES if isinstance(summary.get(key), (int, float))]
    took = f"{clock(result.train_wall_seconds)} wall" if elapsed is None else \
        f"{clock(elapsed)} wall, {clock(result.train_wall_seconds)} of it in its steps"
    lines = [f"Run {how} in {took} ({result.train_sim_seconds:,.1f} s critical path): {', '.join(spent)}",
             f"  cost: {cost_text(summary)}"]
    lines += [f"  below its cap: {note}" for note in summary.get("concurrency_notes", ())]
    if result.best_val_accuracy is not None:
        lines.append(f"  best validation on {val_split}: {100 * result.best_val_accuracy:.1f}%")
    if result.final_eval is not None:
        final = result.final_eval
        lines.append(f"  final artifact on {val_split}: {percent_interval(answered_interval(final))} "
                     f"({final.answered} of {final.examples} examples answered)")
    if result.best_val_accuracy is None and result.final_eval is None:
        lines.append("  no validation score (the run validated nothing)")
    root = Path(out)
    lines += [f"  prompt:   {root / 'prompt.txt'}  (the best artifact as an agent reads it: combee show {out})",
              f"  artifact: {root / 'best.json'}  (last: {root / 'final.json'})",
              f"  report:   {root / 'report.md'}"]
    return lines


def eval_lines(result: Any, report: Mapping[str, Any], out: str | Path) -> list[str]:
    """The lines ending ``combee eval``: the score with its interval over the answered examples
    (the :class:`~combee_fast.methods.base.EvalResult` ``result``), its dollars (``report``, as
    in ``eval.json``) and where the per-example results and the page are, in the folder ``out``."""
    root = Path(out)
    return [f"Evaluation on {report['split']}: {percent_interval(answered_interval(result))} "
            f"({result.answered} of {result.examples} examples answered); cost: {money(report.get('dollars'))}",
            f"  per example: {root / 'results.jsonl'}  (input, answer, target, score, feedback)",
            f"  report:      {root / 'report.md'}"]
