"""Check the task world's calibration against the paper's Fig. 2 (Formula train, 1 epoch, naive
batching): playbook entries learned at each batch size, and held-out accuracy.

    python bench/calibrate_world.py
Last line: entries_b<N>=<learned> ... max_rel_error=<worst |learned/paper - 1|>
"""

from __future__ import annotations

import argparse
import sys

from combee_fast.engine.loop import run
from combee_fast.config import SessionConfig, SimConfig
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.session import open_session

PAPER_ENTRIES = {1: 264, 5: 199, 10: 121, 20: 97, 50: 47, 100: 21}


async def calibrate(seed: int) -> dict[int, tuple[int, float]]:
    config = SessionConfig(seed=seed, sim=SimConfig(preset="flat", time_scale=1e-4))
    learned = {}
    async with open_session(config) as session:
        for batch, paper in PAPER_ENTRIES.items():
            result = await session.train(method="naive", plan=FixedBatch(batch))
            accuracy = result.final_eval.accuracy if result.final_eval else float("nan")
            learned[batch] = (len(result.final), accuracy)
            print(f"batch {batch:>3}: {len(result.final):>4} entries (paper {paper}), val {100 * accuracy:.1f}%",
                  file=sys.stderr)
    return learned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    learned = run(calibrate(args.seed))
    worst = max(abs(learned[b][0] / p - 1) for b, p in PAPER_ENTRIES.items())
    print(" ".join(f"entries_b{b}={learned[b][0]}" for b in PAPER_ENTRIES) + f" max_rel_error={worst:.3f}")


if __name__ == "__main__":
    main()
