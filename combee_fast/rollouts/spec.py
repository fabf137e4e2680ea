"""What a backend needs to run episodes anywhere: :class:`RolloutSpec`, and :func:`build_runtime`.

The spec is a value (it crosses to worker processes, and to other machines): the agent and
environment settings, the executor's limits, the sandbox's, and the task by name and options
(rebuilt where the episodes run). :func:`build_runtime` turns it into a
:class:`~combee_fast.rollouts.episode.Runtime` in the process that runs them: the agent (the
built-in ReAct agent, or the user's factory), the environment factory (the user's, or the
task's own, or none) behind a pool of ``capacity``, and the sandboxes (uids from ``uid_first``).
A user's agent runs each episode on a thread of its own (:mod:`~combee_fast.rollouts.contained`).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from combee_fast.config import AgentConfig, ExecutorConfig, SandboxConfig, TaskConfig
from combee_fast.errors import ConfigError
from combee_fast.mcp import ENV_PREFIX
from combee_fast.protocols.rollouts import Environment, EnvironmentTask
from combee_fast.protocols.tasks import Task
from combee_fast.rollouts.contained import described
from combee_fast.rollouts.episode import ChatFacts, EnvironmentPool, Limits, Runtime
from combee_fast.rollouts.plugins import load_factory
from combee_fast.sandbox.sessions import Sandboxes
from combee_fast.tasks.registry import get_task

BUILT_IN_AGENT = "react"


class RolloutSpec(msgspec.Struct, frozen=True):
    """Everything that builds a runtime (module docstring); ``capacity``: episodes at once."""

    agent: AgentConfig
    executor: ExecutorConfig
    sandbox: SandboxConfig
    task: TaskConfig
    capacity: int

    @property
    def limits(self) -> Limits:
        return Limits(self.agent.max_steps, self.executor.step_timeout_s, self.executor.episode_timeout_s,
                      self.agent.observation_chars)

    @property
    def probes_tools(self) -> bool:
        """Whether the agent needs to know if the endpoint does tool calling."""
        return (self.agent.factory in (None, BUILT_IN_AGENT)) and self.agent.tool_calls == "auto"


def uses_agents(config: AgentConfig, task: Task) -> bool:
    """Whether a run of ``task`` makes its attempts as agent episodes (a task with an environment,
    or an agent or environment given) rather than as one generator call each."""
    return config.enabled or isinstance(task, EnvironmentTask)


def build_runtime(spec: RolloutSpec, facts: ChatFacts, sandboxes: Sandboxes, task: Task | None = None) -> Runtime:
    """The runtime of ``spec`` in this process (module docstring); ``task``: the task already
    built here (else it is built from the spec)."""
    task = task or get_task(spec.task.name, **spec.task.options)
    agent_path = spec.agent.factory
    if agent_path in (None, BUILT_IN_AGENT):
        from combee_fast.rollouts.react import ReactAgent

        agent = ReactAgent(spec.agent)
    else:
        factory_of_agent = load_factory(agent_path, what="--agent")
        try:
            agent = factory_of_agent()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit included: a user's factory is one line, not the run's end
            raise ConfigError(f"--agent {agent_path!r}: the factory raised {described(exc)}") from None
    factory: Callable[[], Environment] | None = None
    if spec.agent.env is not None and spec.agent.env.startswith(ENV_PREFIX):
        from combee_fast.mcp.environment import McpEnvironment, server_of_env

        server, step_timeout_s = server_of_env(spec.agent.env), spec.executor.step_timeout_s

        def factory() -> Environment:
            return McpEnvironment(server, step_timeout_s=step_timeout_s)
    elif spec.agent.env is not None:
        make_env = load_factory(spec.agent.env, what="--env")

        def factory() -> Environment:
            environment: Environment = make_env(sandboxes)
            return environment
    elif isinstance(task, EnvironmentTask):
        environment_task = task

        def factory() -> Environment:
            return environment_task.environment(sandboxes)
    if not hasattr(agent, "run"):
        raise ConfigError(f"--agent {agent_path!r}: the factory returned {type(agent).__name__}, which has no run()")
    pool = EnvironmentPool(factory, spec.capacity) if factory is not None else None
    return Runtime(agent, pool, task, facts, spec.limits, threaded=agent_path not in (None, BUILT_IN_AGENT))
