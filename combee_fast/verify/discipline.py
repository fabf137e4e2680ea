"""Runs made under an experiment card: the run's splits must be the card's, and every use of
a split is appended to the card's usage record (in the state directory: :mod:`combee_fast.record.usage`).

``learn --card CARD`` learns on the card's train split and selects on its selection split (a run
naming any other split is refused), counts GPU-seconds with the GPU count of the card's
hardware class it runs on, and stops cleanly once a limit of the card's budget is spent (every
learner; it says which limit bound; a resumed run keeps its card's budget); ``eval --card CARD`` records that it reported a score on a
split. The engine itself (:meth:`combee_fast.session.Session.train`) refuses test-split use and
writes the record; this module turns a card into what the engine takes.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from combee_fast.config import SessionConfig
from combee_fast.errors import ConfigError
from combee_fast.protocols.tasks import Task
from combee_fast.record.usage import SplitUsage, append_usage, usage_entry, usage_path
from combee_fast.tasks.base import Split
from combee_fast.tasks.heldout import check_use
from combee_fast.tasks.splits import parse_split_spec
from combee_fast.verify.budget import BudgetGuard
from combee_fast.verify.card import Card, load_card


def _check_task(card: Card, config: SessionConfig, path: str | Path) -> None:
    if (config.task.name, config.task.options) != (card.task.name, card.task.options):
        raise ConfigError(
            f"card {path} is for task {card.task.name!r} with options {card.task.options}; "
            f"the run names task {config.task.name!r} with options {config.task.options}"
        )


class CardRun(NamedTuple):
    """What :meth:`Session.train` takes for a run under a card: its usage record and roles, the
    GPU count of the card's hardware class the run is on (None: the run is on none of them), and
    the card's budget as a stop rule (the run stops cleanly once a limit is spent)."""

    usage: SplitUsage
    gpus: int | None
    stop: BudgetGuard


def learn_under_card(path: str | Path, config: SessionConfig, *, run: str) -> CardRun:
    """What :meth:`Session.train` takes for a ``learn`` run of ``config`` under the card at ``path``.

    :class:`ConfigError` when the card is incomplete or inconsistent, names another task, or the
    run's train and validation splits are not the card's train and selection splits (a slice of
    them is accepted).
    """
    card = load_card(path)
    _check_task(card, config, path)
    for role, spec, flag in (("train", config.task.train_split, "--train-split"),
                             ("selection", config.task.val_split, "--val-split")):
        declared = card.split_of_role(role).name
        if spec != declared and parse_split_spec(spec, task=config.task.name).name != declared:
            raise ConfigError(f"card {path}: its {role} split is {declared!r}; the run names {flag} {spec!r}")
    usage = SplitUsage(record=str(usage_path(path)), roles=card.roles(), card_text=Path(path).read_text(),
                       run=run, command="learn")
    hardware = card.hardware_for(config)
    return CardRun(usage, None if hardware is None else hardware.gpu_count, BudgetGuard(card.budget))


def card_budget(path: str | Path) -> BudgetGuard:
    """The budget of the card at ``path`` (e.g. a run directory's ``card.toml``) as a stop rule."""
    return BudgetGuard(load_card(path).budget)


def record_report(path: str | Path, config: SessionConfig, task: Task, split: Split, *, run: str) -> str:
    """Append that ``run`` reported a score on ``split`` to the usage record of the card at
    ``path``; returns the split's role. :class:`ConfigError` for a bad card or another task."""
    card = load_card(path)
    _check_task(card, config, path)
    role = check_use(task, split.manifest.split, "report", card.roles())
    append_usage(usage_path(path), [usage_entry(split.manifest, role=role, use="report", run=run, command="eval")])
    return role
