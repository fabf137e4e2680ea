"""Fixed batch sizes vs ``--batch-size auto`` (the live planner) vs the paper's rule, on Formula.

    python bench/controller.py
    python bench/controller.py --presets flat --seeds 0 --sizes 40 160     # a small run

For every preset (h200-70b, hosted-api, flat) and seed (0, 1, 2): sequential ACE, Combee at fixed
batch sizes 10..320 without and with ``max_group`` (16), ``auto`` (the live planner) and ``paper``
(the paper's profile-and-fit rule, ``controller.mode = "paper"``). One epoch of the train split,
validation on the val split; times are simulated seconds on each run's critical path.

*best* is, per preset, the fastest fixed configuration whose mean validation accuracy over the seeds
is within 1 point of sequential ACE's mean. Last line:
``auto_time_vs_best=<worst preset's auto mean time / best mean time> auto_acc_gap=<worst preset's
sequential mean accuracy - auto mean accuracy, in points> auto_speedup_min=<smallest sequential /
auto time over every cell>``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import msgspec

from combee_fast.config import CombeeConfig, ControllerConfig, SessionConfig, SimConfig, TaskConfig, TrainConfig
from combee_fast.engine.loop import run
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.run.train import TrainResult
from combee_fast.session import open_session

SERIAL_TIME_SCALE = 1e-3  # sequential ACE keeps one request in flight: load never changes its latency
MAX_GROUP = 16


class Cell(msgspec.Struct):
    seconds: float
    accuracy: float
    batches: str


async def _train(config: SessionConfig, method: str, batch: int | None) -> TrainResult:
    async with open_session(config) as session:
        plan = FixedBatch(batch) if batch is not None else None
        return await session.train(method=method, plan=plan)


def _cell(result: TrainResult) -> Cell:
    accuracy = 100 * result.final_eval.accuracy if result.final_eval else float("nan")
    sizes = [row.batch_size for row in result.ledger if row.batch_reason != "drain"]
    shown = ",".join(map(str, sizes)) if len(sizes) <= 8 else f"{len(sizes)} steps"
    return Cell(result.train_sim_seconds, accuracy, shown)


async def sweep(args: argparse.Namespace) -> dict[str, dict[str, list[Cell]]]:
    results: dict[str, dict[str, list[Cell]]] = {}
    for preset in args.presets:
        rows = results.setdefault(preset, {})
        for seed in args.seeds:
            def config(time_scale: float, **changes: object) -> SessionConfig:
                base = SessionConfig(task=TaskConfig(name="formula"), seed=seed, sim=SimConfig(preset, time_scale))
                return msgspec.structs.replace(base, **changes)

            started = time.perf_counter()
            runs: list[tuple[str, SessionConfig, str, int | None]] = [
                ("sequential", config(SERIAL_TIME_SCALE), "sequential", 1)]
            for size in args.sizes:
                runs.append((f"fixed {size}", config(args.time_scale), "combee", size))
                runs.append((f"fixed {size} mg{MAX_GROUP}", config(args.time_scale, combee=CombeeConfig(max_group=MAX_GROUP)),
                             "combee", size))
            runs.append(("auto", config(args.time_scale, train=TrainConfig(batch_size=None)), "combee", None))
            runs.append(("paper", config(args.time_scale, train=TrainConfig(batch_size=None),
                                         controller=ControllerConfig(mode="paper")), "combee", None))
            for name, cfg, method, batch in runs:
                cell = _cell(await _train(cfg, method, batch))
                rows.setdefault(name, []).append(cell)
                print(f"{preset:<11}{seed:>3}  {name:<16}{cell.seconds:>10,.0f}{cell.accuracy:>8.1f}  {cell.batches}",
                      file=sys.stderr, flush=True)
            print(f"# {preset} seed {seed}: {time.perf_counter() - started:.0f} s real", file=sys.stderr, flush=True)
    return results


def summarise(results: dict[str, dict[str, list[Cell]]]) -> str:
    worst_ratio, worst_gap, min_speedup = 0.0, -float("inf"), float("inf")
    print(f"{'preset':<11}{'config':<16}{'mean sim s':>12}{'mean acc':>10}{'speedup':>9}  batches (seed 0)")
    for preset, rows in results.items():
        seq = rows["sequential"]
        seq_time, seq_acc = statistics.fmean(c.seconds for c in seq), statistics.fmean(c.accuracy for c in seq)
        eligible = {
            name: statistics.fmean(c.seconds for c in cells)
            for name, cells in rows.items()
            if name.startswith("fixed") and statistics.fmean(c.accuracy for c in cells) >= seq_acc - 1.0
        }
        best = min(eligible, key=eligible.get) if eligible else None
        for name, cells in rows.items():
            mean_time = statistics.fmean(c.seconds for c in cells)
            mark = " <- best" if name == best else ""
            print(f"{preset:<11}{name:<16}{mean_time:>12,.0f}{statistics.fmean(c.accuracy for c in cells):>10.2f}"
                  f"{seq_time / mean_time:>9.1f}  {cells[0].batches}{mark}")
        auto = rows["auto"]
        auto_time = statistics.fmean(c.seconds for c in auto)
        ratio = auto_time / eligible[best] if best is not None else float("inf")
        gap = seq_acc - statistics.fmean(c.accuracy for c in auto)
        speedup = min(s.seconds / a.seconds for s, a in zip(seq, auto))
        print(f"# {preset}: best fixed = {best} ({eligible.get(best, float('nan')):,.0f} s); auto/best = {ratio:.3f}; "
              f"accuracy gap = {gap:+.2f} points; slowest auto cell speedup = {speedup:.1f}x")
        worst_ratio, worst_gap, min_speedup = max(worst_ratio, ratio), max(worst_gap, gap), min(min_speedup, speedup)
    return f"auto_time_vs_best={worst_ratio:.3f} auto_acc_gap={worst_gap:.2f} auto_speedup_min={min_speedup:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description="Fixed batch sizes vs the live planner vs the paper's rule")
    parser.add_argument("--presets", nargs="+", default=["h200-70b", "hosted-api", "flat"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10, 20, 40, 80, 160, 320])
    parser.add_argument("--time-scale", type=float, default=0.01, help="for the batched runs")
    args = parser.parse_args()
    print(summarise(run(sweep(args))))


if __name__ == "__main__":
    main()
