"""Does the online learner's memory stay flat over a server's life?

Submits ``--rollouts`` finished rollouts (made from the Formula train split, one generation each,
then renumbered) to an :class:`OnlineLearner` on the in-process simulated endpoint, and samples
the process's resident memory and the number of live Python objects every ``--every`` rollouts.
Nothing is kept by the caller: tickets are dropped, as a server that does not wait would.
With ``--tracemalloc`` every allocation is traced and the lines that gained the most memory over
the second half are printed before the last line (what grows, and from where).

    python bench/online_memory.py --rollouts 100000
    python bench/online_memory.py --rollouts 20000 --every 5000 --tracemalloc

Last line: ``rss_mb_first=<at the first sample> rss_mb_half=<at half> rss_mb_end=<at the end>
rss_growth_second_half_mb=<end - half> objects_growth_second_half=<> batches_kept=<> bullets=<>``.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
import tracemalloc

import msgspec

from combee_fast.ace.calls import AceCalls
from combee_fast.config import OnlineConfig, SessionConfig, SimConfig, TaskConfig
from combee_fast.engine.loop import run
from combee_fast.ace.playbook import Playbook
from combee_fast.embedded.online import OnlineLearner
from combee_fast.session import open_session


def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def measure(args: argparse.Namespace) -> tuple[list[tuple[int, float, int, int, int]], list[tracemalloc.Snapshot]]:
    config = SessionConfig(task=TaskConfig(train_split="train", val_split="val[0:10]"),
                           sim=SimConfig("flat", args.time_scale))
    samples: list[tuple[int, float, int, int, int]] = []
    snapshots: list[tracemalloc.Snapshot] = []
    async with open_session(config) as session:
        seeds = [await AceCalls(session.calls).generate(e, "", epoch=0) for e in session.train_split.examples]
        online = OnlineConfig(batch_size=args.batch_size, max_wait_s=0.05,
                              **({} if args.keep is None else {"keep_batches": args.keep}))
        async with OnlineLearner(session.calls, Playbook.empty(), online) as learner:
            started = time.perf_counter()
            for i in range(args.rollouts):
                await learner.submit(msgspec.structs.replace(seeds[i % len(seeds)], round=i // len(seeds)))
                if (i + 1) % args.every == 0:
                    gc.collect()
                    samples.append((i + 1, rss_mb(), len(gc.get_objects()), len(learner.batches), len(learner.artifact)))
                    if args.tracemalloc and i + 1 in (args.every * (args.rollouts // args.every // 2), args.rollouts):
                        snapshots.append(tracemalloc.take_snapshot())
                    print(f"{i + 1:>8} rollouts  rss {samples[-1][1]:8.1f} MB  objects {samples[-1][2]:>9,}  "
                          f"batches kept {samples[-1][3]:>5}  bullets {samples[-1][4]:>5}  "
                          f"{time.perf_counter() - started:6.0f} s", flush=True)
    return samples, snapshots


def main() -> None:
    parser = argparse.ArgumentParser(description="online learner memory over many rollouts")
    parser.add_argument("--rollouts", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--keep", type=int, default=None, help="OnlineConfig.keep_batches (default: its default)")
    parser.add_argument("--time-scale", type=float, default=1e-5)
    parser.add_argument("--tracemalloc", action="store_true", help="print what grew over the second half, by line")
    args = parser.parse_args()
    if args.tracemalloc:
        tracemalloc.start()
    samples, snapshots = run(measure(args))
    if len(snapshots) == 2:
        for stat in snapshots[1].compare_to(snapshots[0], "lineno")[:10]:
            print(f"second half: {stat}")
    first, half, end = samples[0], samples[len(samples) // 2 - 1], samples[-1]
    print(f"rss_mb_first={first[1]:.1f} rss_mb_half={half[1]:.1f} rss_mb_end={end[1]:.1f} "
          f"rss_growth_second_half_mb={end[1] - half[1]:.1f} objects_growth_second_half={end[2] - half[2]} "
          f"batches_kept={end[3]} bullets={end[4]}")


if __name__ == "__main__":
    main()
