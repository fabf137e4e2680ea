"""``combee demo``: sequential ACE, naive batching and Combee on Formula, side by side.

Everything runs in this process: the simulated endpoint (``flat`` latency preset, the yardstick
ACE's 28.7 s and 5.35 calls per sample were measured on) plays the task world. Times are simulated
seconds on the critical path; accuracy is on the held-out Formula val split. A report (Markdown,
a plot of accuracy against simulated time per method, role separation, an index page) is written
into ``out`` and its index's path printed last.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from combee_fast.config import SessionConfig, SimConfig, TaskConfig
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.run.train import TrainResult
from combee_fast.session import open_session
from combee_fast.verify.cells import served_by
from combee_fast.verify.report import demo_report

DEMO_RUNS = (("sequential", 1), ("naive", 100), ("combee", 40))


def _table(results: list[tuple[str, int, TrainResult]]) -> str:
    baseline = results[0][2].train_sim_seconds
    header = f"{'method':<11}{'batch':>6}{'sim time':>12}{'speedup':>9}{'val acc':>9}{'entries':>9}{'LLM calls':>11}{'tokens':>12}"
    lines = [header, "-" * len(header)]
    for method, batch, result in results:
        accuracy = result.final_eval.accuracy if result.final_eval else float("nan")
        lines.append(
            f"{method:<11}{batch:>6}{result.train_sim_seconds / 3600:>10.2f} h"
            f"{baseline / max(result.train_sim_seconds, 1e-9):>8.1f}x{100 * accuracy:>8.1f}%"
            f"{len(result.artifact):>9}{result.calls:>11,}{result.tokens:>12,}"
        )
    return "\n".join(lines)


async def run_demo(*, train_limit: int = 500, time_scale: float = 2e-4,
                   out: str | Path | None = None) -> list[tuple[str, int, TrainResult]]:
    """Train each demo method on the first ``train_limit`` Formula train rows; print the table;
    write the report into ``out`` (default ``runs/demo-<date-time>``) and print its index's path."""
    config = SessionConfig(
        task=TaskConfig(train_split=f"train[0:{train_limit}]"), sim=SimConfig(preset="flat", time_scale=time_scale)
    )
    results = []
    started = time.perf_counter()
    async with open_session(config) as session:
        print(f"Formula: {len(session.train_split.examples)} train / {len(session.val_split.examples)} val "
              "examples; simulated endpoint, flat latency preset", file=sys.stderr)
        for method, batch in DEMO_RUNS:
            result = await session.train(method=method, plan=FixedBatch(batch))
            print(f"  {method:<10} done in {time.perf_counter() - started:5.1f} s real time", file=sys.stderr)
            results.append((method, batch, result))
    print(_table(results))
    folder = out or f"runs/demo-{time.strftime('%Y%m%d-%H%M%S')}"
    index = demo_report(folder, results, split=config.task.val_split, models=served_by(config),
                        use_ground_truth=config.use_ground_truth, scorer=f"the {session.task.name} task's success metric")
    print(f"report: {index}")
    return results
