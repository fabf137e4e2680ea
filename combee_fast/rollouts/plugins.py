"""Your own agent and environment, named ``package.module:factory`` (``--agent``, ``--env``).

The module is imported and ``factory`` looked up only when the run starts (in each worker
process, for the process backend), the working directory on the import path
(:func:`combee_fast.plugins.load_path`); a path that does not import, or names nothing
callable, is one :class:`~combee_fast.errors.ConfigError` line naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from combee_fast.errors import ConfigError
from combee_fast.plugins import load_path


def load_factory(path: str, *, what: str) -> Callable[..., Any]:
    """The callable that ``path`` (``package.module:name``) names; ``what`` says what it is for."""
    factory = load_path(path, what=what)
    if not callable(factory):
        raise ConfigError(f"{what} {path!r}: {path.partition(':')[0]} has no callable {path.partition(':')[2]!r}")
    return factory
