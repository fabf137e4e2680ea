"""The registry of learners: each registers once, with the methods it offers.

    learner   methods (the name ledgers and summaries show)
    ace       sequential, naive, combee
    gepa      sequential (gepa), naive (naive-gepa), combee (combee-gepa), async (async-gepa)
    textgrad  sequential (textgrad), naive (naive-textgrad), combee (combee-textgrad)

A run names a learner and a method (``SessionConfig.learner``, ``SessionConfig.method``); the
learner may be left out, and the method's name then says which: a learner's display names
(``gepa``, ``combee-gepa``...) are aliases of its methods, and the plain method names are ACE's.

A learner is its own package with a :class:`~combee_fast.protocols.LearnerKind`: a built-in one
is one line in :data:`LEARNERS`; a user's needs none, being an entry point of group
``combee_fast.learners`` of an installed package or a ``package.module:object`` path given as the
learner (:mod:`combee_fast.plugins`). Every kind is completed (:class:`~combee_fast.kinds.Kind`)
when it is loaded; its simulated-endpoint responders come with it (``responders``: with its roles
in pool ``serve``, they make the role table the simulated worlds play, the built-in learners' and
a plug-in's alike: :func:`role_table`, and a run's, :func:`run_roles`), and so do its own
settings and flags (``settings``, ``flags``: a configuration's ``learners.<name>`` section,
decoded and checked by :func:`settled`; ``combee learn`` offers the flags, :func:`flags_of`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from combee_fast.config import SessionConfig
from combee_fast.errors import ConfigError
from combee_fast.kinds import Kind
from combee_fast.plugins import LEARNERS_GROUP, Registry
from combee_fast.protocols.flags import Flag
from combee_fast.roles.spec import Role
from combee_fast.sim.responders import RoleResponder, RoleTable
from combee_fast.suggest import did_you_mean


def _completed(value: object, name: str) -> Kind:
    """The learner kind ``value`` (an instance, or a class made with no arguments), completed."""
    if isinstance(value, Kind):
        return value
    return Kind(value() if isinstance(value, type) else value, name)


LEARNERS: Registry[Kind] = Registry("learner", LEARNERS_GROUP, {
    "ace": "combee_fast.ace.kind:ACE",
    "gepa": "combee_fast.gepa.kind:GEPA",
    "textgrad": "combee_fast.textgrad.kind:TEXTGRAD",
}, _completed)
"""Every learner, by name (module docstring); each completed when first loaded."""

DEFAULT_LEARNER = "ace"
"""The learner of the plain method names."""

SERIAL_METHOD = "sequential"
"""Every learner's serial method: the baseline an experiment card names by default."""


class Choice(NamedTuple):
    """A resolved (learner, method): the registered learner and the method's registered name."""

    kind: Kind
    method: str

    @property
    def shown(self) -> str:
        """The method's name in ledgers and summaries (e.g. ``combee-gepa``)."""
        return self.kind.methods[self.method]


def _builtin() -> Iterator[Kind]:
    return (LEARNERS.load(name) for name in LEARNERS.builtin)


def method_names() -> list[str]:
    """Every method name and alias a run may give, in registry order."""
    names = [*LEARNERS.load(DEFAULT_LEARNER).methods]
    for kind in LEARNERS.values():
        names += [shown for method, shown in kind.methods.items() if shown != method and shown not in names]
    return names


def _alias_owner(method: str, kinds: Iterable[Kind]) -> Choice | None:
    """The learner among ``kinds`` whose display name of a method is ``method`` (an alias), or None."""
    for kind in kinds:
        for registered, shown in kind.methods.items():
            if method == shown and shown != registered:
                return Choice(kind, registered)
    return None


def resolve(learner: str | None, method: str) -> Choice:
    """The registered pair for ``learner`` (None: the one ``method`` names) and ``method`` (a
    method name or a learner's alias); :class:`ConfigError` naming the choices when it is unknown
    or the two disagree. Installed plugins are loaded only when the names ask for one."""
    if learner is not None:
        kind = LEARNERS.load(learner)
        if method in kind.methods:
            return Choice(kind, method)
        own = _alias_owner(method, [kind])
        if own is not None:
            return own
        other = _alias_owner(method, _builtin()) or _alias_owner(method, LEARNERS.values())
        if other is not None:
            raise ConfigError(f"method {method!r} is learner {other.kind.key!r}'s; the run names learner {learner!r}")
        raise ConfigError(f"unknown method {method!r}{did_you_mean(method, kind.methods)} for learner {kind.key!r}; "
                          f"choose one of: {', '.join(kind.methods)}")
    found = _alias_owner(method, _builtin())
    if found is not None:
        return found
    default = LEARNERS.load(DEFAULT_LEARNER)
    if method in default.methods:
        return Choice(default, method)
    found = _alias_owner(method, LEARNERS.values())
    if found is not None:
        return found
    raise ConfigError(f"unknown method {method!r}{did_you_mean(method, method_names())} for learner "
                      f"{default.key!r}; choose one of: {', '.join(method_names())}")


def _section_owner(name: str, config: SessionConfig) -> Kind:
    """The learner whose settings the section ``learners.<name>`` holds: the run's learner when
    that is its name (a learner given by path), else the learner registered as ``name``."""
    if config.learner is not None and config.learner != name and name not in LEARNERS:
        own = LEARNERS.load(config.learner)
        if own.name == name:
            return own
    if name not in LEARNERS:
        raise ConfigError(f"learners.{name}: no learner is named {name!r} (a section, or a top-level table, names "
                          f"the learner whose settings it holds: {', '.join(LEARNERS)})")
    return LEARNERS.load(name)


def settled(config: SessionConfig, kind: Kind | None = None, *, source: str | None = None) -> SessionConfig:
    """``config`` with every learner's section decoded by its kind (:attr:`~combee_fast.kinds.Kind.settings`),
    checked and written back whole (each default filled in), and ``kind``'s own section added
    with its defaults when it declares settings and the configuration gives none (what a run's
    ``config.json`` then records). ConfigError, naming ``source``, when a section names no learner,
    its learner has no settings, or it does not decode."""
    sections = dict(config.learners)
    try:
        owners = {name: _section_owner(name, config) for name in sections}
        if kind is not None and kind.settings is not None:
            owners.setdefault(kind.name, kind)
        for name, owner in owners.items():
            if owner.settings is None:
                raise ConfigError(f"learners.{name}: learner {owner.key!r} has no settings of its own")
            sections[name] = msgspec.to_builtins(config.learner_settings(name, owner.settings))
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}" if source else str(exc)) from None
    return config if sections == config.learners else msgspec.structs.replace(config, learners=sections)


def flags_of(learners: Iterable[str] = ()) -> list[tuple[Kind, list[Flag]]]:
    """Each built-in learner's own flags, then those of ``learners`` (names or paths, e.g. the one
    ``--learner`` gives; one that does not load is left out), each set under its section
    (``learners.<name>``)."""
    kinds = {kind.key: kind for kind in _builtin()}
    for name in learners:
        try:
            kind = LEARNERS.load(name)
        except ConfigError:  # the run refuses it itself, in one line, once it resolves its learner
            continue
        kinds.setdefault(kind.key, kind)
    return [(kind, [flag.under("learners", kind.name) for flag in kind.flags]) for kind in kinds.values() if kind.flags]


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
    if method == SERIAL_METHOD:
        return resolve(learner, method)
    if method not in serial_baselines():
        raise ConfigError(f"serial baseline {method!r} is not a serial method; a card may name "
                          f"{', '.join(serial_baselines())}")
    return resolve(None, method)


def kind_of_file(path: str | Path, *, learner: str | None = None) -> tuple[Kind, Any]:
    """The learner whose deployable file ``path`` is, and that deployable loaded: ``learner``
    (e.g. the one the run's ``config.json`` names) asked first, then each registered learner in
    registry order (a learner's load error, e.g. a corrupt playbook, is raised)."""
    first = [LEARNERS.load(learner)] if learner is not None else []
    for kind in [*first, *LEARNERS.values()]:
        if (loaded := kind.load(path)) is not None:
            return kind, loaded
    raise ConfigError(f"{path}: not a file of any learner ({', '.join([*([learner] if learner else []), *LEARNERS])})")


def _serving(kind: Kind) -> frozenset[str]:
    """The request names of ``kind``'s roles in pool ``serve`` (an agent's turns are made as them)."""
    return frozenset(role.key for role in kind.roles if role.pool == "serve")


def role_table(learners: Iterable[str] = ()) -> RoleTable:
    """The roles the simulated task worlds play (:class:`~combee_fast.sim.responders.RoleTable`):
    the responders of every built-in learner, in registry order, then of ``learners`` (names or
    paths: a plug-in's), by request role name, and the request names of all their roles in pool
    ``serve`` (a world in which the endpoint plays the agent answers an agent's turn in any of
    them, whoever's learner it is). ConfigError when two learners answer one role by different
    responders (a plug-in's responder for a built-in learner's role would silently take the
    built-in learners' answers over)."""
    found: dict[str, RoleResponder] = {}
    owner: dict[str, str] = {}
    serving: frozenset[str] = frozenset()
    names = dict.fromkeys([*LEARNERS.builtin, *learners])
    for name in names:
        kind = LEARNERS.load(name)
        who = "the built-in learners" if name in LEARNERS.builtin else f"learner {name!r}"
        for role, responder in kind.responders.items():
            if role in found and found[role] is not responder:
                raise ConfigError(f"learner {name!r} declares a responder for role {role!r}, already answered by "
                                  f"{owner[role]}: give its role a name of its own")
            found.setdefault(role, responder)
            owner.setdefault(role, who)
        serving |= _serving(kind)
    return RoleTable(found, serving)


def run_roles(kind: Kind) -> RoleTable:
    """The roles the in-process simulated world of a run of ``kind`` plays: :func:`role_table`'s,
    ``kind``'s own responders answering before any other's (only its calls reach that endpoint)
    and its roles in pool ``serve`` among the serving ones."""
    table = role_table()
    return RoleTable({**table.responders, **kind.responders}, table.serving | _serving(kind))
