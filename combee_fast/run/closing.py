"""The human summary that ends a ``combee learn`` run on stderr, beside the JSON line on stdout.

A few lines a person reads when the run is over: how long it took and what it spent (steps,
calls, tokens, rollouts, and the figures per accepted improvement when ``summary.json`` has
them), its dollars (per role, per accepted improvement; unknown without prices), a line per role
held below its concurrency cap, the best validation score and the final artifact's score with its 95% interval, and where
the prompt, the artifact and the report are.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from combee_fast.run.dollars import UNKNOWN, money
from combee_fast.run.report import answered_interval, percent_interval

OPTIONAL_FIGURES = (("tokens_per_improvement", "tokens per accepted improvement"),
                    ("candidates_explored", "candidates explored"))
"""Figures of ``summary.json`` shown when a run records them: (key, how the summary names it)."""


def _clock(seconds: float) -> str:
    """``0:01:05`` for 65.3 seconds."""
    return str(timedelta(seconds=round(seconds)))


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


def closing_lines(result: Any, summary: Mapping[str, Any], out: str, *, val_split: str) -> list[str]:
    """The summary's lines for the :class:`~combee_fast.run.train.TrainResult` ``result``, whose
    ``summary.json`` is ``summary``, written into the run directory ``out``."""
    how = "interrupted" if result.interrupted else "stopped early" if result.stopped_by else "finished"
    spent = [f"{result.steps} step(s)", f"{result.calls:,} calls", f"{result.tokens:,} tokens",
             f"{result.rollouts:,} rollouts"]
    spent += [f"{summary[key]:,} {name}" if isinstance(summary[key], int) else f"{summary[key]:,.1f} {name}"
              for key, name in OPTIONAL_FIGURES if isinstance(summary.get(key), (int, float))]
    lines = [f"Run {how} in {_clock(result.train_wall_seconds)} wall ({result.train_sim_seconds:,.1f} s critical "
             f"path): {', '.join(spent)}", f"  cost: {cost_text(summary)}"]
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
