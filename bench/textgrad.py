"""Serial TextGrad vs Combee-TextGrad vs naive (batched) TextGrad on the simulated endpoint.

    python bench/textgrad.py                           # Formula, h200-70b preset, batch 40, one epoch
    python bench/textgrad.py --batch-size 20 --preset flat

All three learn a prompt variable from the same seed prompt over the whole train split, one
epoch, in the same epoch order: ``textgrad`` (TextGrad's own loop: one optimizer step per
example), ``combee-textgrad`` (``--batch-size`` examples per step: gradients through the
augmented shuffle into groups, one optimizer step per group, the reduce tree) and
``naive-textgrad`` (``--naive-batch-size`` examples per step, all their gradients in one
optimizer call, TextGrad's batched mode). Each run's final prompt is scored on the test split
(report only), per example with the same seeds. Times are simulated seconds on each run's
critical path; the serial run keeps one request in flight, so it runs at a finer time scale
(faster, same simulated seconds). Accuracies come from the task world, a model, not a real LLM.

Last line: ``speedup=<serial/combee sim s> acc_serial=<a> acc_combee=<b> acc_naive=<c>``
(test accuracy in points) then ``sim_s_serial=... sim_s_combee=... sim_s_naive=...``.
"""

from __future__ import annotations

import argparse
import sys

from combee_fast.config import SessionConfig, SimConfig, TaskConfig
from combee_fast.engine.loop import run
from combee_fast.methods.base import EvalResult
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.run.train import TrainResult
from combee_fast.session import open_session

SERIAL_TIME_SCALE = 1e-3


async def _train(args: argparse.Namespace, method: str, batch: int,
                 time_scale: float) -> tuple[TrainResult, EvalResult]:
    config = SessionConfig(learner="textgrad", method=method, seed=args.seed,
                           task=TaskConfig(name=args.task, val_split=args.val_split),
                           sim=SimConfig(args.preset, time_scale))
    async with open_session(config) as session:
        result = await session.train(plan=FixedBatch(batch))
        test = await session.evaluate(result.final, session.task.load(args.test_split).examples)
    return result, test


def _row(name: str, batch: int, result: TrainResult, test: EvalResult) -> str:
    return (f"{name:<17}{batch:>6}{result.train_sim_seconds:>11,.0f}{result.train_sim_seconds / result.samples:>10.2f}"
            f"{result.calls / result.samples:>10.2f}{100 * test.accuracy:>9.1f}{len(result.final):>7}"
            f"{result.train_wall_seconds:>8.1f}")


async def compare(args: argparse.Namespace) -> dict[str, tuple[TrainResult, EvalResult, int]]:
    runs = {
        "textgrad": (*await _train(args, "sequential", 1, SERIAL_TIME_SCALE), 1),
        "combee-textgrad": (*await _train(args, "combee", args.batch_size, args.time_scale), args.batch_size),
        "naive-textgrad": (*await _train(args, "naive", args.naive_batch_size, args.time_scale), args.naive_batch_size),
    }
    print(f"task {args.task}, preset {args.preset}, seed {args.seed}, one epoch; sim seconds on the critical path; "
          f"test accuracy on {args.test_split} from the task world (a model)", file=sys.stderr)
    print(f"{'method':<17}{'batch':>6}{'sim s':>11}{'s/sample':>10}{'calls/s.':>10}{'test %':>9}{'lines':>7}"
          f"{'real s':>8}")
    for name, (result, test, batch) in runs.items():
        print(_row(name, batch, result, test))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description="Serial vs Combee vs naive TextGrad on the simulated endpoint")
    parser.add_argument("--task", default="formula")
    parser.add_argument("--val-split", default="selection", help="validation (selection) split")
    parser.add_argument("--test-split", default="test", help="the split each final prompt is scored on")
    parser.add_argument("--batch-size", type=int, default=40, help="Combee-TextGrad's batch")
    parser.add_argument("--naive-batch-size", type=int, default=40, help="naive TextGrad's batch")
    parser.add_argument("--preset", default=SimConfig().preset)
    parser.add_argument("--time-scale", type=float, default=0.01, help="for the batched methods")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    runs = run(compare(args))
    (serial, serial_test, _), (combee, combee_test, _), (naive, naive_test, _) = runs.values()
    print(f"speedup={serial.train_sim_seconds / combee.train_sim_seconds:.2f} "
          f"acc_serial={100 * serial_test.accuracy:.1f} acc_combee={100 * combee_test.accuracy:.1f} "
          f"acc_naive={100 * naive_test.accuracy:.1f} "
          f"sim_s_serial={serial.train_sim_seconds:.0f} sim_s_combee={combee.train_sim_seconds:.0f} "
          f"sim_s_naive={naive.train_sim_seconds:.0f}")


if __name__ == "__main__":
    main()
