"""What a learner declares of each role it calls: :class:`Role`.

A *role* is a kind of model call (ACE's generator, GEPA's proposer, TextGrad's loss...). Each
learner declares its roles once (``LearnerKind.roles``); everything role-shaped in the engine
reads these declarations and knows no role by name: which endpoint serves a role, how it samples,
how its calls are counted and kept apart in the ledger, ``calls.json`` and ``errors.jsonl``.

Every role belongs to a *pool*, the part it plays (:data:`POOLS`): ``serve`` (the model that
serves the learned prompt: the generator, GEPA's solver, TextGrad's forward pass, an agent's
turns), ``evaluate`` (a model that judges rollouts: TextGrad's loss), ``propose`` (a model that
proposes edits: reflector, curator, reducer, GEPA's proposer...) or ``simulate`` (a model that plays
a part of a task's environment: the tau2 tasks' ``user``, the customer an agent talks to). A task
declares the roles its environment calls in a ``roles`` attribute (:func:`task_roles`); they are
configured, counted and kept apart as every learner's roles are. A role without an endpoint of
its own is served by its pool's (``[endpoints.propose]``), else the default one. The pools are
what a report means by "who proposed, who evaluated, who served".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import msgspec

from combee_fast.errors import ConfigError

POOLS = ("serve", "evaluate", "propose", "simulate")
"""The parts a role plays (module docstring), in the order reports show them."""

DEFAULT_ENDPOINT = "default"
"""The key of the endpoint (and sampling table) of every role without one of its own or of its pool."""


class Role(msgspec.Struct, frozen=True):
    """One role a learner calls.

    ``name``: what configuration calls it (``[endpoints.loss]``, ``--role-endpoint loss=URL``,
    ``[sampling.loss]``). ``request_name``: the name its requests carry (the ``X-Combee-Role``
    header, the node of the seed tree, the key in ``calls.json`` and the ledger; default
    ``name``), unique across learners; configuration may use it too. ``pool``: one of
    :data:`POOLS`. ``max_tokens``: its replies' token limit unless ``[sampling.<role>]`` sets
    one; ``temperature``: its own default (None: the run's). ``prompts``: its prompt files
    (package-relative paths, for documentation). ``fits_context``: its prompt holds the learned
    context, which is cut to fit the endpoint's context length and trimmed on a context error
    (counted as ``trimmed`` in ``calls.json``). ``diverse``: a diversity remedy of the batch
    planner raises its temperature (the role whose replies should differ: ACE's reflector).
    """

    name: str
    pool: str
    max_tokens: int
    request_name: str | None = None
    temperature: float | None = None
    prompts: tuple[str, ...] = ()
    fits_context: bool = False
    diverse: bool = False

    def __post_init__(self) -> None:
        if self.pool not in POOLS:
            raise ConfigError(f"role {self.name!r}: pool must be one of {', '.join(POOLS)}, got {self.pool!r}")
        if self.max_tokens < 1:
            raise ConfigError(f"role {self.name!r}: max_tokens must be >= 1, got {self.max_tokens}")

    @property
    def key(self) -> str:
        """The name its requests carry (``request_name``, else ``name``)."""
        return self.request_name or self.name

    def names(self) -> tuple[str, ...]:
        """What configuration may call it: ``name`` and ``request_name``."""
        return (self.name,) if self.request_name in (None, self.name) else (self.name, self.key)

    @property
    def lookup_keys(self) -> tuple[str, ...]:
        """The keys of an ``[endpoints.*]`` or ``[sampling.*]`` table that apply to it, most
        specific first: its names, then its pool (``default`` applies to every role)."""
        return (*self.names(), self.pool)


def role_keys(roles: Iterable[Role]) -> tuple[str, ...]:
    """The request names of ``roles``, in order."""
    return tuple(role.key for role in roles)


def first_of(roles: Sequence[Role], pool: str) -> Role:
    """The first of ``roles`` in ``pool``; ConfigError when there is none."""
    for role in roles:
        if role.pool == pool:
            return role
    raise ConfigError(f"no role in pool {pool!r} among {', '.join(role.name for role in roles)}")


def configurable_names(roles: Iterable[Role]) -> set[str]:
    """Every key an ``[endpoints.*]`` or ``[sampling.*]`` table may have for ``roles``: their
    names, their pools and ``default``."""
    return {DEFAULT_ENDPOINT, *POOLS, *(name for role in roles for name in role.names())}


def check_role_tables(roles: Sequence[Role], *, endpoints: Iterable[str], sampling: Iterable[str],
                      learner: str) -> None:
    """ConfigError naming the unknown keys of the ``endpoints`` and ``sampling`` tables (a role
    ``learner`` does not call, or a typo)."""
    allowed = configurable_names(roles)
    for table, keys in (("endpoints", endpoints), ("sampling", sampling)):
        unknown = sorted(set(keys) - allowed)
        if unknown:
            raise ConfigError(f"{table} for unknown roles: {', '.join(unknown)} (learner {learner!r} calls "
                              f"{', '.join(role.name for role in roles)}; pools: {', '.join(POOLS)}; or default)")


def task_roles(task: object) -> tuple[Role, ...]:
    """The roles ``task``'s environment calls: its ``roles`` attribute (none by default), each a
    :class:`Role` or a mapping of a Role's fields (a task sits below this layer and names no Role
    type); ConfigError naming the task when one is neither."""
    roles = []
    for role in tuple(getattr(task, "roles", ()) or ()):
        if isinstance(role, Mapping):
            try:
                role = msgspec.convert(dict(role), Role)
            except msgspec.ValidationError as exc:
                raise ConfigError(f"task {getattr(task, 'name', task)!r}: role {dict(role)!r}: {exc}") from None
        if not isinstance(role, Role):
            raise ConfigError(f"task {getattr(task, 'name', task)!r}: roles must be Role values, got {role!r}")
        roles.append(role)
    return tuple(roles)
