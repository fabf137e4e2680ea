"""The ``plan`` subcommand: check an experiment card and say what it pre-registers.

``combee_fast/cli.py`` calls :func:`register`. ``combee plan CARD`` prints a short summary and
exits 0 for a complete, consistent card; otherwise it prints one line listing every missing field
and every inconsistency, and exits 2. It never fills a field in.
"""

from __future__ import annotations

import argparse
import sys

from combee_fast.errors import CombeeError
from combee_fast.run.usage import read_usage, usage_path
from combee_fast.verify.card import card_summary, load_card

EXIT_USAGE = 2


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``plan`` subcommand; its handler is ``args.handler(args) -> int``."""
    parser = subparsers.add_parser(
        "plan", help="check an experiment card (TOML): every field present, splits pinned, roles sound",
        description="Check an experiment card and print what it pre-registers.",
    )
    parser.add_argument("card", help="the experiment card, a TOML file")
    parser.set_defaults(handler=run_plan)


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
        print(f"combee plan: error: {exc}", file=sys.stderr)
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
