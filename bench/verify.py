"""The verification runs: two configurations of one learner verified against the Formula card
(seeds 0-2 x presets h200-70b and hosted-api, test split, report only).

    python bench/verify.py [--suite ace|gepa] [--card cards/formula.toml] [--cache runs/baseline-cache] [--out DIR]

Suites (the first configuration is the one the card's claim is about; the second is its foil):

- ``ace`` (default): Combee at batch 40 and naive batching at batch 100, against sequential ACE.
- ``gepa``: asynchronous Combee-GEPA (``async-gepa``) and the synchronous loop (``combee-gepa``),
  both with the automatic minibatch, against serial GEPA. Every GEPA run, the baseline included,
  makes one pass over the train split (``gepa.max_epochs = 1``, the metric-call budget out of
  reach), as every ACE run makes one epoch: both sides learn from the same examples.

The serial baseline runs at ``VerifyConfig.serial_time_scale`` and is cached in ``--cache``: a
second run reuses it. The card is copied into ``--out`` first, so the usage record is written
there, not beside the shipped card. Last line: ``verdict_<key>=<PASS|FAIL>`` for both
configurations (``combee``/``naive``, ``async``/``sync``), then ``min_speedup=<the first's
smallest speedup over the cells> max_quality_drop=<its largest test-accuracy drop, points>
bootstrap_ms=<the statistics of both verifications, milliseconds>``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from combee_fast.config import SessionConfig, SimConfig, TrainConfig, VerifyConfig
from combee_fast.gepa.settings import GepaConfig
from combee_fast.engine.loop import run
from combee_fast.verify.card import load_card
from combee_fast.verify.report import verify_report
from combee_fast.verify.verification import Verification, verify_config

ONE_PASS = GepaConfig(combee_minibatch="auto", max_epochs=1, max_metric_calls=10**9)
"""GEPA's search for one pass over the train split, the minibatch planned live."""

BATCHED_TIME_SCALE = 1e-4
"""Real seconds per simulated second of the batched GEPA runs (simulated times do not depend on it)."""

Suite = tuple[tuple[str, str, SessionConfig], ...]
SUITES: dict[str, Suite] = {
    "ace": (("combee", "combee-b40", SessionConfig(method="combee", train=TrainConfig(batch_size=40))),
            ("naive", "naive-b100", SessionConfig(method="naive", train=TrainConfig(batch_size=100)))),
    "gepa": (("async", "async-gepa-auto", SessionConfig(method="async-gepa", learners={"gepa": ONE_PASS},
                                                        sim=SimConfig(time_scale=BATCHED_TIME_SCALE))),
             ("sync", "combee-gepa-auto", SessionConfig(method="combee-gepa", learners={"gepa": ONE_PASS},
                                                        sim=SimConfig(time_scale=BATCHED_TIME_SCALE)))),
}
"""Suite name -> (the claimed configuration, its foil), each as (key on the last line, label, configuration)."""


async def main(args: argparse.Namespace) -> list[Verification]:
    out = Path(args.out or f"runs/bench-verify-{args.suite}")
    out.mkdir(parents=True, exist_ok=True)
    card_path = out / "card.toml"
    shutil.copy(args.card, card_path)
    card = load_card(card_path)
    settings = VerifyConfig(baseline_cache=args.cache)
    started = time.perf_counter()

    def progress(line: str) -> None:
        print(f"  [{time.perf_counter() - started:6.1f} s] {line}", file=sys.stderr, flush=True)

    results = [await verify_config(card, card_path, config, settings=settings, label=label, runs_dir=out / "runs",
                                   on_cell=progress)
               for _, label, config in SUITES[args.suite]]
    labels = " and ".join(result.label for result in results)
    report = verify_report(out, results, title=f"verify {card.name}: {labels}")
    print(f"report {report}", file=sys.stderr)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="verify two configurations against the Formula card")
    parser.add_argument("--suite", default="ace", choices=tuple(SUITES))
    parser.add_argument("--card", default="cards/formula.toml")
    parser.add_argument("--cache", default=VerifyConfig().baseline_cache)
    parser.add_argument("--out", default=None, help="report folder (default: runs/bench-verify-<suite>)")
    args = parser.parse_args()
    results = run(main(args))
    for result in results:
        print(f"{result.label}: {result.verdict.word}; " + "; ".join(
            f"{c.name} {c.speedup:.1f}x {100 * c.difference.difference:+.1f} pts" for c in result.verdict.cells))
        for line in result.verdict.broken:
            print(f"  broken: {line}")
    claimed = results[0].verdict
    bootstrap_ms = 1000 * sum(result.verdict.bootstrap_seconds for result in results)
    keys = [key for key, _, _ in SUITES[args.suite]]
    verdicts = " ".join(f"verdict_{key}={result.verdict.word}" for key, result in zip(keys, results))
    print(f"{verdicts} min_speedup={claimed.min_speedup:.2f} max_quality_drop={claimed.max_quality_drop:.1f} "
          f"bootstrap_ms={bootstrap_ms:.0f}")
