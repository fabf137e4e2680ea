"""Serial GEPA vs Combee+GEPA on the simulated endpoint.

    python bench/gepa_speedup.py                       # Formula, flat preset, one epoch each
    python bench/gepa_speedup.py --batch-size 20 --gepa-minibatch 5

Both methods start from the same seed instruction and stop after one pass over the train split
(``gepa.max_epochs=1``; the metric-call budget is set out of reach), with the full val split as
GEPA's Pareto set. ``gepa`` reflects on ``--gepa-minibatch`` examples per iteration with one call;
``combee-gepa`` on ``--batch-size`` with one call per shuffled group and the aggregation tree.
Times are simulated seconds on each run's critical path (validation of accepted children
included: it is part of GEPA's search). Accuracies come from the task world, a calibrated model,
not from a real LLM.
Last line: ``gepa_sim_s=<a> combee_gepa_sim_s=<b> sim_seconds_ratio=<a/b> gepa_val=<c>
combee_gepa_val=<d> accuracy_gap=<c-d>``.
"""

from __future__ import annotations

import argparse
import sys

from combee_fast.config import GepaConfig, SessionConfig, SimConfig, TaskConfig
from combee_fast.engine.loop import run
from combee_fast.run.train import TrainResult
from combee_fast.session import open_session

UNLIMITED = 10**9


async def _train(args: argparse.Namespace, method: str) -> TrainResult:
    config = SessionConfig(
        method=method, seed=args.seed, task=TaskConfig(name=args.task, val_split=args.val_split),
        sim=SimConfig(args.preset, args.time_scale),
        gepa=GepaConfig(minibatch=args.gepa_minibatch, combee_minibatch=args.batch_size, max_metric_calls=UNLIMITED,
                        max_epochs=args.epochs),
    )
    async with open_session(config) as session:
        return await session.train()


def _row(name: str, minibatch: int, result: TrainResult) -> str:
    iterations = result.steps - 1  # the first step grades the seed
    metric_calls = result.summary["metric_calls"]
    return (
        f"{name:<12}{minibatch:>6}{result.train_sim_seconds:>10,.0f}{iterations:>7}{result.summary['accepted']:>7}"
        f"{metric_calls:>9}{result.calls:>8}{result.train_sim_seconds / metric_calls:>9.3f}"
        f"{100 * result.best_val_accuracy:>8.1f}{result.train_wall_seconds:>8.1f}"
    )


async def compare(args: argparse.Namespace) -> tuple[TrainResult, TrainResult]:
    gepa = await _train(args, "gepa")
    combee = await _train(args, "combee-gepa")
    print(f"task {args.task}, preset {args.preset}, seed {args.seed}, {args.epochs} epoch(s); "
          "sim seconds on the critical path; accuracy from the task world (a model)", file=sys.stderr)
    print(f"{'method':<12}{'batch':>6}{'sim s':>10}{'iters':>7}{'acc.':>7}{'metric':>9}{'calls':>8}"
          f"{'s/metric':>9}{'val %':>8}{'real s':>8}")
    print(_row("gepa", args.gepa_minibatch, gepa))
    print(_row("combee-gepa", args.batch_size, combee))
    return gepa, combee


def main() -> None:
    parser = argparse.ArgumentParser(description="Serial GEPA vs Combee+GEPA on the simulated endpoint")
    parser.add_argument("--task", default="formula")
    parser.add_argument("--val-split", default="val")
    parser.add_argument("--batch-size", type=int, default=40, help="combee-gepa's minibatch")
    parser.add_argument("--gepa-minibatch", type=int, default=GepaConfig().minibatch, help="serial gepa's minibatch")
    parser.add_argument("--epochs", type=int, default=1, help="passes over the train split")
    parser.add_argument("--preset", default="flat")
    parser.add_argument("--time-scale", type=float, default=0.001)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    gepa, combee = run(compare(args))
    print(
        f"gepa_sim_s={gepa.train_sim_seconds:.0f} combee_gepa_sim_s={combee.train_sim_seconds:.0f} "
        f"sim_seconds_ratio={gepa.train_sim_seconds / combee.train_sim_seconds:.2f} "
        f"gepa_val={gepa.best_val_accuracy:.3f} combee_gepa_val={combee.best_val_accuracy:.3f} "
        f"accuracy_gap={gepa.best_val_accuracy - combee.best_val_accuracy:.3f}"
    )


if __name__ == "__main__":
    main()
