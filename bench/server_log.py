"""What a llama.cpp server did, task by task, from the log a ``--local`` run keeps (``server.log``).

``python bench/server_log.py RUN/server.log [--tasks]``

The server's ``/metrics`` count a run's work in totals (``summary.json`` ``server_work``); its log
says it per task: which slot took the task and how the slot was chosen (``LCP`` similarity to
the prompt the slot held, or ``LRU`` when none was similar enough), how many prompt tokens the task
read (those its slot's cache did not hold), how many it generated, when it started and ended. So
the log answers what the totals cannot: which calls read their prompt cold, and how many slots
were busy over the run.

It prints, per slot, the tasks and the prompt tokens read, then (with ``--tasks``) every task
in the order it started; the last line is ``key=value`` pairs: ``tasks`` (started), ``read``
(prompt tokens read, summed over the tasks that printed their timings: a task the client
cancelled prints none), ``generated``, ``lru`` (tasks whose slot was chosen by LRU),
``mean_busy`` (slots busy, averaged over the span from the first start to the last release)
and ``span_s``.

The log's lines are llama.cpp's (``launch_slot_``, ``get_availabl``, ``print_timing``,
``release``), with its ``M.SS.mmm.uuu`` timestamps (minutes, seconds, milliseconds,
microseconds since the server started); a line of another shape is skipped.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

STAMP = r"(?P<at>\d+\.\d+\.\d+\.\d+)"
CHOSEN = re.compile(rf"^{STAMP} I slot get_availabl: id +(?P<slot>\d+) \| task -1 \| selected slot by (?P<how>LCP|LRU)")
LAUNCH = re.compile(rf"^{STAMP} I slot launch_slot_: id +(?P<slot>\d+) \| task (?P<task>\d+) ")
READ = re.compile(r"task (?P<task>\d+) \| prompt eval time = .*/ +(?P<tokens>\d+) tokens")
GENERATED = re.compile(r"task (?P<task>\d+) \| +eval time = .*/ +(?P<tokens>\d+) tokens")
RELEASE = re.compile(rf"^{STAMP} I slot +release: id +(?P<slot>\d+) \| task (?P<task>\d+) ")


def seconds(stamp: str) -> float:
    """A log timestamp ``M.SS.mmm.uuu`` in seconds."""
    minutes, whole, milli, micro = (int(part) for part in stamp.split("."))
    return 60 * minutes + whole + milli / 1e3 + micro / 1e6


@dataclass
class Task:
    """One task of the server: its slot, how the slot was chosen, its times and token counts
    (``read`` and ``generated`` None when the task printed no timings: cancelled by its client)."""

    task: int
    slot: int
    chosen: str
    started: float
    ended: float | None = None
    read: int | None = None
    generated: int | None = None


def read_log(path: Path) -> list[Task]:
    """The tasks of the log at ``path``, in the order they started."""
    tasks: dict[int, Task] = {}
    chosen = "?"
    for line in path.read_text(errors="replace").splitlines():
        if match := CHOSEN.match(line):
            chosen = match["how"]
        elif match := LAUNCH.match(line):
            number = int(match["task"])
            tasks[number] = Task(number, int(match["slot"]), chosen, seconds(match["at"]))
            chosen = "?"
        elif match := RELEASE.match(line):
            if (task := tasks.get(int(match["task"]))) is not None:
                task.ended = seconds(match["at"])
        elif match := READ.search(line):
            if (task := tasks.get(int(match["task"]))) is not None:
                task.read = int(match["tokens"])
        elif match := GENERATED.search(line):
            if (task := tasks.get(int(match["task"]))) is not None:
                task.generated = int(match["tokens"])
    return sorted(tasks.values(), key=lambda t: (t.started, t.task))


def mean_busy(tasks: list[Task]) -> tuple[float, float]:
    """``(slots busy on average, span in seconds)`` from the first start to the last release."""
    events = sorted([(t.started, 1) for t in tasks if t.ended is not None] +
                    [(t.ended, -1) for t in tasks if t.ended is not None])
    if not events:
        return 0.0, 0.0
    busy, area, last = 0, 0.0, events[0][0]
    for at, change in events:
        area += busy * (at - last)
        busy, last = busy + change, at
    span = events[-1][0] - events[0][0]
    return (area / span if span > 0 else 0.0), span


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="a llama.cpp server's log (a --local run's server.log)")
    parser.add_argument("--tasks", action="store_true", help="also list every task in the order it started")
    args = parser.parse_args()
    if not args.log.is_file():
        print(f"bench/server_log.py: no file {args.log}", file=sys.stderr)
        return 2
    tasks = read_log(args.log)
    if not tasks:
        print(f"bench/server_log.py: {args.log} holds no llama.cpp task (no 'launch_slot_' line)", file=sys.stderr)
        return 2
    print("| slot | tasks | prompt tokens read | chosen by LRU |\n|---|---|---|---|")
    for slot in sorted({t.slot for t in tasks}):
        own = [t for t in tasks if t.slot == slot]
        print(f"| {slot} | {len(own)} | {sum(t.read or 0 for t in own):,} | {sum(t.chosen == 'LRU' for t in own)} |")
    if args.tasks:
        print("\n| task | slot | chosen | start s | end s | read | generated |\n|---|---|---|---|---|---|---|")
        for t in tasks:
            ended = "" if t.ended is None else f"{t.ended:.1f}"
            print(f"| {t.task} | {t.slot} | {t.chosen} | {t.started:.1f} | {ended} | "
                  f"{'' if t.read is None else t.read} | {'' if t.generated is None else t.generated} |")
    busy, span = mean_busy(tasks)
    print(f"tasks={len(tasks)} read={sum(t.read or 0 for t in tasks)} generated={sum(t.generated or 0 for t in tasks)} "
          f"lru={sum(t.chosen == 'LRU' for t in tasks)} mean_busy={busy:.2f} span_s={span:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
