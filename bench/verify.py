"""The verification run: verify Combee at batch 40 and naive batching at batch 100 against the
Formula card (seeds 0-2 x presets h200-70b and hosted-api, test split, report only).

    python bench/verify.py [--card cards/formula.toml] [--cache runs/baseline-cache] [--out runs/bench-verify]

The serial baseline (sequential ACE) runs at ``VerifyConfig.serial_time_scale`` and is cached in
``--cache``: a second run reuses it. The batched methods run at the default time scale. The card
is copied into ``--out`` first, so the usage record is written there, not beside the shipped card.
Last line: ``verdict_combee=<PASS|FAIL> verdict_naive=<PASS|FAIL> min_speedup=<Combee's smallest
speedup over the cells> max_quality_drop=<Combee's largest test-accuracy drop, points>
bootstrap_ms=<the statistics of both verifications, milliseconds>``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from combee_fast.config import SessionConfig, TrainConfig, VerifyConfig
from combee_fast.engine.loop import run
from combee_fast.verify.card import load_card
from combee_fast.verify.report import verify_report
from combee_fast.verify.verification import Verification, verify_config


async def main(args: argparse.Namespace) -> tuple[Verification, Verification]:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    card_path = out / "card.toml"
    shutil.copy(args.card, card_path)
    card = load_card(card_path)
    settings = VerifyConfig(baseline_cache=args.cache)
    started = time.perf_counter()

    def progress(line: str) -> None:
        print(f"  [{time.perf_counter() - started:6.1f} s] {line}", file=sys.stderr, flush=True)

    combee = await verify_config(card, card_path, SessionConfig(method="combee", train=TrainConfig(batch_size=40)),
                                 settings=settings, label="combee-b40", runs_dir=out / "runs", on_cell=progress)
    naive = await verify_config(card, card_path, SessionConfig(method="naive", train=TrainConfig(batch_size=100)),
                                settings=settings, label="naive-b100", runs_dir=out / "runs", on_cell=progress)
    report = verify_report(out, [combee, naive], title=f"verify {card.name}: Combee b40 and naive b100")
    print(f"report {report}", file=sys.stderr)
    return combee, naive


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="verify Combee b40 and naive b100 against the Formula card")
    parser.add_argument("--card", default="cards/formula.toml")
    parser.add_argument("--cache", default=VerifyConfig().baseline_cache)
    parser.add_argument("--out", default="runs/bench-verify")
    combee, naive = run(main(parser.parse_args()))
    for result in (combee, naive):
        print(f"{result.label}: {result.verdict.word}; " + "; ".join(
            f"{c.name} {c.speedup:.1f}x {100 * c.difference.difference:+.1f} pts" for c in result.verdict.cells))
        for line in result.verdict.broken:
            print(f"  broken: {line}")
    bootstrap_ms = 1000 * (combee.verdict.bootstrap_seconds + naive.verdict.bootstrap_seconds)
    print(f"verdict_combee={combee.verdict.word} verdict_naive={naive.verdict.word} "
          f"min_speedup={combee.verdict.min_speedup:.2f} max_quality_drop={combee.verdict.max_quality_drop:.1f} "
          f"bootstrap_ms={bootstrap_ms:.0f}")
