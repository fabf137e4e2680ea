"""Learning methods, looked up by name: one strategy per module.

- ``sequential`` (:mod:`.sequential`): ACE, batch 1, every call on the critical path.
- ``naive`` (:mod:`.naive`): parallel map, one curator call over the whole batch.
- ``combee`` (:mod:`.combee`): the paper's map, shuffle, parallel curators, reduce tree.

Each factory takes ``(learner, map_config, combee_config, workers=, seed=)``.

The GEPA methods (``gepa``, ``combee-gepa``) search a system prompt rather than step a playbook;
they are named in :data:`combee_fast.gepa.methods.GEPA_METHODS` and run by the session.
"""

from __future__ import annotations

from collections.abc import Callable

from combee_fast.config import CombeeConfig, MapConfig
from combee_fast.methods.base import Applied, StepResult
from combee_fast.methods.combee import Combee
from combee_fast.methods.naive import Naive
from combee_fast.methods.sequential import Sequential
from combee_fast.protocols import Learner, Method

MethodFactory = Callable[..., Method]

METHODS: dict[str, MethodFactory] = {
    "sequential": lambda learner, map_config, combee, *, workers, seed: Sequential(learner, map_config),
    "naive": lambda learner, map_config, combee, *, workers, seed: Naive(learner, map_config, workers=workers),
    "combee": lambda learner, map_config, combee, *, workers, seed: Combee(
        learner, map_config, combee, workers=workers, seed=seed
    ),
}


def build_method(
    name: str, learner: Learner, map_config: MapConfig, combee: CombeeConfig, *, workers: int, seed: int
) -> Method:
    """The method ``name`` on ``learner``; :class:`~combee_fast.errors.ConfigError` if unknown."""
    from combee_fast.errors import ConfigError

    factory = METHODS.get(name)
    if factory is None:
        raise ConfigError(f"unknown method {name!r}; choose one of: {', '.join(METHODS)}")
    return factory(learner, map_config, combee, workers=workers, seed=seed)


__all__ = ["METHODS", "Applied", "Combee", "Naive", "Sequential", "StepResult", "build_method"]
