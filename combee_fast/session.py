"""A learning session: one configuration object in, endpoints opened, a method trained, out.

``SessionConfig`` is everything a run needs. Roles without an endpoint URL are served by the
in-process simulated endpoint playing the task world (so a run needs no GPU, network or key).
The CLI, the demo and the benchmarks all go through :func:`open_session`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import msgspec

from combee_fast.endpoint.cache import CacheMode, ReplayCache
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.endpoint.sim import FaultConfig, SimServer
from combee_fast.errors import ConfigError
from combee_fast.learn.agents import Agents, RoleClients
from combee_fast.learn.methods import (
    Combee,
    CombeeConfig,
    MapConfig,
    Method,
    Naive,
    Sequential,
    example_mapper,
    rollout_mapper,
)
from combee_fast.learn.rundir import RunDir
from combee_fast.learn.train import BatchPlan, FixedBatch, LedgerRow, TrainConfig, TrainResult, train
from combee_fast.playbook import Playbook
from combee_fast.tasks.base import Split, Task
from combee_fast.tasks.registry import get_task
from combee_fast.tasks.world import TaskWorld

ROLES = ("generator", "reflector", "curator", "reducer")
METHODS = ("sequential", "naive", "combee")


class EndpointSpec(msgspec.Struct, frozen=True):
    """Where one role's requests go. ``url`` None: the in-process simulated endpoint."""

    url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    json_schema: bool = True  # the server accepts response_format json_schema


class SimSpec(msgspec.Struct, frozen=True):
    preset: str = "h200-70b"
    time_scale: float = 0.01
    latency_jitter: float = 0.0
    faults: FaultConfig = msgspec.field(default_factory=FaultConfig)


class SessionConfig(msgspec.Struct, frozen=True):
    task: str = "formula"
    task_options: dict[str, str] = msgspec.field(default_factory=dict)  # e.g. {"path": "traces.jsonl"}
    train_split: str = "train"
    val_split: str = "val"
    method: str = "combee"
    batch_size: int | None = 40  # None: the dynamic batch-size controller
    duplicates: int = 2
    max_fan_in: int = 8
    max_reduce_ops: int | None = 32  # most proposed ops one reducer reads (None: one tree, no split)
    max_group: int | None = None  # most records one curator reads (None: the paper's sqrt(n) groups)
    max_rounds: int = 3
    sync_rounds: int | None = 1  # Combee: rounds inside a step; the rest carry into the next (None: all)
    epochs: int = 1
    eval_every: int = 0
    seed: int = 0
    concurrency: int = 256
    timeout_s: float = 600.0
    max_retries: int = 4
    token_budget: int | None = None
    use_ground_truth: bool = True
    endpoints: dict[str, EndpointSpec] = msgspec.field(default_factory=dict)  # role or "default"
    sim: SimSpec = msgspec.field(default_factory=SimSpec)
    cache_path: str | None = None
    cache_mode: str = "off"

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError(f"batch size must be >= 1 or auto, got {self.batch_size}")
        for name, value in (("duplicates", self.duplicates), ("epochs", self.epochs), ("concurrency", self.concurrency)):
            if value < 1:
                raise ConfigError(f"{name} must be >= 1, got {value}")
        if self.max_fan_in < 2:
            raise ConfigError(f"max fan-in must be >= 2, got {self.max_fan_in}")
        unknown = set(self.endpoints) - {*ROLES, "default"}
        if unknown:
            raise ConfigError(f"endpoints for unknown roles: {', '.join(sorted(unknown))}")
        simulated = [role for role in ROLES if self.endpoint_for(role).url is None]
        if simulated and len(simulated) < len(ROLES):  # never fall back to the simulator silently
            raise ConfigError(
                f"no endpoint for role {', '.join(simulated)}: give --endpoint (every role) or "
                + " ".join(f"--{role}-endpoint" for role in simulated)
            )

    def endpoint_for(self, role: str) -> EndpointSpec:
        return self.endpoints.get(role) or self.endpoints.get("default") or EndpointSpec()


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
        return hasattr(self.task, "load_rollouts")

    def method(self, name: str | None = None) -> Method:
        """The learning method ``name`` (default: the configured one) on this session's roles.

        Only Combee carries retrying chains across steps (``sync_rounds``); collected traces have
        no rounds to carry.
        """
        name = name or self.config.method
        map_config = MapConfig(
            max_rounds=self.config.max_rounds,
            concurrency=self.config.concurrency,
            sync_rounds=self.config.sync_rounds if name == "combee" and not self.learns_from_traces else None,
        )
        mapper = rollout_mapper(self.agents) if self.learns_from_traces else example_mapper(self.agents, map_config)
        if name == "sequential":
            return Sequential(self.agents, mapper)
        if name == "naive":
            return Naive(self.agents, mapper, map_config)
        return Combee(
            self.agents, mapper, map_config,
            CombeeConfig(
                self.config.duplicates, self.config.max_fan_in, self.config.seed,
                self.config.max_reduce_ops, self.config.max_group,
            ),
        )

    def train_items(self) -> tuple:
        if self.learns_from_traces:
            return tuple(self.task.load_rollouts(self.config.train_split))
        return self.train_split.examples

    async def train(
        self,
        *,
        method: str | None = None,
        plan: BatchPlan | None = None,
        run_dir: RunDir | None = None,
        on_step: Callable[[LedgerRow], None] | None = None,
        playbook: Playbook | None = None,
    ) -> TrainResult:
        config = self.config
        if plan is None:
            plan = FixedBatch(config.batch_size or 1)
        if run_dir is not None:
            run_dir.write_json("config.json", config)
            run_dir.write_json("splits.json", [self.train_split.manifest, self.val_split.manifest])
        return await train(
            self.method(method),
            self.agents,
            playbook or Playbook.empty(token_budget=config.token_budget),
            self.train_items(),
            self.val_split.examples,
            plan=plan,
            config=TrainConfig(epochs=config.epochs, eval_every=config.eval_every, seed=config.seed,
                               eval_concurrency=config.concurrency),
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
    task = get_task(config.task, **config.task_options)
    train_split = task.load(config.train_split)
    val_split = task.load(config.val_split)
    cache = None
    if config.cache_path is not None and config.cache_mode != "off":
        cache = ReplayCache(config.cache_path, CacheMode(config.cache_mode))
    async with contextlib.AsyncExitStack() as stack:
        server = None
        if any(config.endpoint_for(role).url is None for role in ROLES):
            world = TaskWorld.for_task(task)
            server = await stack.enter_async_context(
                SimServer(
                    world, preset=config.sim.preset, time_scale=config.sim.time_scale,
                    faults=config.sim.faults, seed=config.seed, latency_jitter=config.sim.latency_jitter,
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
                    max_concurrency=config.concurrency,
                    timeout_s=config.timeout_s,
                    max_retries=config.max_retries,
                    api_key_env=spec.api_key_env,
                    json_schema=spec.json_schema,
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
