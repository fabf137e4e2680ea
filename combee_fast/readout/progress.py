"""Progress a person can read: a consumer of the run's :mod:`~combee_fast.run.events`.

On a terminal, :class:`Progress` draws a live bar (the ``rich`` library, its fields folded onto
more lines in a narrow terminal, never cut): step k of about n, the
budget spent (train samples for ACE, metric calls for GEPA: the run's
:class:`~combee_fast.protocols.running.Budget`), elapsed
real time, the time left at the pace so far, the artifact's size in its own unit, the latest
validation, the dollars so far (once a role has a price; ``+ unpriced`` while another has none); elsewhere (a file, a pipe, CI) it prints one plain line per step with the same
fields. Real seconds (``elapsed``, ``eta``) and simulated seconds (``sim``: the critical path in
the simulated endpoint's seconds, shown only when the run is on one) are labelled apart. A
resumed run counts the steps and budget of its earlier sessions (``resumed``: their ledger rows).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable
from typing import IO, Any

from combee_fast.money.dollars import add_dollars, money, total
from combee_fast.protocols.running import Budget
from combee_fast.record.ledger import LedgerRow
from combee_fast.run.events import Event, RunStopped, StepDone

BAR_WIDTH = 20
"""Characters of the live bar itself; the fields take the rest of the terminal's width."""


def clock(seconds: float) -> str:
    """``h:mm:ss`` of a number of seconds."""
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class Progress:
    """The run's progress on ``stream`` (default stderr): a live bar when ``live`` (default: the
    stream is a terminal), else a plain line per step. ``label``: the method's name; ``budget``:
    what the run spends (None: unknown, no ETA); ``size_unit``: what the artifact's size counts;
    ``simulated()``: whether the run's critical path is in simulated seconds (shown as ``sim``;
    asked at every step, since a remote simulated server says so only in its replies)."""

    def __init__(self, *, label: str, budget: Budget | None, size_unit: str = "size",
                 simulated: Callable[[], bool] = lambda: False, stream: IO[str] | None = None,
                 live: bool | None = None, resumed: Iterable[LedgerRow] = ()) -> None:
        self.label, self.budget, self.size_unit, self.simulated = label, budget, size_unit, simulated
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.started = time.monotonic()
        self.spent = 0.0
        self.steps = 0
        self.dollars: dict[str, float | None] = {}  # per role so far (money/dollars.py)
        for row in resumed:  # a resumed run's steps done before: counted, not timed
            self.steps = row.step + 1
            add_dollars(self.dollars, row.dollars)
            if budget is not None:
                self.spent += budget.spent(row)
        self._spent_before = self.spent
        self._bar: Any = None
        self._task: Any = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, StepDone):
            self._step(event.row)
        elif isinstance(event, RunStopped):
            self.close()

    def close(self) -> None:
        """Stop the live bar (its last state stays on the terminal)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    # ------------------------------------------------------------------------- what it says

    def fields(self, row: LedgerRow) -> str:
        """The step's line after ``step k of ~n`` (the plain line; the bar shows the same)."""
        elapsed = time.monotonic() - self.started
        parts = []
        if self.budget is not None:
            parts.append(self.spent_text())
        parts.append(f"elapsed {clock(elapsed)}")
        if (left := self.eta(elapsed)) is not None:
            parts.append(f"eta {clock(left)}")
        parts.append(f"batch {row.batch_size} ({row.batch_reason})")
        parts.append(f"{self.size_unit} {row.size}")
        if row.batch_size:
            parts.append(f"first-try {100 * row.first_try_accuracy:.0f}%")
        if row.errors:
            parts.append(f"errors {len(row.errors)}")
        if row.val_accuracy is not None:
            val = f"val {100 * row.val_accuracy:.1f}%"
            if row.val_unanswered:
                val += f" of {row.val_answered} answered ({row.val_unanswered} unanswered)"
            parts.append(val)
        if self.simulated():
            parts.append(f"sim {row.cumulative_sim_seconds:,.0f} s")
        if any(d is not None for d in self.dollars.values()):  # a run with no price at all says so at its end
            spent = total(self.dollars)
            parts.append(money(spent) if spent is not None else
                         f"{money(total({r: d for r, d in self.dollars.items() if d is not None}))} + unpriced")
        return "  ".join(parts)

    def spent_text(self) -> str:
        """``metric calls 206 of 300 (69%)``; past the budget (a synchronous GEPA step that
        started within it finishes, as GEPA's does): ``metric calls 412 (budget 300, the last
        step went past it)``, never a share above the whole."""
        budget = self.budget
        assert budget is not None
        if self.spent > budget.total:
            return f"{budget.unit} {self.spent:,.0f} (budget {budget.total:,.0f}, the last step went past it)"
        share = self.spent / budget.total if budget.total else 1.0
        return f"{budget.unit} {self.spent:,.0f} of {budget.total:,.0f} ({100 * share:.0f}%)"

    def step_count(self) -> str:
        """``step k`` with the steps expected at this pace (``of ~n``) when the budget says."""
        if self.budget is None or self.spent <= 0:
            return f"step {self.steps}"
        expected = max(self.steps, math.ceil(self.steps * self.budget.total / self.spent))
        return f"step {self.steps} of ~{expected}"

    def eta(self, elapsed: float) -> float | None:
        """Real seconds left at this process's pace so far (None: unknown yet)."""
        done = self.spent - self._spent_before
        if self.budget is None or done <= 0:
            return None
        return max(0.0, elapsed * (self.budget.total - self.spent) / done)

    # ------------------------------------------------------------------------------ output

    def _step(self, row: LedgerRow) -> None:
        self.steps = row.step + 1
        add_dollars(self.dollars, row.dollars)
        if self.budget is not None:
            self.spent += self.budget.spent(row)
        if not self.live:
            print(f"[{self.label}] {self.step_count()}  {self.fields(row)}", file=self.stream, flush=True)
            return
        self._draw(row)

    def _draw(self, row: LedgerRow) -> None:
        from rich.console import Console
        from rich.markup import escape
        from rich.progress import BarColumn, Progress as Bar, TextColumn
        from rich.table import Column

        if self._bar is None:  # the fields fold onto more lines in a narrow terminal, never cut
            self._bar = Bar(TextColumn("[bold]{task.description}", table_column=Column(no_wrap=True)),
                            BarColumn(bar_width=BAR_WIDTH),
                            TextColumn("{task.fields[text]}", table_column=Column(overflow="fold", ratio=1)),
                            console=Console(file=self.stream), transient=False, expand=True)
            self._bar.start()
            total = self.budget.total if self.budget is not None else None
            self._task = self._bar.add_task(escape(self.label), total=total, text="")
        self._bar.update(self._task, completed=self.spent,
                         description=escape(f"[{self.label}] {self.step_count()}"), text=escape(self.fields(row)))
