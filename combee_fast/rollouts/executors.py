"""Rollout executors by name (``executor.backend``), each imported only when chosen.

    local     combee_fast.rollouts.local     episodes on the engine's loop
    process   combee_fast.rollouts.process   a pool of worker processes
    ray       combee_fast.rollouts.ray_actors Ray actors, here or on a cluster (the ``ray`` extra)

A backend is a class taking ``(spec, chat, task=)`` (:class:`~combee_fast.rollouts.spec.RolloutSpec`,
:class:`~combee_fast.rollouts.chat.AgentChat`, the session's task) that implements
:class:`~combee_fast.protocols.RolloutExecutor`. A new backend is one module and one line here.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator
from typing import Any

from combee_fast.errors import ConfigError
from combee_fast.protocols.rollouts import RolloutExecutor
from combee_fast.rollouts.chat import AgentChat
from combee_fast.rollouts.spec import RolloutSpec

BACKENDS = {
    "local": "combee_fast.rollouts.local:LocalExecutor",
    "process": "combee_fast.rollouts.process:ProcessExecutor",
    "ray": "combee_fast.rollouts.ray_actors:RayExecutor",
}


def backend(name: str) -> type[Any]:
    """The executor class of backend ``name`` (its module imported now); ConfigError if unknown."""
    where = BACKENDS.get(name)
    if where is None:
        raise ConfigError(f"unknown executor.backend {name!r}; choose one of: {', '.join(BACKENDS)}")
    module, _, cls = where.partition(":")
    return getattr(importlib.import_module(module), cls)


@contextlib.asynccontextmanager
async def open_executor(spec: RolloutSpec, chat: AgentChat, *, task: Any = None) -> AsyncIterator[RolloutExecutor]:
    """The started executor of ``spec.executor.backend``; closed on exit."""
    executor = backend(spec.executor.backend)(spec, chat, task=task)
    await executor.start()
    try:
        yield executor
    finally:
        await executor.close()
