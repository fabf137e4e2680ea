"""The configuration tree: every setting of a run, each default defined here and only here.

    SessionConfig                      learner and method (combee_fast.learners), seed
    ├── task:        TaskConfig        which task, its options, which splits
    ├── map:         MapConfig         the per-item chain (ACE rounds, carried chains, timeout, width)
    ├── combee:      CombeeConfig      augmented shuffle and reduce shape
    ├── controller:  ControllerConfig  the dynamic batch-size controller (--batch-size auto)
    ├── train:       TrainConfig       epochs, batch size, validation cadence, stop rules
    ├── eval:        EvalConfig        held-out evaluation
    ├── agent:       AgentConfig       the agent of episodes (built-in ReAct, or yours) and its environment
    ├── executor:    ExecutorConfig    where episodes run (local, process) and their time limits
    ├── sandbox:     SandboxConfig     isolation and limits of the commands an agent runs
    ├── transport:   TransportConfig   in-flight cap, timeouts, retries (every endpoint)
    ├── endpoints:   {role | pool | "default": EndpointSpec}
    ├── local:       LocalConfig|None  a llama.cpp server started for the run (--local)
    ├── sim:         SimConfig         the in-process simulated endpoint (faults: FaultConfig)
    ├── cache:       CacheConfig       record/replay
    ├── sampling:    {role | pool | "default": SamplingConfig}
    ├── tracking:    TrackingConfig    experiment tracking (MLflow)
    └── learners:    {learner: table}  each learner's own settings, decoded by its kind's ``settings``
                                       type (:meth:`SessionConfig.learner_settings`)
    OnlineConfig embeds the same CombeeConfig, so online and offline learning cannot drift apart.

Each knob has one meaning: ``transport.concurrency`` caps the HTTP requests in flight per
endpoint; ``map.workers`` is how many items the map runs at once; ``eval.parallel`` how many
examples an evaluation scores at once; ``controller.max_batch`` the largest batch a plan picks.
Agent episodes run ``map.workers`` at once: the map's width is the rollout executor's capacity.

The parts of the engine take their own sub-config; nothing copies a value by hand. A run is
described by keyword (``SessionConfig(train=TrainConfig(batch_size=None))``), by a TOML or JSON
file (:func:`load_config`; the run directory's ``config.json`` is such a file), or by CLI flags
over either. Invalid values raise :class:`~combee_fast.errors.ConfigError` naming the option.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

from combee_fast.errors import ConfigError
from combee_fast.files import read_regular
from combee_fast.plugins import is_path
from combee_fast.redact import strip_userinfo

HISTORY_KEPT = 1000
"""Most entries any in-memory history keeps (ledger rows of a ``TrainResult``, the controller's
decisions and measurements, failed calls): the run's files are the record."""

BATCHES_KEPT = 100
"""Applied batches an online learner keeps by default (``OnlineConfig.keep_batches``). Each holds
its rollout ids and what its apply changed (evicted bullets, rejected ops): tens of kilobytes for
a batch of hundreds of rollouts, so a history of :data:`HISTORY_KEPT` of them would grow for the
first quarter of a million submissions."""

BATCHING_PROBE_S = 6.0
"""Real seconds the start-up batching probe may spend (``controller.probe_s``,
:func:`combee_fast.endpoint.batching.measure_batching`): a few seconds on a fast server; a slow
one is measured at fewer levels."""

BATCHING_PROBE_TOKENS = 32
"""Completion tokens each request of the batching probe asks for (``controller.probe_tokens``)."""

FAULT_KINDS = ("429", "500", "drop", "stall", "malformed", "truncated")


def at_least(owner: str, minimum: int | float, **values: int | float | str | None) -> None:
    """ConfigError naming the first of ``values`` below ``minimum`` or not a number (NaN) (None and
    ``"auto"`` are no number: not checked)."""
    for name, value in values.items():
        if isinstance(value, (int, float)) and not value >= minimum:
            raise ConfigError(f"{owner}.{name} must be >= {minimum}, got {value}")


SEED_MAX = 2**63 - 1
"""The largest seed: every seed is stored (checkpoint, config.json) as a 64-bit integer and feeds
numpy's generators, which take none below 0."""


def _seeds_in_range(owner: str, **seeds: int) -> None:
    """ConfigError naming the first of ``seeds`` outside ``[0, SEED_MAX]``."""
    for name, seed in seeds.items():
        if not 0 <= seed <= SEED_MAX:
            raise ConfigError(f"{owner}.{name} must be a whole number from 0 to 2**63 - 1, got {seed}")


AUTO = "auto"
"""``train.batch_size = "auto"`` (TOML, JSON, ``--batch-size auto``; a learner's settings may take it too): the batch-size controller; read as None."""


class TaskConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Which task (see :mod:`combee_fast.tasks`), its keyword options, and the split specs:
    ``train_split`` is learned from, ``val_split`` selects the best artifact (the bundled tasks'
    ``selection`` split, disjoint from their ``test`` split; a split sharing rows with a test
    split is refused: :mod:`combee_fast.tasks.heldout`)."""

    name: str = "formula"
    options: dict[str, str] = msgspec.field(default_factory=dict)  # e.g. {"path": "traces.jsonl"}
    train_split: str = "train"
    val_split: str = "selection"


class MapConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The map: each item's chain against the step's frozen snapshot.

    ``max_rounds``: regenerations after a wrong answer. ``sync_rounds`` (Combee only): rounds a
    chain runs inside its step; a chain still wrong after them finishes in the background and is
    curated in the next step (``None``: every chain finishes in its step). ``item_timeout_s``:
    one chain's deadline. ``workers``: chains run at once (GEPA: gradings at once).
    """

    max_rounds: int = 3
    sync_rounds: int | None = 1
    item_timeout_s: float | None = 3600.0
    workers: int = 256

    def __post_init__(self) -> None:
        at_least("map", 0, max_rounds=self.max_rounds, sync_rounds=self.sync_rounds)
        at_least("map", 1, workers=self.workers)

    @property
    def rounds_in_step(self) -> int:
        """Rounds a chain runs before its step ends."""
        return self.max_rounds if self.sync_rounds is None else min(self.sync_rounds, self.max_rounds)


class CombeeConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Shape of Combee's shuffle and reduce (paper section 3)."""

    duplicates: int = 2  # p: copies of each record in the augmented shuffle
    max_fan_in: int = 8  # most proposals one reducer call merges
    max_reduce_ops: int | None = 32  # most proposed ops one reducer reads; more are split by topic
    max_group: int | None = None  # most records one curator reads (None: the paper's sqrt(n) groups)

    def __post_init__(self) -> None:
        at_least("combee", 1, duplicates=self.duplicates, max_reduce_ops=self.max_reduce_ops,
                  max_group=self.max_group)
        at_least("combee", 2, max_fan_in=self.max_fan_in)


class ControllerConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Settings of the batch-size controller; :mod:`combee_fast.combee.controller` explains each.

    ``retention_floor``: even a lightly loaded curator keeps only about half of the insights it
    reads (ACE at batch 1 adds ~0.5 entries per sample), so overload shows as retention well
    under one half, not as a drop below ~1.
    """

    candidates: tuple[int, ...] = (5, 10, 20, 40, 80)
    min_batch: int = 1
    max_batch: int = 256
    tau_fraction: float = 0.016
    retention_floor: float = 0.35
    validation_drop: float = 0.05
    shrink_factor: float = 0.5
    hysteresis: float = 0.15
    recency_decay: float = 0.5
    recover_after: int = 3
    # The live planner (mode "live", :mod:`combee_fast.combee.planner`); "paper" is the paper's
    # profile-and-fit rule (:mod:`combee_fast.combee.controller`, the settings above).
    mode: str = "live"
    start_steps: int = 2  # nothing measured yet: the first step takes 1/start_steps of the queue
    # Probed but nothing measured yet: a step's curate-and-reduce tail, which waits for its map, is
    # taken to last this many waves of chains (two calls deep, as a chain is); measured from the first step on.
    start_tail_waves: float = 1.0
    growth: float = 4.0  # never plan beyond growth x the largest in-flight level measured
    time_slack: float = 0.1  # the smallest batch whose predicted remaining time is this close to the fastest
    saturation: float = 0.8  # the endpoint is full where its throughput reaches this share of its ceiling
    surprise: float = 2.0  # a step this many times slower (or faster) than predicted: the endpoint changed
    history: int = 4096  # calls kept for the latency fit, decisions kept in memory
    group_records: int = 8  # records one curator reads (max_group) while retention is healthy
    min_group: int = 4
    max_duplicates: int = 3  # p may rise to this when retention stays low at min_group
    learned_success: float = 0.8  # success-rate lower bound past which the quality cap is lifted
    collapse_below: float = 0.25  # distinct fraction of a step's lessons that means collapse
    collapse_min_texts: int = 8
    diversity_temperature: float = 0.7  # reflection temperature injected on collapse
    # The start-up batching probe of the rollout role's endpoint (endpoint/batching.py), which
    # seeds the planner: its real-seconds budget (0: no probe) and each request's max tokens.
    probe_s: float = BATCHING_PROBE_S
    probe_tokens: int = BATCHING_PROBE_TOKENS

    def __post_init__(self) -> None:
        if not self.candidates or min(self.candidates) < 1:
            raise ConfigError(f"controller.candidates must be non-empty and >= 1, got {self.candidates}")
        if not 1 <= self.min_batch <= self.max_batch:
            raise ConfigError(f"controller: need 1 <= min_batch <= max_batch, got {self.min_batch}, {self.max_batch}")
        if not self.tau_fraction > 0:
            raise ConfigError(f"controller.tau_fraction must be > 0, got {self.tau_fraction}")
        if not 0 < self.shrink_factor < 1:
            raise ConfigError(f"controller.shrink_factor must be in (0, 1), got {self.shrink_factor}")
        if not self.hysteresis >= 0:
            raise ConfigError(f"controller.hysteresis must be >= 0, got {self.hysteresis}")
        if not 0 < self.recency_decay < 1:
            raise ConfigError(f"controller.recency_decay must be in (0, 1), got {self.recency_decay}")
        at_least("controller", 1, recover_after=self.recover_after, start_steps=self.start_steps,
                  history=self.history, min_group=self.min_group, collapse_min_texts=self.collapse_min_texts,
                  probe_tokens=self.probe_tokens)
        at_least("controller", 0, probe_s=self.probe_s, start_tail_waves=self.start_tail_waves)
        if self.mode not in ("live", "paper"):
            raise ConfigError(f"controller.mode must be 'live' or 'paper', got {self.mode!r}")
        if not self.surprise > 1:
            raise ConfigError(f"controller.surprise must be > 1, got {self.surprise}")
        if not 0 < self.saturation < 1:
            raise ConfigError(f"controller.saturation must be in (0, 1), got {self.saturation}")
        if not self.growth >= 1 or not self.time_slack >= 0:
            raise ConfigError(f"controller: need growth >= 1 and time_slack >= 0, got {self.growth}, {self.time_slack}")
        if not self.min_group <= self.group_records:
            raise ConfigError(f"controller: need min_group <= group_records, got {self.min_group}, {self.group_records}")


class TrainConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Offline training (the run loop, :mod:`combee_fast.run.train`) and its stop rules.

    ``batch_size`` None (or ``"auto"`` in a config file, read as None): the dynamic batch-size
    controller plans each step. ``epochs``: passes over the train split. ``eval_every``: validate
    every that many steps; 0: only after the last; None (the default): each time the run has
    spent another quarter of its budget (train samples, GEPA's metric calls), so it draws a
    curve and ``patience`` has validations to count.

    ``max_failed_fraction``: when more than this fraction of the calls of the latest steps failed
    (after their retries and repair), judged once those steps hold ``min_judged_calls`` calls
    (or at the last step), or a validation leaves more than this fraction of its examples
    unanswered, the run stops (:mod:`combee_fast.run.stops`).

    Optional stoppers (None: off): ``patience``, validations in a row that do not raise the best
    score; ``target_score``, a best validation score to stop at; ``max_wall_s``, seconds of
    training (wall clock, validation excluded).

    ``plan_from``: an earlier run's ``controller.jsonl``, whose batch decisions (sizes, shapes,
    remedies) this run takes step by step instead of planning its own
    (:class:`~combee_fast.run.batch_plans.ReplayedPlan`).
    """

    batch_size: int | Literal["auto"] | None = 40
    epochs: int = 1
    eval_every: int | None = None  # validate every N steps (0: only after the last; None: each quarter of the budget)
    max_failed_fraction: float = 0.5
    min_judged_calls: int = 10
    patience: int | None = None
    target_score: float | None = None
    max_wall_s: float | None = None
    plan_from: str | None = None

    def __post_init__(self) -> None:
        if self.batch_size == AUTO:
            msgspec.structs.force_setattr(self, "batch_size", None)
        at_least("train", 1, batch_size=self.batch_size, epochs=self.epochs, min_judged_calls=self.min_judged_calls,
                  patience=self.patience)
        at_least("train", 0, eval_every=self.eval_every)
        if not 0.0 <= self.max_failed_fraction < 1.0:
            raise ConfigError(f"train.max_failed_fraction must be in [0, 1), got {self.max_failed_fraction!r}")
        if self.target_score is not None and not 0.0 <= self.target_score <= 1.0:
            raise ConfigError(f"train.target_score must be in [0, 1], got {self.target_score!r}")
        if self.max_wall_s is not None and not self.max_wall_s > 0:
            raise ConfigError(f"train.max_wall_s must be > 0, got {self.max_wall_s!r}")


class EvalConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Held-out evaluation (validation during training, ``combee eval``, verify's test scores):
    ``parallel`` examples scored at once."""

    parallel: int = 256

    def __post_init__(self) -> None:
        at_least("eval", 1, parallel=self.parallel)


class TransportConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How hard to push an endpoint: HTTP requests in flight per endpoint, the time a call may take
    (``timeout_s``: all its attempts, backoff and repair; ``attempt_timeout_s``: one attempt, None:
    all of the call's), retries with exponential backoff and jitter, the largest reply read."""

    concurrency: int = 256
    timeout_s: float = 600.0
    attempt_timeout_s: float | None = None
    max_retries: int = 4
    backoff_base_s: float = 0.25
    backoff_max_s: float = 20.0
    max_reply_bytes: int = 16 * 2**20  # a reply past this is not read further: a too_large error
    replica_down_s: float = 5.0  # a failing replica of a role's endpoint is left out this long
    slots_cap: bool = True  # a server that reports its slots (llama.cpp /props) gets at most that many at once
    stream: bool = False  # streamed replies: an abandoned request is cancelled on the server (endpoint.streamed)

    def __post_init__(self) -> None:
        at_least("transport", 1, concurrency=self.concurrency, max_reply_bytes=self.max_reply_bytes)
        at_least("transport", 0, replica_down_s=self.replica_down_s)
        at_least("transport", 0, max_retries=self.max_retries, backoff_base_s=self.backoff_base_s,
                  backoff_max_s=self.backoff_max_s)
        if not (self.timeout_s > 0 and math.isfinite(self.timeout_s)):
            raise ConfigError(f"transport.timeout_s must be > 0 and finite, got {self.timeout_s}")
        if self.attempt_timeout_s is not None and not (self.attempt_timeout_s > 0 and math.isfinite(self.attempt_timeout_s)):
            raise ConfigError(f"transport.attempt_timeout_s must be > 0 and finite, got {self.attempt_timeout_s}")
        if not (math.isfinite(self.backoff_base_s) and math.isfinite(self.backoff_max_s)):
            raise ConfigError("transport.backoff_base_s and backoff_max_s must be finite")


AGENT_TOOL_CALLS = ("auto", "on", "off")
"""How the built-in agent asks for actions: ``auto`` probes the endpoint for OpenAI tool calling
(as structured output is probed), ``on`` uses tool calls, ``off`` a bounded JSON action schema."""


class AgentConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The agent of an episode (:mod:`combee_fast.rollouts`).

    ``factory``: ``react`` (the built-in ReAct agent) or ``package.module:factory``, a callable
    returning an :class:`~combee_fast.protocols.Agent`; None: the task's own way (the ReAct agent
    for a task with an environment, the one generator call of a single-call task). ``env``:
    ``package.module:factory``, a callable taking the run's sandboxes and returning a fresh
    :class:`~combee_fast.protocols.Environment`, or ``mcp:COMMAND``, the MCP stdio server
    ``COMMAND`` per episode (:mod:`combee_fast.mcp`; None: the task's own environment, if it has one).
    ``max_steps``: model turns an episode may take; ``tool_calls``: see :data:`AGENT_TOOL_CALLS`;
    ``observation_chars``: most characters of one observation an agent's prompt shows.
    """

    factory: str | None = None
    env: str | None = None
    max_steps: int = 8
    tool_calls: str = "auto"
    observation_chars: int = 2000

    def __post_init__(self) -> None:
        at_least("agent", 1, max_steps=self.max_steps, observation_chars=self.observation_chars)
        if self.tool_calls not in AGENT_TOOL_CALLS:
            raise ConfigError(f"agent.tool_calls must be one of {', '.join(AGENT_TOOL_CALLS)}, got {self.tool_calls!r}")
        for name, value in (("factory", self.factory), ("env", self.env)):
            if value is not None and value != "react" and not is_path(value) \
                    and not (name == "env" and value.startswith("mcp:") and value[4:].strip()):
                raise ConfigError(f"agent.{name} must be 'package.module:factory'"
                                  f"{' or react' if name == 'factory' else ' or mcp:COMMAND'}, got {value!r}")

    @property
    def enabled(self) -> bool:
        """Whether an agent or an environment was asked for explicitly."""
        return self.factory is not None or self.env is not None


def _ray_address(address: str) -> bool:
    """Whether ``address`` names a Ray cluster: ``auto`` or ``HOST:PORT``."""
    host, sep, port = address.rpartition(":")
    return address == "auto" or (bool(sep) and bool(host) and port.isdigit() and 0 < int(port) < 65536)


class ExecutorConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where agent episodes run. ``backend``: ``local`` (on the engine's event loop, environment
    work off it), ``process`` (a pool of ``processes`` worker processes), ``ray``, or a plugin's
    (an entry point's name or ``package.module:Class``: the one list of backends is
    :data:`combee_fast.rollouts.executors.BACKENDS`, checked when the backend is opened). Its capacity is
    ``map.workers`` episodes at once. ``step_timeout_s``: one environment step's wall-clock limit
    (a sandboxed command is killed then); ``episode_timeout_s``: one whole episode's.

    ``ray`` (:mod:`combee_fast.rollouts.ray_actors`, the ``ray`` extra): ``ray_actors`` rollout
    actors, each asking ``ray_cpus`` CPUs and one ``sandbox`` resource of its node;
    ``ray_address``: None starts a Ray instance on this machine for the run (stopped after it),
    ``auto`` or ``HOST:PORT`` joins a running cluster."""

    backend: str = "local"
    processes: int = 2
    step_timeout_s: float = 20.0
    episode_timeout_s: float = 300.0
    ray_address: str | None = None
    ray_actors: int = 2
    ray_cpus: float = 1.0

    def __post_init__(self) -> None:
        at_least("executor", 1, processes=self.processes, ray_actors=self.ray_actors)
        if not (self.ray_cpus >= 0 and math.isfinite(self.ray_cpus)):
            raise ConfigError(f"executor.ray_cpus must be >= 0 and finite, got {self.ray_cpus!r}")
        if self.ray_address is not None and not _ray_address(self.ray_address):
            raise ConfigError(f"executor.ray_address must be 'auto' or HOST:PORT, got {self.ray_address!r}")
        for name, value in (("step_timeout_s", self.step_timeout_s), ("episode_timeout_s", self.episode_timeout_s)):
            if not (value > 0 and math.isfinite(value)):
                raise ConfigError(f"executor.{name} must be > 0 and finite, got {value!r}")


SANDBOX_MODES = ("bwrap", "none")
"""``bwrap``: every command an agent chose runs in a bubblewrap sandbox; ``none``: commands run
as plain processes in a scratch folder (trusted commands only)."""


class SandboxConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Isolation and limits of the commands an agent runs (:mod:`combee_fast.sandbox`).

    ``mode``: :data:`SANDBOX_MODES`. Limits, per command: ``cpu_s`` CPU seconds per process,
    ``memory_mb`` address space per process, ``max_processes`` processes at once, ``file_mb`` the
    largest file written, ``output_kb`` the output kept; per episode: ``disk_mb`` of working
    directory. ``uid_base`` (root only): where the uids sandboxes run as are taken from, upwards,
    each leased to one pool at a time across processes and skipping any uid a user, group or
    process of the host has (:class:`~combee_fast.sandbox.limits.UidPool`); the default lies past
    the ranges systemd hands out (dynamic users, containers).
    ``warm``: sandboxes each pool starts ahead of need, so an episode's sandbox has built its
    namespaces before the episode asks for it (0: each starts when asked; each warm one holds a
    uid and a few idle processes).
    """

    mode: str = "bwrap"
    cpu_s: int = 10
    memory_mb: int = 1024
    max_processes: int = 64
    file_mb: int = 8
    output_kb: int = 64
    disk_mb: int = 32
    uid_base: int = 1_900_000_000
    warm: int = 1

    def __post_init__(self) -> None:
        if self.warm < 0:
            raise ConfigError(f"sandbox.warm must be >= 0, got {self.warm!r}")
        if self.mode not in SANDBOX_MODES:
            raise ConfigError(f"sandbox.mode must be one of {', '.join(SANDBOX_MODES)}, got {self.mode!r}")
        at_least("sandbox", 1, cpu_s=self.cpu_s, memory_mb=self.memory_mb, max_processes=self.max_processes,
                  file_mb=self.file_mb, output_kb=self.output_kb, disk_mb=self.disk_mb, uid_base=self.uid_base)


RESPONSE_FORMATS = ("auto", "json_schema", "json_object_schema", "json_object", "none")
"""Structured-output forms an endpoint can be told to use (see combee_fast.endpoint.capabilities)."""


class EndpointSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where one role's requests go. ``url`` None: the in-process simulated endpoint. With
    ``replicas``, ``url`` and each replica serve the same model; calls go to the one with the
    fewest outstanding (:mod:`combee_fast.endpoint.pool`). ``price_in``/``price_out``: what the
    endpoint charges, in dollars per million prompt and completion tokens, given together (None,
    the default: the cost of its calls is unknown, never taken as zero; :mod:`combee_fast.money.dollars`)."""

    url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    json_schema: bool = True  # the server accepts response_format json_schema
    replicas: list[str] = msgspec.field(default_factory=list)  # more base URLs serving the same model
    response_format: str = "auto"  # auto (probed at start-up), json_schema, json_object_schema, json_object, none
    price_in: float | None = None  # dollars per million prompt tokens (None: unknown, money/dollars.py)
    price_out: float | None = None  # dollars per million completion tokens

    def __post_init__(self) -> None:
        if (self.price_in is None) != (self.price_out is None):
            raise ConfigError("endpoints: give price_in and price_out together (dollars per million prompt and "
                              f"completion tokens), got price_in={self.price_in}, price_out={self.price_out}")
        for name, price in (("price_in", self.price_in), ("price_out", self.price_out)):
            if price is not None and not (price >= 0 and math.isfinite(price)):
                raise ConfigError(f"endpoints: {name} must be >= 0 and finite (dollars per million tokens), "
                                  f"got {price!r}")
        if self.replicas and self.url is None:
            raise ConfigError("endpoints: replicas need a url too")
        for url in self.replicas:
            if not url.startswith(("http://", "https://")):
                raise ConfigError(f"endpoints: a replica's base URL must start with http:// or https://, got "
                                  f"{strip_userinfo(url)!r}")
        if self.response_format not in RESPONSE_FORMATS:
            raise ConfigError(f"endpoints: response_format must be one of {', '.join(RESPONSE_FORMATS)}; "
                              f"got {self.response_format!r}")


class SamplingConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """How one role samples (``[sampling.<role>]``, or ``[sampling.default]`` for every role).
    A field left out (None) keeps the role's own value (temperature 0, the role's max tokens) and
    sends nothing; ``extra`` fields are merged into the request body as given (e.g.
    ``{"repeat_penalty": 1.1}`` for llama.cpp, ``{"top_k": 20}`` for vLLM)."""

    temperature: float | None = None
    max_completion_tokens: int | None = None  # sent as max_tokens
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    top_p: float | None = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        at_least("sampling", 1, max_completion_tokens=self.max_completion_tokens)
        at_least("sampling", 0, temperature=self.temperature)
        for name in ("frequency_penalty", "presence_penalty"):
            value = getattr(self, name)
            if value is not None and not -2.0 <= value <= 2.0:
                raise ConfigError(f"sampling.{name} must be in [-2, 2], got {value!r}")
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"sampling.top_p must be in (0, 1], got {self.top_p!r}")

    def over(self, base: SamplingConfig) -> SamplingConfig:
        """These settings, with ``base``'s wherever these leave a field out."""
        merged = {**msgspec.structs.asdict(base), **{k: v for k, v in msgspec.structs.asdict(self).items()
                                                     if v is not None and k != "extra"}}
        merged["extra"] = {**base.extra, **self.extra}
        return SamplingConfig(**merged)


class LocalConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The llama.cpp server ``--local`` starts (see :mod:`combee_fast.endpoint.local`): the named
    model ``name`` (:data:`combee_fast.endpoint.models.LOCAL_MODELS`; its default here is the one
    default local model, which ``--local`` without a name and the ``local`` extra bring) or a GGUF
    file ``model`` (which wins when given), CPU threads (None: all),
    context tokens per slot, slots (requests decoded at once, by continuous batching),
    seconds to wait until it is healthy, and whether a ``llama-server`` on PATH is preferred.

    With ``SessionConfig.local`` set, the session starts the server and every role without an
    endpoint of its own uses it, with streamed replies (a request given up on stops generating)
    and at most as many requests in flight as the server serves at once."""

    name: str = "qwen2.5-coder-0.5b"
    model: str | None = None
    threads: int | None = None
    context: int = 4096
    slots: int = 1
    start_timeout_s: float = 180.0
    prefer_native: bool = True

    def __post_init__(self) -> None:
        at_least("local", 1, threads=self.threads, slots=self.slots, start_timeout_s=self.start_timeout_s)
        at_least("local", 256, context=self.context)


class FaultConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Per-request fault probabilities of the simulated server (sum <= 1), each request drawing
    from the server seed and its own body (:mod:`combee_fast.sim.fault_draws`).

    ``rate_429`` answers 429 with ``Retry-After`` (``retry_after_s`` simulated seconds, sent
    also as ``retry-after-ms``); ``rate_500`` answers 500; ``rate_drop`` closes the connection
    without an answer; ``rate_stall`` holds the request ``stall_s`` simulated seconds, then
    drops it; ``rate_malformed`` sends invalid JSON as the content of a JSON-schema request
    (free-text requests are unaffected); ``rate_truncated`` cuts the completion to a random
    fraction of itself with ``finish_reason="length"``.
    """

    rate_429: float = 0.0
    rate_500: float = 0.0
    rate_drop: float = 0.0
    rate_stall: float = 0.0
    rate_malformed: float = 0.0
    rate_truncated: float = 0.0
    retry_after_s: float = 1.0
    stall_s: float = 600.0

    def __post_init__(self) -> None:
        rates = self.rates()
        for kind, rate in zip(FAULT_KINDS, rates):
            if not 0.0 <= rate <= 1.0:
                raise ConfigError(f"fault rate_{kind} must be in [0, 1], got {rate!r}")
        if sum(rates) > 1.0 + 1e-9:
            raise ConfigError(f"fault rates sum to {sum(rates):g}; they must sum to <= 1")
        if self.retry_after_s < 0 or self.stall_s < 0:
            raise ConfigError("fault retry_after_s and stall_s must be >= 0")

    def rates(self) -> tuple[float, ...]:
        return (self.rate_429, self.rate_500, self.rate_drop, self.rate_stall,
                self.rate_malformed, self.rate_truncated)


class SimConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The in-process simulated endpoint: latency preset, real seconds per simulated second,
    random latency jitter, injected faults, and the task-world variant it plays
    (:data:`combee_fast.sim.world.WORLD_VARIANTS`: ``default``, ``uninformative``, whose
    reflections carry no information, ``noisy``, whose answers are drawn per call, ``harmful``,
    some of whose lessons are wrong...; joined by ``+`` they combine)."""

    preset: str = "h200-70b"
    time_scale: float = 0.01
    latency_jitter: float = 0.0
    faults: FaultConfig = msgspec.field(default_factory=FaultConfig)
    world: str = "default"  # task-world variant: default, collapse, uninformative, noisy, harmful (combee_fast.sim.world)


class TrackingConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Experiment tracking of a ``learn`` run (:mod:`combee_fast.readout.mlflow_log`): with ``mlflow``,
    parameters, each step's metrics and the run's page and artifacts go to the MLflow tracking
    store ``mlflow_uri`` (None: ``MLFLOW_TRACKING_URI``, else the local file store ``mlruns``),
    under the experiment ``experiment``."""

    mlflow: bool = False
    mlflow_uri: str | None = None
    experiment: str = "combee"


class CacheConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The record/replay cache: a file and a mode (off, record, replay, record-missing)."""

    path: str | None = None
    mode: str = "off"


S = TypeVar("S")


class SessionConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Everything a learning run needs. ``learner`` (``ace``, ``gepa``, ``textgrad``, a learner
    of an installed plugin, or ``module:object``; None: the one the method names, ACE for
    ``sequential``/``naive``/``combee``) and ``method`` pick the registered pair
    (:mod:`combee_fast.learners`). ``endpoints`` and ``sampling`` are keyed by the learner's
    role names, their pools (``serve``, ``evaluate``, ``propose``) or ``default``
    (:mod:`combee_fast.roles.spec`; unknown keys are refused when the session opens). Roles
    without an endpoint URL are served by the local server (``local``) or else the in-process
    simulated endpoint; without ``local``, either every role has a URL or none has. ``learners``
    holds each learner's own settings by its name (``[learners.gepa]``), as tables: a kind
    declaring ``settings`` reads its section through :meth:`learner_settings`; a settings Struct
    given from Python is kept as its table."""

    learner: str | None = None
    method: str = "combee"
    seed: int = 0
    token_budget: int | None = None
    use_ground_truth: bool = True
    task: TaskConfig = msgspec.field(default_factory=TaskConfig)
    map: MapConfig = msgspec.field(default_factory=MapConfig)
    combee: CombeeConfig = msgspec.field(default_factory=CombeeConfig)
    controller: ControllerConfig = msgspec.field(default_factory=ControllerConfig)
    train: TrainConfig = msgspec.field(default_factory=TrainConfig)
    eval: EvalConfig = msgspec.field(default_factory=EvalConfig)
    agent: AgentConfig = msgspec.field(default_factory=AgentConfig)
    executor: ExecutorConfig = msgspec.field(default_factory=ExecutorConfig)
    sandbox: SandboxConfig = msgspec.field(default_factory=SandboxConfig)
    transport: TransportConfig = msgspec.field(default_factory=TransportConfig)
    endpoints: dict[str, EndpointSpec] = msgspec.field(default_factory=dict)  # role, pool or "default"
    local: LocalConfig | None = None
    sim: SimConfig = msgspec.field(default_factory=SimConfig)
    cache: CacheConfig = msgspec.field(default_factory=CacheConfig)
    sampling: dict[str, SamplingConfig] = msgspec.field(default_factory=dict)  # role, pool or "default"
    tracking: TrackingConfig = msgspec.field(default_factory=TrackingConfig)
    learners: dict[str, Any] = msgspec.field(default_factory=dict)  # learner name -> its section (a table)

    def __post_init__(self) -> None:
        if any(isinstance(section, msgspec.Struct) for section in self.learners.values()):  # given from Python
            msgspec.structs.force_setattr(self, "learners", {
                name: msgspec.to_builtins(section) if isinstance(section, msgspec.Struct) else section
                for name, section in self.learners.items()})
        at_least("session", 1, token_budget=self.token_budget)
        _seeds_in_range("session", seed=self.seed)
        for name, spec in self.endpoints.items():
            if spec.url is None and spec.model is not None:  # a model without a server: not the simulator
                flag = "--endpoint" if name == "default" else f"--role-endpoint {name}=URL"
                raise ConfigError(f"endpoint {name!r} names model {spec.model!r} but no URL: give {flag} too")
        if self.local is not None and "default" in self.endpoints:
            raise ConfigError("--local is the endpoint of every role without its own: give no --endpoint/--model "
                              "with it (--role-endpoint ROLE=URL is fine)")

    def learner_settings(self, name: str, settings: type[S]) -> S:
        """The learner ``name``'s own settings: its section of :attr:`learners` decoded as
        ``settings`` (a msgspec Struct type, the one its kind declares), its defaults when the
        configuration has none; :class:`ConfigError` naming the section when it does not decode."""
        section = self.learners.get(name)
        if isinstance(section, settings):
            return section
        try:
            return msgspec.convert(section or {}, settings)
        except msgspec.ValidationError as exc:
            raise ConfigError(f"learners.{name}: {exc}") from None

    def sampling_for(self, *keys: str) -> SamplingConfig:
        """How the role known by ``keys`` (its names, then its pool: most specific first) samples:
        each table found over the next, over ``default`` (see :class:`SamplingConfig`)."""
        merged = self.sampling.get("default") or SamplingConfig()
        for key in reversed(keys):
            own = self.sampling.get(key)
            if own is not None:
                merged = own.over(merged)
        return merged

    def endpoint_for(self, *keys: str) -> EndpointSpec:
        """The endpoint serving the role known by ``keys`` (its names, then its pool): the first
        of them with an endpoint, else the default, else (URL None) the local server or the simulator."""
        for key in (*keys, "default"):
            if key in self.endpoints:
                return self.endpoints[key]
        return EndpointSpec()


RELEASE_POLICIES = ("none", "shadow", "staged", "hold")
"""How an online learner releases a learned version (:mod:`combee_fast.embedded.release`); the
experiment card's ``failure_cost.canary_policy`` names one of them."""


class ReleaseConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How an online learner's new versions reach requests (:mod:`combee_fast.embedded.release`).

    ``policy``: ``none`` (every learned version is served at once), ``shadow`` (a candidate is
    scored on ``shadow_share`` of the submitted tasks, re-run with its context, never served;
    at most ``shadow_in_flight`` re-runs at once), ``staged`` (a candidate is served to the
    growing ``stages`` shares of requests, sticky by key; the last stage is 1.0, promotion) or
    ``hold`` (a candidate waits for ``approve`` or ``reject``). ``margin``: the accuracy a
    candidate may lose and still be promoted (a fraction; the card's ``claim.margin``);
    ``alpha``: the error rate of the anytime-valid test behind every automatic decision.
    ``status_every``: rewards between two status events; ``keep_versions``: versions whose
    rewards and intervals are kept (and rolled-back texts remembered: the last ``keep_versions``)."""

    policy: str = "none"
    margin: float = 0.02
    alpha: float = 0.05
    stages: tuple[float, ...] = (0.01, 0.1, 0.5, 1.0)
    shadow_share: float = 0.2
    shadow_in_flight: int = 16
    status_every: int = 100
    keep_versions: int = 64

    def __post_init__(self) -> None:
        if self.policy not in RELEASE_POLICIES:
            raise ConfigError(f"release.policy: unknown policy {self.policy!r}; choose one of: {', '.join(RELEASE_POLICIES)}")
        if not 0.0 <= self.margin < 1.0:
            raise ConfigError(f"release.margin must be in [0, 1), got {self.margin}")
        if not 0.0 < self.alpha < 1.0:
            raise ConfigError(f"release.alpha must be in (0, 1), got {self.alpha}")
        stages = self.stages
        if not stages or stages[-1] != 1.0 or stages[0] <= 0.0 or any(b <= a for a, b in zip(stages, stages[1:])):
            raise ConfigError(f"release.stages must rise strictly from above 0 to 1.0, got {list(stages)}")
        if not 0.0 < self.shadow_share <= 1.0:
            raise ConfigError(f"release.shadow_share must be in (0, 1], got {self.shadow_share}")
        at_least("release", 1, shadow_in_flight=self.shadow_in_flight, status_every=self.status_every,
                  keep_versions=self.keep_versions)


class OnlineConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The online learner: a batch takes the rollouts waiting when the learner is free, up to a
    ceiling (at most ``batch_size``, the planned bs*), and closes ``max_wait_s`` after its first;
    the ceiling shrinks when a batch's publish latency passes ``max_publish_s``. ``queue_size``
    rollouts wait at most (``submit`` waits when full); ``workers`` reflections run at once;
    ``keep_batches`` applied batches are kept. Shuffle and reduce follow ``combee``, as offline.
    ``learner``: the registered learner that learns online (:mod:`combee_fast.learners`).
    ``release``: how a learned version reaches requests (:class:`ReleaseConfig`)."""

    learner: str = "ace"
    batch_size: int = 32
    max_wait_s: float = 1.0
    max_publish_s: float = 60.0
    queue_size: int = 1024
    workers: int = 64
    keep_batches: int = BATCHES_KEPT
    seed: int = 0
    combee: CombeeConfig = msgspec.field(default_factory=CombeeConfig)
    release: ReleaseConfig = msgspec.field(default_factory=ReleaseConfig)

    def __post_init__(self) -> None:
        at_least("online", 1, batch_size=self.batch_size, queue_size=self.queue_size, workers=self.workers,
                  keep_batches=self.keep_batches)
        _seeds_in_range("online", seed=self.seed)
        if not self.max_publish_s > self.max_wait_s >= 0:
            raise ConfigError(f"online: need max_publish_s > max_wait_s >= 0, got {self.max_publish_s}, {self.max_wait_s}")


class EmbedConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How an embedded learner (:class:`~combee_fast.embedded.threaded.ThreadedLearner`,
    :class:`~combee_fast.embedded.process.ProcessLearner`) sets up inside the host's process.

    ``switch_interval_s`` (threaded only): :func:`sys.setswitchinterval` while the learner runs
    (process-wide; the previous value is restored at stop). A thread waiting for the GIL gets it
    after at most about this long, so it bounds how late the host's loop wakes while the learner
    computes; ``None`` leaves the interpreter's setting (5 ms by default). ``gc_threshold0``: the
    young generation's threshold while the learner runs (process-wide, restored at stop): fewer
    young collections, so request-sized garbage dies before it is promoted and the long full
    collections that stop every thread come rarely; ``None`` leaves it. ``child_sched_idle`` (process
    only, Linux): every thread of the child runs under ``SCHED_IDLE``, so it gets a core only when
    no normal thread wants it, and a waking host thread preempts it at once (``bench/loop_lag.py``
    measures the host's loop lag either way). The learner then progresses only on CPU the host
    leaves free. ``child_nice`` (process only): added to the child's niceness where
    ``SCHED_IDLE`` is off or unavailable; ``None`` leaves it. (Not offered for the thread: a descheduled learner
    thread still holds the GIL, and a lower priority made the host's worst stalls longer.)
    ``start_timeout_s``: how long ``start`` waits for the learner's loop.
    """

    switch_interval_s: float | None = 0.0002
    gc_threshold0: int | None = 20_000
    child_sched_idle: bool = True
    child_nice: int | None = 10
    start_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.switch_interval_s is not None and not self.switch_interval_s > 0:
            raise ConfigError(f"embed.switch_interval_s must be > 0, got {self.switch_interval_s}")
        at_least("embed", 1, gc_threshold0=self.gc_threshold0, child_nice=self.child_nice)
        if not self.start_timeout_s > 0:
            raise ConfigError(f"embed.start_timeout_s must be > 0, got {self.start_timeout_s}")


class VerifyConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``combee verify`` and ``combee diagnose`` (:mod:`combee_fast.verify`).

    ``seeds``: the re-seeds every hardware class is run under (at least 3). ``serial_time_scale``:
    real seconds per simulated second of the serial baseline on the simulated endpoint (one
    request in flight, so load never changes its latency and a fine scale is safe).
    ``baseline_cache``: folder of the cached serial-baseline cells, one file per (seed, hardware
    class, baseline configuration). ``checkpoints``: held-out evaluations along the diagnose curve.
    ``plateau_window``: the last fraction of the curve's rollouts over which a plateau must gain
    no more than the card's margin.
    """

    seeds: tuple[int, ...] = (0, 1, 2)
    serial_time_scale: float = 0.001
    baseline_cache: str = "runs/baseline-cache"
    checkpoints: int = 12
    plateau_window: float = 0.35

    def __post_init__(self) -> None:
        _seeds_in_range("verify", **{f"seeds[{i}]": seed for i, seed in enumerate(self.seeds)})
        if len(set(self.seeds)) < 3:
            raise ConfigError(f"verify.seeds: at least 3 distinct seeds, got {list(self.seeds)}")
        if not self.serial_time_scale > 0:
            raise ConfigError(f"verify.serial_time_scale must be > 0, got {self.serial_time_scale}")
        at_least("verify", 3, checkpoints=self.checkpoints)
        if not 0 < self.plateau_window < 1:
            raise ConfigError(f"verify.plateau_window must be in (0, 1), got {self.plateau_window}")


def load_config(path: str | Path) -> SessionConfig:
    """A :class:`SessionConfig` from a TOML (``.toml``) or JSON file (e.g. a run's ``config.json``).

    Missing fields keep their defaults; an unknown field or a wrong type raises
    :class:`ConfigError` naming the file and the field.
    """
    return config_from_dict(read_config_file(path), source=str(path))


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The raw table of a TOML or JSON config file; :class:`ConfigError` if unreadable."""
    file = Path(path)
    try:
        data = read_regular(file)
        table = tomllib.loads(data.decode()) if file.suffix == ".toml" else msgspec.json.decode(data)
    except OSError as exc:
        raise ConfigError(f"{path}: not a readable config file: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, msgspec.DecodeError) as exc:
        raise ConfigError(f"{path}: not a readable config file: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not a readable config file: its values are nested too deeply") from None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: a config file holds one table, got {type(table).__name__}")
    return table


SESSION_FIELDS = frozenset(field.name for field in msgspec.structs.fields(SessionConfig))


def with_sections(table: dict[str, Any]) -> dict[str, Any]:
    """``table`` with every top-level table named for no setting moved under ``learners``: a
    learner's section given by its name alone, the form of files written before learners had
    sections (a run's ``config.json`` with ``"gepa": {...}``). ConfigError when one is given both ways."""
    moved = {name: value for name, value in table.items() if name not in SESSION_FIELDS and isinstance(value, dict)}
    if not moved:
        return table
    learners = table.get("learners")
    learners = dict(learners) if isinstance(learners, dict) else {}
    for name, section in moved.items():
        if name in learners:
            raise ConfigError(f"learner {name!r}'s settings are given twice: as [{name}] and as [learners.{name}]")
        learners[name] = section
    return {**{name: value for name, value in table.items() if name not in moved}, "learners": learners}


def config_from_dict(table: dict[str, Any], *, source: str = "config") -> SessionConfig:
    """Build a :class:`SessionConfig` from nested builtins (a learner's section may be a top-level
    table named for it: :func:`with_sections`); errors name ``source`` and the field. A learner's
    section is decoded by its kind (:func:`combee_fast.learners.settled`), not here."""
    try:
        return msgspec.convert(with_sections(table), SessionConfig)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def config_to_dict(config: SessionConfig, *, public: bool = False) -> dict[str, Any]:
    """Nested builtins that :func:`config_from_dict` turns back into ``config``. ``public`` (what
    files get): endpoint URLs without ``user:password@`` (the key itself is never in the config,
    only the name of its environment variable)."""
    table = msgspec.to_builtins(config)
    if public:
        for spec in table.get("endpoints", {}).values():
            if spec.get("url"):
                spec["url"] = strip_userinfo(spec["url"])
    return table
