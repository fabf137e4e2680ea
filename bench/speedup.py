"""Sequential ACE vs Combee vs naive batching on the simulated endpoint.

    python bench/speedup.py --task formula --batch-size 40
    python bench/speedup.py --task formula --batch-size 40 --preset flat

Train split, one epoch, validation on the val split. Times are simulated seconds on each run's
critical path. Sequential ACE keeps one request in flight, so the server's load never changes its
latency and it runs at a finer time scale (faster); the batched methods run at ``--time-scale``,
coarse enough that requests sent together overlap on the simulated GPU as they would for real.
Last line: ``speedup=<sequential/combee wall> acc_sequential=<a> acc_combee=<b> acc_naive100=<c>``.
"""

from __future__ import annotations

import argparse
import sys

from combee_fast.engine.loop import run
from combee_fast.config import MapConfig, SessionConfig, SimConfig, TaskConfig
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.run.train import TrainResult
from combee_fast.session import open_session

SERIAL_TIME_SCALE = 1e-3


async def _train(config: SessionConfig, method: str, batch: int) -> TrainResult:
    async with open_session(config) as session:
        return await session.train(method=method, plan=FixedBatch(batch))


def _row(name: str, batch: int, result: TrainResult) -> str:
    accuracy = 100 * result.final_eval.accuracy if result.final_eval else float("nan")
    return (
        f"{name:<11}{batch:>6}{result.train_sim_seconds:>12,.0f}{result.train_sim_seconds / result.samples:>11.2f}"
        f"{result.calls / result.samples:>10.2f}{accuracy:>9.1f}{len(result.final):>9}{result.train_wall_seconds:>9.1f}"
    )


async def compare(args: argparse.Namespace) -> dict[str, TrainResult]:
    def config(time_scale: float) -> SessionConfig:
        sync_rounds = None if args.sync_rounds == "all" else int(args.sync_rounds)
        return SessionConfig(task=TaskConfig(name=args.task), seed=args.seed, map=MapConfig(sync_rounds=sync_rounds),
                             sim=SimConfig(args.preset, time_scale))

    runs = {
        "sequential": await _train(config(SERIAL_TIME_SCALE), "sequential", 1),
        "combee": await _train(config(args.time_scale), "combee", args.batch_size),
        "naive": await _train(config(args.time_scale), "naive", args.naive_batch_size),
    }
    print(f"task {args.task}, preset {args.preset}, seed {args.seed}; sim seconds on the critical path", file=sys.stderr)
    print(f"{'method':<11}{'batch':>6}{'sim s':>12}{'s/sample':>11}{'calls/s.':>10}{'val acc':>9}{'entries':>9}{'real s':>9}")
    batches = {"sequential": 1, "combee": args.batch_size, "naive": args.naive_batch_size}
    for name, result in runs.items():
        print(_row(name, batches[name], result))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description="Sequential ACE vs Combee vs naive on the simulated endpoint")
    parser.add_argument("--task", default="formula")
    parser.add_argument("--batch-size", type=int, default=40, help="Combee's batch size")
    parser.add_argument("--naive-batch-size", type=int, default=100)
    parser.add_argument("--preset", default="h200-70b")
    parser.add_argument("--time-scale", type=float, default=0.01, help="for the batched methods")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sync-rounds", default="1",
                        help="Combee: ACE rounds inside a step, the rest carried to the next; 'all' carries none")
    args = parser.parse_args()
    runs = run(compare(args))
    seq, comb, naive = runs["sequential"], runs["combee"], runs["naive"]

    def acc(result: TrainResult) -> str:
        return f"{100 * result.final_eval.accuracy:.1f}" if result.final_eval else "nan"

    print(
        f"sec_per_sample_sequential={seq.train_sim_seconds / seq.samples:.2f} "
        f"calls_per_sample_sequential={seq.calls / seq.samples:.2f} "
        f"sec_per_sample_combee={comb.train_sim_seconds / comb.samples:.2f} "
        f"calls_per_sample_combee={comb.calls / comb.samples:.2f}"
    )
    print(
        f"speedup={seq.train_sim_seconds / comb.train_sim_seconds:.2f} acc_sequential={acc(seq)} "
        f"acc_combee={acc(comb)} acc_naive{args.naive_batch_size}={acc(naive)}"
    )


if __name__ == "__main__":
    main()
