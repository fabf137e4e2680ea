"""Your own agent and environment, named ``package.module:factory`` (``--agent``, ``--env``).

The module is imported and ``factory`` looked up only when the run starts (in each worker
process, for the process backend); a path that does not import, or names nothing callable, is
one :class:`~combee_fast.errors.ConfigError` line naming it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from combee_fast.errors import ConfigError


def load_factory(path: str, *, what: str) -> Callable[..., Any]:
    """The callable that ``path`` (``package.module:name``) names; ``what`` says what it is for."""
    module_name, _, name = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module may fail in any way: one line saying so
        raise ConfigError(f"{what} {path!r}: cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ConfigError(f"{what} {path!r}: {module_name} has no callable {name!r}")
    return factory
