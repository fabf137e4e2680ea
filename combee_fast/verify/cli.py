"""The ``plan``, ``verify`` and ``diagnose`` subcommands.

``combee_fast/cli.py`` calls :func:`register`. ``combee plan CARD`` prints a short summary and
exits 0 for a complete, consistent card; otherwise it prints one line listing every missing field
and every inconsistency, and exits 2. It never fills a field in.

``combee verify CARD --config X`` runs X and the card's serial baseline in every (seed, hardware
class) cell, writes a report with plots, prints one line ``verdict=PASS|FAIL ...`` and exits 0 on
PASS, 1 on FAIL (the broken cells on stderr), 2 on a usage error. ``combee diagnose CARD`` runs
the serial baseline along a held-out curve and prints ``decision=GO|NO-GO ...`` (exit 0 or 1).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from combee_fast.config import SessionConfig, SimConfig, VerifyConfig, load_config
from combee_fast.errors import CombeeError, ConfigError
from combee_fast.record.usage import read_usage, usage_path
from combee_fast.redact import escape_control
from combee_fast.verify.card import card_summary, load_card
from combee_fast.verify.verification import check_endpoints

if TYPE_CHECKING:
    from combee_fast.tasks.base import Split
    from combee_fast.verify.card import Card, HardwareClass

EXIT_USAGE = 2


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``plan`` subcommand; its handler is ``args.handler(args) -> int``."""
    parser = subparsers.add_parser(
        "plan", help="check an experiment card (TOML): every field present, splits pinned, roles sound",
        description="Check an experiment card and print what it pre-registers.",
    )
    parser.add_argument("card", help="the experiment card, a TOML file")
    parser.set_defaults(handler=run_plan)
    defaults = VerifyConfig()

    verify = subparsers.add_parser(
        "verify", help="run a configuration and the card's serial baseline in every (seed, hardware) cell; PASS/FAIL",
        description="Verify a configuration against an experiment card on its test split.",
    )
    verify.add_argument("card", help="the experiment card, a TOML file")
    verify.add_argument("--config", action="append", required=True, metavar="FILE",
                        help="a run configuration (TOML or JSON) to verify; repeat to verify several")
    verify.add_argument("--label", action="append", help="a name per --config (default: method-b<batch>)")
    verify.add_argument("--seeds", type=_seeds, default=defaults.seeds, help="comma-separated seeds (at least 3)")
    verify.add_argument("--cache", default=defaults.baseline_cache, help="folder of cached serial-baseline cells")
    verify.add_argument("--serial-time-scale", type=float, default=defaults.serial_time_scale,
                        help="real seconds per simulated second of the serial baseline")
    verify.add_argument("--resamples", type=int, help="bootstrap resamples per interval (default 10000)")
    verify.add_argument("--sim-world", help="task-world variant for every configuration and its baseline (default: "
                        "each configuration's sim.world), e.g. noisy: answers drawn per call")
    verify.add_argument("--out", help="report folder (default: runs/verify-<card>-<date-time>)")
    verify.add_argument("--quiet", action="store_true", help="no progress lines")
    verify.set_defaults(handler=run_verify)

    diagnose = subparsers.add_parser(
        "diagnose", help="run the card's serial baseline along a held-out curve: plateau? above empty? GO/NO-GO",
        description="Diagnose whether the card's serial baseline is worth parallelising.",
    )
    diagnose.add_argument("card", help="the experiment card, a TOML file")
    diagnose.add_argument("--hardware", help="the card's hardware class to run on (default: its first)")
    diagnose.add_argument("--seed", type=int, default=SessionConfig().seed)
    diagnose.add_argument("--epochs", type=int, help="passes over the train split (the card's budget may stop sooner)")
    diagnose.add_argument("--checkpoints", type=int, default=defaults.checkpoints, help="held-out evaluations")
    diagnose.add_argument("--serial-time-scale", type=float, default=defaults.serial_time_scale,
                          help="real seconds per simulated second of the serial baseline")
    diagnose.add_argument("--sim-world", default=SimConfig().world,
                          help="task-world variant: default, or uninformative (reflections carry no information)")
    diagnose.add_argument("--resamples", type=int, help="bootstrap resamples per interval (default 10000)")
    diagnose.add_argument("--out", help="report folder (default: runs/diagnose-<card>-<date-time>)")
    diagnose.add_argument("--quiet", action="store_true", help="no progress lines")
    diagnose.set_defaults(handler=run_diagnose)


def run_plan(args: argparse.Namespace) -> int:
    """Print the card's summary and its usage record (exit 0), or every problem on one line (exit 2).

    A card saying its eval set was never used to tune is refused when its usage record shows a
    test split used for anything but a report.
    """
    try:
        card = load_card(args.card)
        record = usage_path(args.card)
        entries = read_usage(record)
    except CombeeError as exc:
        print(f"combee plan: error: {escape_control(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    misused = [e for e in entries if e.role == "test" and e.use != "report"]
    if misused and not card.eval_set.ever_used_to_tune:
        first = misused[0]
        print(f"combee plan: error: card {args.card} says its eval set was never used to tune, but {record} "
              f"records {len(misused)} such uses of a test split (first: run {first.run} used {first.split} "
              f"to {first.use})", file=sys.stderr)
        return EXIT_USAGE
    for line in card_summary(card):
        print(line)
    uses: dict[tuple[str, str], int] = {}
    for entry in entries:
        uses[(entry.split, entry.use)] = uses.get((entry.split, entry.use), 0) + 1
    counted = ", ".join(f"{split} {use} x{count}" for (split, use), count in sorted(uses.items()))
    print(f"usage record {record}: " + (counted if entries else "no run has used these splits yet"))
    return 0


def _seeds(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must be comma-separated integers, got {text!r}") from None


def _run_async(name: str, work: Coroutine[Any, Any, int]) -> int:
    from combee_fast.engine.loop import run

    try:
        return run(work)
    except CombeeError as exc:
        work.close()
        print(f"combee {name}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def run_verify(args: argparse.Namespace) -> int:
    """Verify every ``--config`` against the card; exit 0 when all PASS, 1 otherwise, 2 on a usage error."""
    try:
        card = load_card(args.card)
        settings = VerifyConfig(seeds=args.seeds, serial_time_scale=args.serial_time_scale, baseline_cache=args.cache)
        configs = [load_config(path) for path in args.config]
        for path, config in zip(args.config, configs):
            try:
                check_endpoints(card, config)
            except ConfigError as exc:
                raise ConfigError(f"--config {path}: {exc}") from None
        if args.sim_world is not None:
            configs = [msgspec.structs.replace(c, sim=msgspec.structs.replace(c.sim, world=args.sim_world)) for c in configs]
        labels = args.label or []
        if labels and len(labels) != len(configs):
            raise ConfigError(f"give one --label per --config ({len(configs)}), got {len(labels)}")
    except CombeeError as exc:
        print(f"combee verify: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out or f"runs/verify-{card.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    return _run_async("verify", _verify(args, card, settings, configs, labels, out))


async def _verify(args: argparse.Namespace, card: Card, settings: VerifyConfig,
                  configs: list[SessionConfig], labels: list[str], out: Path) -> int:
    from combee_fast.native.bootstrap import DEFAULT_RESAMPLES
    from combee_fast.verify.report import verify_report
    from combee_fast.verify.verification import verify_config

    def progress(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    from combee_fast.record.provenance import provenance

    record = provenance(seed=None, splits=[split.manifest for split in _card_splits(card)])
    results = []
    for index, config in enumerate(configs):
        label = labels[index] if labels else None
        results.append(await verify_config(
            card, args.card, config, settings=settings, label=label, resamples=args.resamples or DEFAULT_RESAMPLES,
            runs_dir=out / "runs", on_cell=progress))
    report = verify_report(out, results, title=f"verify {card.name}", record=record)
    for result in results:
        for line in result.verdict.broken:
            print(f"{result.label}: broken cell {line}", file=sys.stderr)
    verdict = results[0].verdict if len(results) == 1 else None
    words = " ".join(f"verdict_{r.label}={r.verdict.word}" for r in results) if verdict is None else \
        f"verdict={verdict.word}"
    print(f"{words} min_speedup={min(r.verdict.min_speedup for r in results):.2f} "
          f"max_quality_drop={max(r.verdict.max_quality_drop for r in results):.1f} report={report}")
    return 0 if all(r.verdict.passed for r in results) else 1


def _card_splits(card: Card) -> list[Split]:
    """The card's splits, loaded (for the provenance's split hashes)."""
    from combee_fast.tasks.registry import get_task

    task = get_task(card.task.name, **card.task.options)
    return [task.load(split.name) for split in card.eval_set.splits]


def run_diagnose(args: argparse.Namespace) -> int:
    """Diagnose the card's serial baseline; exit 0 on GO, 1 on NO-GO, 2 on a usage error."""
    try:
        card = load_card(args.card)
        settings = VerifyConfig(serial_time_scale=args.serial_time_scale, checkpoints=args.checkpoints)
        names = [h.name for h in card.hardware]
        if args.hardware is not None and args.hardware not in names:
            raise ConfigError(f"card {args.card} has no hardware class {args.hardware!r}; it has {', '.join(names)}")
    except CombeeError as exc:
        print(f"combee diagnose: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    hardware = next((h for h in card.hardware if h.name == args.hardware), card.hardware[0])
    out = Path(args.out or f"runs/diagnose-{card.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    return _run_async("diagnose", _diagnose(args, card, hardware, settings, out))


async def _diagnose(args: argparse.Namespace, card: Card, hardware: HardwareClass, settings: VerifyConfig,
                    out: Path) -> int:
    from combee_fast.native.bootstrap import DEFAULT_RESAMPLES
    from combee_fast.verify.diagnose import diagnose
    from combee_fast.verify.fill import filled_card
    from combee_fast.verify.report import diagnose_report

    from combee_fast.record.provenance import provenance

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    record = provenance(seed=args.seed, splits=[split.manifest for split in _card_splits(card)])
    result = await diagnose(card, args.card, out, hardware=hardware, seed=args.seed, settings=settings,
                            world=args.sim_world, epochs=args.epochs, resamples=args.resamples or DEFAULT_RESAMPLES,
                            on_progress=None if args.quiet else progress)
    report = diagnose_report(out, result, record=record)
    (out / "card.diagnosed.toml").write_text(filled_card(Path(args.card).read_text(), result))
    for reason in result.reasons():
        print(f"  {reason}", file=sys.stderr)
    print(f"decision={result.decision} plateau={'yes' if result.plateau_reached else 'no'} "
          f"above_empty={'yes' if result.above_empty else 'no'} converged_score={result.converged_score:.3f} "
          f"rollouts_to_converge={result.rollouts_to_converge} report={report}")
    return 0 if result.go else 1
