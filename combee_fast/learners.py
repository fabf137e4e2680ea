"""The registry of learners: each registers once, with the methods it offers.

    learner   methods (the name ledgers and summaries show)
    ace       sequential, naive, combee
    gepa      sequential (gepa), naive (naive-gepa), combee (combee-gepa), async (async-gepa)
    textgrad  sequential (textgrad), naive (naive-textgrad), combee (combee-textgrad)

A run names a learner and a method (``SessionConfig.learner``, ``SessionConfig.method``); the
learner may be left out, and the method's name then says which: a learner's display names
(``gepa``, ``combee-gepa``...) are aliases of its methods, and the plain method names are ACE's.
A new learner is its own package with a :class:`~combee_fast.protocols.LearnerKind`, one line
in :data:`LEARNERS`, a responder of the simulated endpoint (:mod:`combee_fast.sim`) and tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from combee_fast.ace.kind import ACE
from combee_fast.config import SessionConfig
from combee_fast.errors import ConfigError
from combee_fast.gepa.kind import GEPA
from combee_fast.protocols.learning import LearnerKind
from combee_fast.roles.spec import Role
from combee_fast.textgrad.kind import TEXTGRAD

LEARNERS: dict[str, LearnerKind[Any, Any]] = {"ace": ACE, "gepa": GEPA, "textgrad": TEXTGRAD}
"""Every learner, by name."""

DEFAULT_LEARNER = "ace"
"""The learner of the plain method names."""

SERIAL_METHOD = "sequential"
"""Every learner's serial method: the baseline an experiment card names by default."""


class Choice(NamedTuple):
    """A resolved (learner, method): the registered learner and the method's registered name."""

    kind: LearnerKind[Any, Any]
    method: str

    @property
    def shown(self) -> str:
        """The method's name in ledgers and summaries (e.g. ``combee-gepa``)."""
        return self.kind.methods[self.method]


def method_names() -> list[str]:
    """Every method name and alias a run may give, in registry order."""
    names = [*LEARNERS[DEFAULT_LEARNER].methods]
    for kind in LEARNERS.values():
        names += [shown for method, shown in kind.methods.items() if shown != method and shown not in names]
    return names


def resolve(learner: str | None, method: str) -> Choice:
    """The registered pair for ``learner`` (None: the one ``method`` names) and ``method`` (a
    method name or a learner's alias); :class:`ConfigError` naming the choices when it is unknown
    or the two disagree."""
    if learner is not None and learner not in LEARNERS:
        raise ConfigError(f"unknown learner {learner!r}; choose one of: {', '.join(LEARNERS)}")
    for name, kind in LEARNERS.items():
        for registered, shown in kind.methods.items():
            if method == shown and shown != registered:  # an alias names its learner
                if learner is not None and learner != name:
                    raise ConfigError(f"method {method!r} is learner {name!r}'s; the run names learner {learner!r}")
                return Choice(kind, registered)
    kind = LEARNERS[learner or DEFAULT_LEARNER]
    if method not in kind.methods:
        raise ConfigError(f"unknown method {method!r} for learner {kind.name!r}; choose one of: "
                          f"{', '.join(kind.methods) if learner else ', '.join(method_names())}")
    return Choice(kind, method)


def roles_of(config: SessionConfig) -> tuple[Role, ...]:
    """The roles a run of ``config`` calls: its learner's (:func:`resolve` of its learner and method)."""
    return resolve(config.learner, config.method).kind.roles


def serial_baselines() -> dict[str, str]:
    """The serial methods an experiment card may name as its baseline, each with what it runs:
    :data:`SERIAL_METHOD` on the learner of the configuration it is compared with, and each
    learner's own name for its serial method (``gepa``, ``textgrad``) on that learner."""
    names = {SERIAL_METHOD: "the verified configuration's learner, serially; ACE in diagnose"}
    for name, kind in LEARNERS.items():
        shown = kind.methods.get(SERIAL_METHOD, SERIAL_METHOD)
        if shown != SERIAL_METHOD:
            names[shown] = f"learner {name}, serially"
    return names


def serial_baseline(method: str, learner: str | None) -> Choice:
    """The serial baseline a card's ``method`` names (one of :func:`serial_baselines`): on
    ``learner`` (None: ACE) for :data:`SERIAL_METHOD`, on its own learner for a learner's name;
    :class:`ConfigError` naming the choices for any other method."""
    if method not in serial_baselines():
        raise ConfigError(f"serial baseline {method!r} is not a serial method; a card may name "
                          f"{', '.join(serial_baselines())}")
    return resolve(learner if method == SERIAL_METHOD else None, method)


def kind_of_file(path: str | Path) -> tuple[LearnerKind[Any, Any], Any]:
    """The learner whose deployable file ``path`` is, and that deployable loaded (each learner
    asked in registry order; a learner's load error, e.g. a corrupt playbook, is raised)."""
    for kind in LEARNERS.values():
        if (loaded := kind.load(path)) is not None:
            return kind, loaded
    raise ConfigError(f"{path}: not a file of any learner ({', '.join(LEARNERS)})")
