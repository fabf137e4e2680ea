"""What every embedded learner does with a submission before taking it in: check it, on the
host, so a malformed rollout is refused at ``submit`` (one :class:`~combee_fast.errors.RolloutError`
naming the rollout and the field) and never reaches the learner or the rollouts batched with it.

A rollout is well formed when it is a :class:`~combee_fast.schema.Rollout` whose every field holds
its declared type (checked by encoding it and decoding the bytes as a ``Rollout``, which must give
the rollout back: the bytes are what a process learner sends its child), its ``round`` is not
negative, its ``version`` (as stamped by ``submit(version=)``) is None or 0 to :data:`MAX_VERSION`
and its ``score`` is None or a number in [0, 1] (the docs' range: a reward of 5.0 or -3.0 would
otherwise weigh as no score of the task's can).
"""

from __future__ import annotations

from typing import Any

import msgspec

from combee_fast.errors import RolloutError
from combee_fast.schema import Rollout

MAX_VERSION = 2 ** 53
"""The largest context version a rollout may name (exact as a float; far past any run's)."""

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Rollout)


def checked(rollout: object) -> bytes:
    """The msgpack bytes of ``rollout`` when it is well formed (module docstring); else
    :class:`RolloutError`."""
    if not isinstance(rollout, Rollout):
        raise RolloutError(f"submit() takes a Rollout, got {_what(rollout)}")
    version = rollout.version
    if isinstance(version, int) and not isinstance(version, bool) and not 0 <= version <= MAX_VERSION:
        raise RolloutError(f"rollout {_name(rollout)} is malformed: version {version} is not 0 to {MAX_VERSION}")
    try:
        data = _encoder.encode(rollout)
        back = _decoder.decode(data)
    except (TypeError, ValueError, OverflowError) as exc:  # msgspec's errors are ValueErrors; TypeError: unencodable
        raise RolloutError(f"rollout {_name(rollout)} is malformed: {exc}") from None
    if back != rollout and (problem := _difference(rollout, back, "$")):  # e.g. a dict where a Struct goes
        raise RolloutError(f"rollout {_name(rollout)} is malformed: {problem}")
    if rollout.round < 0:
        raise RolloutError(f"rollout {_name(rollout)} is malformed: round {rollout.round} is negative")
    if rollout.score is not None and not 0.0 <= rollout.score <= 1.0:
        raise RolloutError(f"rollout {_name(rollout)} is malformed: score {rollout.score} is not in [0, 1]")
    return data


def _difference(given: Any, typed: Any, path: str) -> str:
    """Where ``given`` first differs from ``typed`` (what its bytes decode to), and how."""
    if isinstance(given, (tuple, list)) and isinstance(typed, tuple):
        if len(given) != len(typed):
            return f"{path} holds {len(given)} items, {len(typed)} decode"
        return next((found for i, (a, b) in enumerate(zip(given, typed))
                     if (found := _difference(a, b, f"{path}[{i}]"))), "")
    numeric = isinstance(given, int) and not isinstance(given, bool) and isinstance(typed, float)
    if type(given) is not type(typed) and not numeric:
        return f"{path} is a {type(given).__name__}, not a {type(typed).__name__}"
    if isinstance(given, msgspec.Struct):
        return next((found for name in given.__struct_fields__
                     if (found := _difference(getattr(given, name), getattr(typed, name), f"{path}.{name}"))), "")
    if isinstance(given, dict):
        return next((found for key in given if (found := _difference(given[key], typed.get(key), f"{path}[{key!r}]"))),
                    "")
    return "" if given == typed else f"{path} is {given!r}"


def _name(rollout: Rollout) -> str:
    try:
        return repr(rollout.id)
    except AttributeError:  # its example is not an Example
        return f"of round {rollout.round!r}"


def _what(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60] + '...' if len(text) > 60 else text}"
