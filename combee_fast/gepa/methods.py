"""The GEPA methods by name: how a step reflects, and on how many examples.

- ``gepa``: serial GEPA, ``gepa.minibatch`` examples (3), one reflection call.
- ``combee-gepa``: ``train.batch_size`` examples, Combee's parallel reflection and aggregation.

Candidate selection, acceptance and the budget are the same for both (:mod:`.search`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from combee_fast.config import SessionConfig
from combee_fast.errors import ConfigError
from combee_fast.gepa.calls import Evaluation
from combee_fast.gepa.learner import GepaLearner
from combee_fast.gepa.reflection import CombeeReflection, Reflected, SerialReflection


class Reflection(Protocol):
    """Proposes one component's new text from the parent's graded minibatch."""

    async def reflect(
        self, learner: GepaLearner, current: str, evaluations: Sequence[Evaluation], *, iteration: int
    ) -> Reflected: ...


def _serial(config: SessionConfig) -> tuple[Reflection, int]:
    return SerialReflection(), config.gepa.minibatch


def _combee(config: SessionConfig) -> tuple[Reflection, int]:
    if config.train.batch_size is None:
        raise ConfigError("combee-gepa needs a fixed --batch-size (its minibatch); 'auto' is not supported")
    return CombeeReflection(config.combee, seed=config.seed), config.train.batch_size


GEPA_METHODS: dict[str, Callable[[SessionConfig], tuple[Reflection, int]]] = {
    "gepa": _serial,
    "combee-gepa": _combee,
}


def build_reflection(name: str, config: SessionConfig) -> tuple[Reflection, int]:
    """The reflection strategy and minibatch size of GEPA method ``name``."""
    factory = GEPA_METHODS.get(name)
    if factory is None:
        raise ConfigError(f"unknown GEPA method {name!r}; choose one of: {', '.join(GEPA_METHODS)}")
    return factory(config)
