"""A command-line flag as an override of one setting: :class:`Flag`, what the core's flags
(:mod:`combee_fast.flags`) and a learner kind's own (its ``flags``, over its ``settings``) are.

A learner's flag names a path inside its own section (``("max_metric_calls",)``); the command
line sets it under ``learners.<name>`` (:meth:`Flag.under`), its help showing the default its
settings type gives.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def batch_size(text: str) -> int | None:
    """argparse type: a positive integer, or None for 'auto' (the planner)."""
    if text == "auto":
        return None
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'auto', got {text!r}") from None


def lookup(table: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in nested tables (None where one is missing)."""
    for key in path:
        table = table.get(key) if isinstance(table, dict) else None
    return table


class Flag:
    """One flag: its names, the config field it sets (a path), how to parse it, its help. A
    ``batch_size`` flag whose default is None shows it as ``auto``."""

    def __init__(self, *names: str, path: tuple[str, ...], help: str, type: Callable[[str], Any] | None = None,
                 value: Any = None, **options: Any) -> None:
        self.names = names
        self.path = path
        self.type = type
        self.value = value  # for store_const flags
        self.help = help
        self.options = options

    def under(self, *prefix: str) -> Flag:
        """The same flag setting ``prefix + path`` (a learner's flag: its section's path)."""
        return Flag(*self.names, path=(*prefix, *self.path), help=self.help, type=self.type, value=self.value,
                    **self.options)

    @property
    def dest(self) -> str:
        return "cfg__" + "__".join(self.path)

    @property
    def metavar(self) -> str:
        """What ``--help`` shows for the flag's value: its long name in capitals (never the
        internal ``dest``), or the given ``metavar``."""
        return self.options.get("metavar") or self.names[0].lstrip("-").upper().replace("-", "_")

    def add_to(self, parser: argparse._ActionsContainer, defaults: dict[str, Any]) -> None:
        """Add the flag to ``parser``; its help shows its value in ``defaults`` (the config's
        defaults, as nested tables)."""
        default = lookup(defaults, self.path)
        shown = "auto" if default is None and (self.type is batch_size or self.path == ("train", "eval_every")) \
            else default
        options = {key: value for key, value in self.options.items() if key != "metavar"}
        kwargs: dict[str, Any] = dict(dest=self.dest, default=argparse.SUPPRESS, **options)
        if self.value is not None:
            kwargs.update(action="store_const", const=self.value, help=self.help)
        else:
            kwargs.update(type=self.type, help=f"{self.help} (default: {shown})")
            if "choices" not in options:
                kwargs["metavar"] = self.metavar
        parser.add_argument(*self.names, **kwargs)
