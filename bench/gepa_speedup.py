"""Serial GEPA vs synchronous Combee-GEPA vs asynchronous Combee-GEPA (automatic minibatch), on
the simulated endpoint, in one sitting.

    python bench/gepa_speedup.py                        # Formula, flat preset
    python bench/gepa_speedup.py --preset h200-70b --seed 1

Runs, each from the same seed instruction, with the card's ``selection`` split as GEPA's Pareto
set and each best candidate scored on the ``test`` split (report only):

1. ``gepa`` (serial GEPA, ``--gepa-minibatch`` examples, one reflection call), one pass over the
   train split (``gepa.max_epochs = 1``, the metric-call budget out of reach);
2. ``combee-gepa`` at ``--batch-size`` (the synchronous loop), one pass;
3. ``async-gepa`` with ``gepa.combee_minibatch = "auto"`` (the live planner sizes each proposal
   and the proposals in flight), one pass;
4. ``async-gepa`` (auto) and ``combee-gepa`` (``--batch-size``) again under a metric-call budget
   of ``--budget`` (no epoch limit), to count the calls each makes past it.

Times are simulated seconds on each run's critical path (validation of accepted children
included: it is part of GEPA's search); accuracies come from the task world, a calibrated
model, not from a real LLM.

Last line: ``async_vs_serial=<serial s / async s> async_vs_sync=<combee-gepa s / async s>
acc_gap=<serial test - async test> overshoot=<async calls past the budget> auto_batch=<the
async run's mean minibatch>``, then the figures they come from (``sync_overshoot``: the
synchronous loop's calls past the same budget).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from combee_fast.config import SessionConfig, SimConfig, TaskConfig
from combee_fast.gepa.settings import GepaConfig
from combee_fast.engine.loop import run
from combee_fast.run.train import TrainResult
from combee_fast.session import open_session

UNLIMITED = 10**9


class Measured:
    """One run: its result, its best candidate's test accuracy, the minibatches it planned."""

    def __init__(self, name: str, result: TrainResult, test: float) -> None:
        self.name, self.result, self.test = name, result, test
        self.minibatches = [row.batch_size for row in result.ledger[1:] if row.batch_size]

    @property
    def sim(self) -> float:
        return self.result.train_sim_seconds

    @property
    def metric_calls(self) -> int:
        return int(self.result.summary["metric_calls"])


async def measure(args: argparse.Namespace, name: str, method: str, minibatch: int | None, *,
                  budget: int = UNLIMITED) -> Measured:
    """``method`` trained once (one epoch, or until ``budget`` metric calls), its best scored on test."""
    config = SessionConfig(
        method=method, seed=args.seed, task=TaskConfig(name=args.task, val_split=args.val_split),
        sim=SimConfig(args.preset, args.time_scale),
        learners={"gepa": GepaConfig(minibatch=args.gepa_minibatch,
                                     combee_minibatch="auto" if minibatch is None else minibatch,
                                     max_metric_calls=budget, max_epochs=args.epochs if budget == UNLIMITED else None)},
    )
    async with open_session(config) as session:
        result = await session.train()
        test = await session.evaluate(result.best, session.task.load(args.test_split).examples)
    return Measured(name, result, test.accuracy)


def row(m: Measured) -> str:
    r = m.result
    batches = Counter(m.minibatches)
    shown = ",".join(f"{b}" if n == 1 else f"{b}x{n}" for b, n in sorted(batches.items()))
    return (f"{m.name:<22}{shown:>12}{m.sim:>9,.0f}{r.summary['accepted']:>6}{m.metric_calls:>8}{r.calls:>7}"
            f"{100 * (r.best_val_accuracy or 0):>7.1f}{100 * m.test:>7.1f}{r.train_wall_seconds:>8.1f}")


async def compare(args: argparse.Namespace) -> list[Measured]:
    runs = [
        await measure(args, "gepa", "gepa", None),
        await measure(args, f"combee-gepa b{args.batch_size}", "combee-gepa", args.batch_size),
        await measure(args, "async-gepa auto", "async-gepa", None),
        await measure(args, f"async-gepa auto, {args.budget}", "async-gepa", None, budget=args.budget),
        await measure(args, f"combee-gepa b{args.batch_size}, {args.budget}", "combee-gepa", args.batch_size,
                      budget=args.budget),
    ]
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"]
    print(f"task {args.task}, preset {args.preset}, seed {args.seed}; Pareto set {args.val_split}, test "
          f"{args.test_split}; sim seconds on the critical path; accuracy from the task world (a model); "
          f"load average {' '.join(load)}", file=sys.stderr)
    print(f"{'run':<22}{'minibatch':>12}{'sim s':>9}{'acc.':>6}{'metric':>8}{'calls':>7}{'val %':>7}{'test %':>7}"
          f"{'real s':>8}")
    for m in runs:
        print(row(m))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description="Serial GEPA vs Combee-GEPA vs asynchronous Combee-GEPA")
    parser.add_argument("--task", default="formula")
    parser.add_argument("--val-split", default="selection", help="GEPA's Pareto set")
    parser.add_argument("--test-split", default="test", help="where each best candidate is scored")
    parser.add_argument("--batch-size", type=int, default=GepaConfig().combee_minibatch,
                        help="combee-gepa's minibatch (the synchronous baseline)")
    parser.add_argument("--gepa-minibatch", type=int, default=GepaConfig().minibatch, help="serial gepa's minibatch")
    parser.add_argument("--epochs", type=int, default=1, help="passes over the train split")
    parser.add_argument("--budget", type=int, default=2000, help="metric calls of the budget-bound runs")
    parser.add_argument("--preset", default="flat")
    parser.add_argument("--time-scale", type=float, default=0.001)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    serial, sync, auto, bound, sync_bound = run(compare(args))
    mean_batch = sum(auto.minibatches) / len(auto.minibatches)
    print(
        f"async_vs_serial={serial.sim / auto.sim:.2f} async_vs_sync={sync.sim / auto.sim:.2f} "
        f"acc_gap={serial.test - auto.test:.3f} overshoot={max(0, bound.metric_calls - args.budget)} "
        f"auto_batch={mean_batch:.0f} serial_s={serial.sim:.0f} sync_s={sync.sim:.0f} async_s={auto.sim:.0f} "
        f"serial_test={serial.test:.3f} sync_test={sync.test:.3f} async_test={auto.test:.3f} "
        f"budget={args.budget} async_calls={bound.metric_calls} sync_overshoot={max(0, sync_bound.metric_calls - args.budget)}"
    )


if __name__ == "__main__":
    main()
