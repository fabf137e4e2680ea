"""A learning session: one :class:`~combee_fast.config.SessionConfig` in, endpoints opened, a
method trained, out.

Roles without an endpoint URL are served by the in-process simulated endpoint playing the task
world (so a run needs no GPU, network or key). The CLI, the demo and the benchmarks all go
through :func:`open_session` and :meth:`Session.train`: a library user gets exactly what the CLI
does, the batch-size controller included (``TrainConfig.batch_size=None``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping

import msgspec

from combee_fast.ace.learner import AceLearner
from combee_fast.config import ROLES, SessionConfig, config_to_dict
from combee_fast.endpoint.cache import CacheMode, ReplayCache
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.endpoint.pool import EndpointPool
from combee_fast.errors import ConfigError
from combee_fast.gepa.methods import GEPA_METHODS
from combee_fast.redact import strip_userinfo
from combee_fast.methods import METHODS, build_method
from combee_fast.playbook import Playbook
from combee_fast.protocols import BatchPlan, Method, Task
from combee_fast.roles.agents import Agents, RoleClients
from combee_fast.run.batch_plans import ControllerPlan, FixedBatch, LivePlan
from combee_fast.run.checkpoint import Checkpoint
from combee_fast.run.cost import SIMULATED_GPUS, GpuClock
from combee_fast.run.gepa import GepaTrainResult, train_gepa
from combee_fast.run.interrupt import StopRequest
from combee_fast.run.ledger import LedgerRow
from combee_fast.run.rundir import RunDir
from combee_fast.run.train import TrainResult, train
from combee_fast.run.usage import SplitUsage, append_usage, usage_entry
from combee_fast.sim.server import SimServer
from combee_fast.sim.instructions import InstructionWorld
from combee_fast.tasks.base import Split
from combee_fast.tasks.heldout import check_use
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

    def split_uses(self, declared: Mapping[str, str] | None = None) -> list[tuple[Split, str, str]]:
        """``(split, role, use)`` for every use training makes of a split: the train split is
        learned from (and, with the controller, the batch size is tuned on its steps); the
        validation split selects the best playbook. :class:`ConfigError` (from
        :func:`~combee_fast.tasks.heldout.check_use`) when a use falls on a test split.
        ``declared``: split roles an experiment card declares over the task's own."""
        task, names = self.task, self.config.task
        uses = [(self.train_split, check_use(task, names.train_split, "train", declared), "train")]
        if self.config.train.batch_size is None:
            uses.append((self.train_split, check_use(task, names.train_split, "tune", declared), "tune"))
        uses.append((self.val_split, check_use(task, names.val_split, "select", declared), "select"))
        return uses

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
        usage: SplitUsage | None = None,
        gpus: int | None = None,
        resume: Checkpoint | None = None,
        interrupt: StopRequest | None = None,
        budget: Callable[[LedgerRow], str | None] | None = None,
    ) -> TrainResult | GepaTrainResult:
        """Train the configured (or named) method; ``plan`` overrides the configured batch plan.

        ``capabilities.json`` of ``run_dir`` names each endpoint's structured-output form and what
        the server said of itself (:meth:`capabilities`), written at the start and at the end.

        Refuses (:class:`ConfigError`) to learn, select or tune on a test split (see
        :meth:`split_uses`). With ``usage`` (a run under an experiment card) the card's split
        roles apply, every use is appended to the card's usage record before training starts,
        and the card is copied into ``run_dir`` as ``card.toml``.

        Each ledger row holds its step's GPU-seconds: the simulated server's busy time times
        ``gpus`` (default :data:`~combee_fast.run.cost.SIMULATED_GPUS`), or on real endpoints the
        step's wall time times ``gpus`` (unknown, ``None``, when ``gpus`` is not given).

        ``budget`` (playbook methods only) ends the run cleanly after the first step for which it
        answers a reason (:func:`combee_fast.run.train.train`).

        The GEPA methods (``gepa``, ``combee-gepa``) search a system prompt instead of a playbook
        (:func:`combee_fast.run.gepa.train_gepa`); they take no plan and no starting playbook.

        With ``run_dir``, ``config.json`` and ``splits.json`` are written and the run directory
        is moved into place (:meth:`RunDir.start`) before the first step. ``resume`` (a checkpoint
        of the run in ``run_dir``, reopened by :meth:`RunDir.reopen`) continues that run; ``interrupt``
        ends the run at a safe point when requested (see :func:`combee_fast.run.train.train`).
        A GEPA run can be neither resumed nor stopped so (:class:`ConfigError` for ``resume``).
        """
        config = self.config
        uses = self.split_uses(usage.roles if usage is not None else None)
        if usage is not None:
            append_usage(usage.record, [
                usage_entry(split.manifest, role=role, use=use, run=usage.run, command=usage.command)
                for split, role, use in uses
            ])
        name = method or config.method
        if name in GEPA_METHODS:
            if resume is not None:
                raise ConfigError(f"method {name} cannot be resumed; only playbook methods write checkpoints")
            self._start_run(run_dir, usage)
            gepa_result = await self._train_gepa(name, run_dir, on_step)
            self._record_capabilities(run_dir)
            return gepa_result
        if plan is None:
            plan = await self.batch_plan(run_dir)
        if resume is None:
            self._start_run(run_dir, usage)
        if run_dir is not None:  # every failed call goes to errors.jsonl as it happens
            self.agents.on_failure = run_dir.append_error
        try:
            result = await train(
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
                gpu_clock=self.gpu_clock(gpus),
                resume=resume,
                interrupt=interrupt,
                budget=budget,
            )
        finally:
            self.agents.on_failure = None
            self._record_capabilities(run_dir)
        return result

    def _record_capabilities(self, run_dir: RunDir | None) -> None:
        """Rewrite ``capabilities.json`` at the end (a form may have been left during the run) and
        write ``calls.json`` (calls per role; ``trimmed``: per role, calls sent again with half the
        playbook after a context error; failures are in ``errors.jsonl``, line by line)."""
        if run_dir is not None:
            run_dir.write_json("capabilities.json", self.capabilities())
            run_dir.write_json("calls.json", {**self.agents.calls, "trimmed": self.agents.trimmed,
                                              "failed": self.agents.failures_total})

    def capabilities(self) -> list[dict[str, object]]:
        """Each distinct endpoint's :class:`~combee_fast.endpoint.capabilities.Capabilities`
        (structured-output form, how it was chosen, context length, slots), with its roles, the
        requests it may have in flight (``in_flight_limit``: now; ``in_flight_ceiling``: the most),
        how often a timeout lowered that limit (``overloads``) and whether replies are streamed."""
        found: dict[int, dict[str, object]] = {}
        for role in ROLES:
            for client in self.clients.replicas(role):
                gate = client.gate
                entry = found.setdefault(id(client), {
                    **msgspec.to_builtins(client.capabilities), "roles": [], "in_flight_limit": gate.limit,
                    "in_flight_ceiling": gate.ceiling, "overloads": gate.overloads,
                    "stream": client.config.transport.stream})
                entry["roles"].append(role)  # type: ignore[union-attr]
        return list(found.values())

    def _start_run(self, run_dir: RunDir | None, usage: SplitUsage | None) -> None:
        """The run has started: write its config, split manifests and card, and move its
        directory into place (replacing any previous run only now)."""
        if run_dir is None:
            return
        run_dir.write_json("config.json", config_to_dict(self.config, public=True))
        run_dir.write_json("splits.json", [self.train_split.manifest, self.val_split.manifest])
        run_dir.write_json("capabilities.json", self.capabilities())
        run_dir.write_json("sampling.json", self.agents.effective_sampling())
        if usage is not None:
            run_dir.write_text("card.toml", usage.card_text)
        run_dir.start()

    async def _train_gepa(
        self, name: str, run_dir: RunDir | None, on_step: Callable[[LedgerRow], None] | None
    ) -> GepaTrainResult:
        if self.learns_from_traces:
            raise ConfigError(f"method {name} grades its own answers; it cannot learn from collected traces")
        return await train_gepa(
            name, self.config, self.task, self.clients, self.train_split.examples, self.val_split.examples,
            run_dir=run_dir, on_step=on_step,
        )

    def gpu_clock(self, gpus: int | None = None) -> GpuClock | None:
        """The clock of this session's GPU-seconds (see :meth:`train`); None when unknown."""
        if self.server is not None:
            return GpuClock(gpus or SIMULATED_GPUS, busy_s=self.server.busy_s)
        return GpuClock(gpus) if gpus is not None else None


@contextlib.asynccontextmanager
async def open_session(config: SessionConfig, *, check: bool = True) -> AsyncIterator[Session]:
    """Load the task, start the simulated endpoint if a role needs it, open one client per role.

    An empty train split raises :class:`ConfigError`. With ``check``, every real endpoint is
    proved to serve its model first (:meth:`EndpointClient.check`): an unreachable one raises
    :class:`combee_fast.errors.EndpointUnreachable` before any work starts. Roles that name the
    same URL and model share one client, and so one concurrency cap.
    """
    if config.method not in METHODS and config.method not in GEPA_METHODS:
        raise ConfigError(
            f"unknown method {config.method!r}; choose one of: {', '.join([*METHODS, *GEPA_METHODS])}"
        )
    task = get_task(config.task.name, **config.task.options)
    train_split = task.load(config.task.train_split)
    val_split = task.load(config.task.val_split)
    if not train_split.examples:  # nothing to learn from (or to evaluate): never a silent "success"
        raise ConfigError(f"task {task.name!r}: split {config.task.train_split!r} is empty")
    cache = None
    if config.cache.path is not None and config.cache.mode != "off":
        cache = ReplayCache(config.cache.path, CacheMode(config.cache.mode))
    async with contextlib.AsyncExitStack() as stack:
        server = None
        if any(config.endpoint_for(role).url is None for role in ROLES):
            sim = config.sim
            try:
                world = InstructionWorld.for_task(task, variant=sim.world)
            except ValueError as exc:
                raise ConfigError(f"sim.world: {exc}") from None
            server = await stack.enter_async_context(
                SimServer(
                    world, preset=sim.preset, time_scale=sim.time_scale,
                    faults=sim.faults, seed=config.seed, latency_jitter=sim.latency_jitter,
                )
            )
        clients: dict[str, EndpointClient] = {}
        shared: dict[tuple[str | None, str | None, str | None, bool, str, tuple[str, ...]], EndpointClient] = {}
        for role in ROLES:
            spec = config.endpoint_for(role)
            key = (spec.url, spec.model, spec.api_key_env, spec.json_schema, spec.response_format,
                   tuple(spec.replicas))
            if key not in shared:  # roles on one endpoint and model share one client, so one cap
                replicas = []
                for url in (spec.url, *spec.replicas):
                    endpoint = EndpointConfig(  # the name (ledgers, messages) never shows URL credentials
                        name=strip_userinfo(url) if url else f"sim:{config.sim.preset}",
                        base_url=url or server.url,  # type: ignore[union-attr]
                        model=spec.model or "sim",
                        api_key_env=spec.api_key_env,
                        json_schema=spec.json_schema,
                        transport=config.transport,
                        response_format=spec.response_format,
                    )
                    replicas.append(await stack.enter_async_context(EndpointClient(endpoint, cache=cache)))
                    if check and url is not None:
                        await replicas[-1].check()
                        await replicas[-1].detect()
                shared[key] = replicas[0] if len(replicas) == 1 else EndpointPool(replicas)  # type: ignore[assignment]
            clients[role] = shared[key]
        if cache is not None:
            stack.callback(cache.close)
        role_clients = RoleClients(**clients)
        agents = Agents(task, role_clients, seed=config.seed, use_ground_truth=config.use_ground_truth,
                        sampling=config.sampling_for)
        yield Session(config, task, train_split, val_split, agents, role_clients, server)
