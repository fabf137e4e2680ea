"""Learning methods over any :class:`~combee_fast.protocols.Learner`: one strategy per module,
looked up by name in :data:`METHODS`.

- :mod:`.sequential`: batch 1, every call on the critical path (the serial baseline).
- :mod:`.naive`: parallel map, one proposer call over the whole batch.
- :mod:`.combee`: the paper's map, shuffle, parallel proposers, reduce tree.
- :mod:`.base`: what a step and an evaluation return (:class:`StepResult`, :class:`EvalResult`).

Each factory takes ``(learner, map_config, combee_config, seed=)``. A learner whose step is not
one of these (GEPA's search iteration) implements :class:`~combee_fast.protocols.Method` in its
own package; every learner registers its methods in :mod:`combee_fast.learners`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from combee_fast.config import CombeeConfig, MapConfig
from combee_fast.methods.base import Applied, EvalResult, StepResult, StepShape
from combee_fast.methods.combee import Combee
from combee_fast.methods.naive import Naive
from combee_fast.methods.sequential import Sequential
from combee_fast.protocols.learning import Learner
from combee_fast.protocols.running import Method

MethodFactory = Callable[..., Method[Any]]

METHODS: dict[str, MethodFactory] = {
    "sequential": lambda learner, map_config, combee, *, seed: Sequential(learner, map_config),
    "naive": lambda learner, map_config, combee, *, seed: Naive(learner, map_config),
    "combee": lambda learner, map_config, combee, *, seed: Combee(learner, map_config, combee, seed=seed),
}


def build_method(name: str, learner: Learner[Any, Any, Any], map_config: MapConfig, combee: CombeeConfig, *,
                 seed: int, shown: str | None = None) -> Method[Any]:
    """The method ``name`` on ``learner``, called ``shown`` in ledgers and summaries (default:
    ``name``); :class:`~combee_fast.errors.ConfigError` if unknown."""
    from combee_fast.errors import ConfigError

    factory = METHODS.get(name)
    if factory is None:
        raise ConfigError(f"unknown method {name!r}; choose one of: {', '.join(METHODS)}")
    method = factory(learner, map_config, combee, seed=seed)
    if shown is not None:
        method.name = shown
    return method


__all__ = ["METHODS", "Applied", "Combee", "EvalResult", "Naive", "Sequential", "StepResult", "StepShape",
           "build_method"]
