"""A learning session: one :class:`~combee_fast.config.SessionConfig` in, endpoints opened, a
method trained, out.

Roles without an endpoint URL are served by the in-process simulated endpoint playing the task
world (so a run needs no GPU, network or key). The CLI, the demo and the benchmarks all go
through :func:`open_session` and :meth:`Session.train`: a library user gets exactly what the CLI
does, the batch-size controller included (``TrainConfig.batch_size=None``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import msgspec

from combee_fast.ace.learner import AceLearner
from combee_fast.config import ROLES, SessionConfig, config_to_dict
from combee_fast.endpoint.cache import CacheMode, ReplayCache
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.errors import ConfigError
from combee_fast.methods import METHODS, build_method
from combee_fast.playbook import Playbook
from combee_fast.protocols import BatchPlan, Method, Task
from combee_fast.roles.agents import Agents, RoleClients
from combee_fast.run.batch_plans import ControllerPlan, FixedBatch, LivePlan
from combee_fast.run.ledger import LedgerRow
from combee_fast.run.rundir import RunDir
from combee_fast.run.train import TrainResult, train
from combee_fast.sim.server import SimServer
from combee_fast.sim.world import TaskWorld
from combee_fast.tasks.base import Split
from combee_fast.tasks.registry import get_task


class Session:
    """Open endpoints and loaded splits for one configuration."""

    def __init__(
        self, config: SessionConfig, task: Task, train_split: Split, val_split: Split, agents: Agents,
        clients: RoleClients, server: SimServer | None,
    ) -> None:
        self.config = config
        self.task = task
        self.train_split = train_split
        self.val_split = val_split
        self.agents = agents
        self.clients = clients
        self.server = server

    @property
    def learns_from_traces(self) -> bool:
        """True for tasks whose rollouts already exist (the map only reflects)."""
        return self.task.rollout_source() is not None

    def method(self, name: str | None = None) -> Method:
        """The learning method ``name`` (default: the configured one) on this session's roles.

        Collected traces have no rounds to carry across steps.
        """
        config = self.config
        map_config = config.map
        if self.learns_from_traces:
            map_config = msgspec.structs.replace(map_config, sync_rounds=None)
        learner = AceLearner(self.agents, max_rounds=map_config.max_rounds, from_rollouts=self.learns_from_traces)
        return build_method(
            name or config.method, learner, map_config, config.combee,
            workers=config.transport.concurrency, seed=config.seed,
        )

    def train_items(self) -> tuple:
        """The items a step learns from: the train split's examples, or its collected rollouts."""
        source = self.task.rollout_source()
        if source is not None:
            return tuple(source.load_rollouts(self.config.task.train_split))
        return self.train_split.examples

    async def batch_plan(self, run_dir: RunDir | None = None) -> BatchPlan:
        """The configured plan: a fixed batch size, or (``batch_size`` None) the live planner bounded
        by the concurrency cap, or (``controller.mode = "paper"``) the paper's rule, bounded by the
        simulated server's running-sequence capacity or the concurrency cap."""
        config = self.config
        if config.train.batch_size is not None:
            return FixedBatch(config.train.batch_size)
        if config.controller.mode == "live":  # the endpoint's capacity is measured, not read from a preset
            return await LivePlan.start(config.controller, config.combee, workers=config.transport.concurrency,
                                        agents=self.agents, run_dir=run_dir)
        capacity = config.transport.concurrency
        if self.server is not None and self.server.preset.max_running is not None:
            capacity = min(capacity, self.server.preset.max_running)
        return await ControllerPlan.start(config.controller, capacity=capacity, run_dir=run_dir)

    async def train(
        self,
        *,
        method: str | None = None,
        plan: BatchPlan | None = None,
        run_dir: RunDir | None = None,
        on_step: Callable[[LedgerRow], None] | None = None,
        playbook: Playbook | None = None,
    ) -> TrainResult:
        """Train the configured (or named) method; ``plan`` overrides the configured batch plan."""
        config = self.config
        if plan is None:
            plan = await self.batch_plan(run_dir)
        if run_dir is not None:
            run_dir.write_json("config.json", config_to_dict(config))
            run_dir.write_json("splits.json", [self.train_split.manifest, self.val_split.manifest])
        return await train(
            self.method(method),
            self.agents,
            playbook or Playbook.empty(token_budget=config.token_budget),
            self.train_items(),
            self.val_split.examples,
            plan=plan,
            config=config.train,
            seed=config.seed,
            eval_concurrency=config.transport.concurrency,
            run_dir=run_dir,
            on_step=on_step,
        )


@contextlib.asynccontextmanager
async def open_session(config: SessionConfig, *, check: bool = True) -> AsyncIterator[Session]:
    """Load the task, start the simulated endpoint if a role needs it, open one client per role.

    With ``check``, every real endpoint is probed first: an unreachable one raises
    :class:`combee_fast.errors.EndpointUnreachable` before any work starts. Roles that name the
    same URL and model share one client, and so one concurrency cap.
    """
    if config.method not in METHODS:
        raise ConfigError(f"unknown method {config.method!r}; choose one of: {', '.join(METHODS)}")
    task = get_task(config.task.name, **config.task.options)
    train_split = task.load(config.task.train_split)
    val_split = task.load(config.task.val_split)
    cache = None
    if config.cache.path is not None and config.cache.mode != "off":
        cache = ReplayCache(config.cache.path, CacheMode(config.cache.mode))
    async with contextlib.AsyncExitStack() as stack:
        server = None
        if any(config.endpoint_for(role).url is None for role in ROLES):
            sim = config.sim
            server = await stack.enter_async_context(
                SimServer(
                    TaskWorld.for_task(task, variant=sim.world), preset=sim.preset, time_scale=sim.time_scale,
                    faults=sim.faults, seed=config.seed, latency_jitter=sim.latency_jitter,
                )
            )
        clients: dict[str, EndpointClient] = {}
        shared: dict[tuple[str | None, str | None, str | None, bool], EndpointClient] = {}
        for role in ROLES:
            spec = config.endpoint_for(role)
            key = (spec.url, spec.model, spec.api_key_env, spec.json_schema)
            if key not in shared:  # roles on one endpoint and model share one client, so one cap
                endpoint = EndpointConfig(
                    name=spec.url or f"sim:{config.sim.preset}",
                    base_url=spec.url or server.url,  # type: ignore[union-attr]
                    model=spec.model or "sim",
                    api_key_env=spec.api_key_env,
                    json_schema=spec.json_schema,
                    transport=config.transport,
                )
                shared[key] = await stack.enter_async_context(EndpointClient(endpoint, cache=cache))
                if check and spec.url is not None:
                    await shared[key].check()
            clients[role] = shared[key]
        if cache is not None:
            stack.callback(cache.close)
        role_clients = RoleClients(**clients)
        agents = Agents(task, role_clients, seed=config.seed, use_ground_truth=config.use_ground_truth)
        yield Session(config, task, train_split, val_split, agents, role_clients, server)
