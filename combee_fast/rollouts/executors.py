"""Rollout executors by name (``executor.backend``), each imported only when chosen.

    local     combee_fast.rollouts.local     episodes on the engine's loop
    process   combee_fast.rollouts.process   a pool of worker processes
    ray       combee_fast.rollouts.ray_actors Ray actors, here or on a cluster (the ``ray`` extra)

A backend is a class taking ``(spec, chat, task=)`` (:class:`~combee_fast.rollouts.spec.RolloutSpec`,
:class:`~combee_fast.rollouts.chat.AgentChat`, the session's task) that implements
:class:`~combee_fast.protocols.RolloutExecutor`. :data:`BACKENDS` is the one list of backends:
the shipped ones, every entry point of group ``combee_fast.executors`` of an installed package, and
any ``package.module:Class`` (:mod:`combee_fast.plugins`); ``executor.backend`` is checked when
its backend is opened, and an unknown or broken one is one ConfigError line naming it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from combee_fast.mcp import ENV_PREFIX
from combee_fast.plugins import EXECUTORS_GROUP, Registry, adopt_callable
from combee_fast.protocols.rollouts import RolloutExecutor
from combee_fast.rollouts.chat import AgentChat
from combee_fast.rollouts.spec import RolloutSpec

BACKENDS: Registry[Callable[..., Any]] = Registry("executor.backend", EXECUTORS_GROUP, {
    "local": "combee_fast.rollouts.local:LocalExecutor",
    "process": "combee_fast.rollouts.process:ProcessExecutor",
    "ray": "combee_fast.rollouts.ray_actors:RayExecutor",
}, adopt_callable("executor.backend"))
"""Every rollout executor backend, by name (module docstring)."""


def backend(name: str) -> Callable[..., Any]:
    """The executor class of backend ``name`` (its module imported now); ConfigError if unknown."""
    return BACKENDS.load(name)


@contextlib.asynccontextmanager
async def open_executor(spec: RolloutSpec, chat: AgentChat, *, task: Any = None) -> AsyncIterator[RolloutExecutor]:
    """The started executor of ``spec.executor.backend``; closed on exit. With an MCP environment,
    says first where its servers run (:func:`~combee_fast.mcp.environment.say_where_servers_run`)."""
    if spec.agent.env is not None and spec.agent.env.startswith(ENV_PREFIX):
        from combee_fast.mcp.environment import say_where_servers_run  # the SDK: the tau2 extra

        say_where_servers_run(spec.agent.env)
    executor = backend(spec.executor.backend)(spec, chat, task=task)
    await executor.start()
    try:
        yield executor
    finally:
        await executor.close()
