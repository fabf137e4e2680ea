"""The ``sim-server`` subcommand: run a :class:`~combee_fast.sim.server.SimServer` until Ctrl-C.

``combee_fast/cli.py`` calls :func:`register`; ``python -m combee_fast.sim.cli
sim-server ...`` runs it standalone. The first line on stdout is ``listening on <url>``.

By default it serves what a run without an endpoint gets in process: every bundled task's world
(:mod:`combee_fast.sim.worlds`) at the in-process endpoint's latency preset and time scale
(:class:`~combee_fast.config.SimConfig`), answering the roles of every registered learner by
its responders (the learner registry's role table: the built-in learners', an installed
plugin's, and those of ``--learner package.module:object``; given by ``combee``'s CLI as
:func:`register`'s ``world_roles``). This package imports no learner: ``python -m
combee_fast.sim.cli`` alone plays no learner's roles (for transport benchmarks and the server's
own tests). ``--world TASK`` plays one task, a user's by its path too (a ``jsonl`` or ``traces``
task with ``--data`` and ``--task-option``, as ``learn`` takes them); ``--world echo`` answers
every request with its last user message (for transport benchmarks). ``GET /v1/models`` lists
one model, ``--model`` (default ``sim``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import sys

from collections.abc import Callable, Sequence

from combee_fast.engine.loop import run
from combee_fast.errors import EXIT_OK, EXIT_USAGE, ConfigError
from combee_fast.redact import escape_control
from combee_fast.config import FaultConfig, SimConfig
from combee_fast.errors import CombeeError
from combee_fast.sim.responders import NO_ROLES, RoleTable, SimReply, SimRequest
from combee_fast.sim.server import PRESETS, SIM_MODEL, EchoResponder, LatencyPreset, Responder, SimServer
from combee_fast.sim.peers import PeerReplies, PeerRouter
from combee_fast.sim.world import TaskWorld
from combee_fast.sim.worlds import BUNDLED_TASKS, TaskWorlds, bundled_worlds, task_world
from combee_fast.tasks.registry import get_task, task_option

ECHO = "echo"
"""``--world echo``: answer every request with its last user message."""

SERVER_GC_THRESHOLD0 = 20_000
"""Young-generation GC threshold of a standalone server process. With about a thousand requests in
flight the default (700) collects many times a second, and its older-generation collections pause
the loop, holding every answer due meanwhile (``bench/throughput.py`` shows the server's CPU per request)."""


WorldRoles = Callable[[Sequence[str]], RoleTable]
"""The role table the worlds answer, given the learners ``--learner`` names (paths): every
registered learner's and theirs (:func:`combee_fast.learners.role_table`)."""


def register(subparsers: argparse._SubParsersAction, world_roles: WorldRoles | None = None) -> None:
    """Add the ``sim-server`` subcommand; its handler is ``args.handler(args) -> int``. The
    worlds answer the table ``world_roles`` gives (None: no learner's roles, and no
    ``--learner``)."""
    sim = SimConfig()
    parser = subparsers.add_parser(
        "sim-server",
        help="run the simulated OpenAI-compatible inference server on loopback",
        description="Simulated continuous-batching inference server playing the task world of every bundled task "
                    "(or of --world TASK), as a run without an endpoint gets it in process.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=_port, default=8000, help="1-65535, or 0 to pick a free port")
    parser.add_argument("--model", default=SIM_MODEL, help="the model name GET /v1/models lists")
    parser.add_argument("--preset", choices=sorted(PRESETS), default=sim.preset, help="latency model")
    parser.add_argument("--constant-latency", type=float, metavar="SECONDS",
                        help="every request takes exactly SECONDS (overrides --preset)")
    parser.add_argument("--time-scale", type=float, default=sim.time_scale,
                        help="real seconds slept per simulated second (default: as learn's simulated endpoint)")
    parser.add_argument("--latency-jitter", type=float, default=sim.latency_jitter,
                        help="+-fraction of random per-request latency change")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault and jitter draws")
    parser.add_argument("--world", metavar="TASK",
                        help=f"play one task's world: formula, finer, terminal (the agent task), jsonl or traces "
                             f"(with --data), or {ECHO} "
                             f"(answer with the last user message); default: every bundled task "
                             f"({', '.join(BUNDLED_TASKS)})")
    parser.add_argument("--data", help="the data file of a jsonl or traces --world")
    if world_roles is not None:
        parser.add_argument("--learner", action="append", default=[], metavar="PACKAGE.MODULE:OBJECT",
                            help="also answer the roles of this learner, by its responders (repeatable; installed "
                                 "plugins' roles are answered without it)")
    parser.add_argument("--task-option", type=task_option, action="append", default=[], metavar="KEY=VALUE",
                        help="an option of the --world task, as learn takes it (repeatable)")
    parser.add_argument("--peers", action="store_true",
                        help="also answer other learners' prompts (requests without a combee role header, e.g. the "
                             "PyPI gepa package's), as the peers bench does: task questions of the (first) world "
                             "with an answer line, reflections with a rewritten instruction")
    parser.add_argument("--world-variant", default=sim.world,
                        help="the task-world variant: default, collapse, uninformative (reflections carry no "
                             "information), noisy (answers drawn per call) or harmful (some lessons are wrong); "
                             "combine with '+'")
    for kind in ("429", "500", "drop", "stall", "malformed", "truncated"):
        parser.add_argument(f"--rate-{kind}", type=float, default=0.0, help=f"probability of a {kind} fault")
    faults = FaultConfig()
    parser.add_argument("--retry-after", type=float, default=faults.retry_after_s, help="simulated seconds in Retry-After")
    parser.add_argument("--stall", type=float, default=faults.stall_s, help="simulated seconds a stalled request hangs")
    parser.add_argument("--reject-json-schema", action="store_true",
                        help="answer response_format json_schema with HTTP 500, as llama-cpp-python does")
    parser.add_argument("--reuse-port", action="store_true",
                        help="listen with SO_REUSEPORT, so several sim-server processes can share one port "
                             "(each with its own latency model: use with --constant-latency)")
    parser.set_defaults(handler=run_sim_server, world_roles=world_roles)


def _port(text: str) -> int:
    """argparse type: a TCP port, 1-65535 (0: a free one)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port, 1-65535 (or 0 for a free one), got {text!r}")
    return port


def server_from_args(args: argparse.Namespace) -> SimServer:
    """The server the parsed ``sim-server`` arguments describe."""
    faults = FaultConfig(
        rate_429=args.rate_429, rate_500=args.rate_500, rate_drop=args.rate_drop,
        rate_stall=args.rate_stall, rate_malformed=args.rate_malformed,
        rate_truncated=args.rate_truncated, retry_after_s=args.retry_after, stall_s=args.stall,
    )
    preset = args.preset if args.constant_latency is None else LatencyPreset.constant(args.constant_latency)
    table = args.world_roles(args.learner) if args.world_roles is not None and args.world != ECHO else NO_ROLES
    responder = worlds = _responder(args, table)
    if args.peers:
        if not isinstance(responder, (TaskWorld, TaskWorlds)):
            raise ConfigError("--peers answers with a task world: drop --world echo")
        world = responder.worlds[0] if isinstance(responder, TaskWorlds) else responder
        responder = PeerRouter(responder, PeerReplies(world), table.responders)
    elif isinstance(responder, (TaskWorld, TaskWorlds)):
        responder = RolelessNotice(responder)
    played = worlds.tasks if isinstance(worlds, TaskWorlds) else (worlds.task.name,) \
        if isinstance(worlds, TaskWorld) else None
    answered = worlds.plays() if isinstance(worlds, (TaskWorld, TaskWorlds)) else None
    return SimServer(responder, preset=preset, time_scale=args.time_scale, faults=faults,
                     seed=args.seed, latency_jitter=args.latency_jitter, host=args.host, port=args.port,
                     reject_json_schema=args.reject_json_schema, reuse_port=args.reuse_port, model=args.model,
                     worlds=played, roles=answered)


class RolelessNotice:
    """Answers every request by ``responder``, and says once on stderr when one carries no role
    header of ours (another learner's prompt, e.g. the PyPI gepa package's), which only
    ``--peers`` answers as a task: without it such a prompt gets no usable answer."""

    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.told = False

    def respond(self, request: SimRequest) -> str | SimReply:
        if not request.role and not self.told:
            self.told = True
            print("sim-server: a request without a combee role header (another learner's prompt, e.g. the PyPI "
                  "gepa package's) gets no usable answer from the task world; start the server with --peers to "
                  "answer such prompts", file=sys.stderr, flush=True)
        return self.responder.respond(request)


def _responder(args: argparse.Namespace, table: RoleTable) -> Responder:
    """The world (or echo) the arguments ask for, answering the roles of ``table``;
    :class:`ConfigError` for a bad task or variant."""
    options = dict(args.task_option)
    if args.data:
        options["path"] = args.data
    if args.world == ECHO:
        return EchoResponder()
    try:
        if args.world is None:
            if options:
                raise ConfigError("--data and --task-option belong to a --world task")
            return bundled_worlds(table, variant=args.world_variant)
        return task_world(get_task(args.world, **options), table, variant=args.world_variant)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


async def _serve(server: SimServer) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with server:
        gc.freeze()  # the start-up heap (imports, the task world) is never collected again
        gc.set_threshold(SERVER_GC_THRESHOLD0, *gc.get_threshold()[1:])
        print(f"listening on {server.url}", flush=True)
        await stop.wait()
        counters = server.counters()
    print(f"stopped after {counters.requests} requests (peak in flight {counters.peak_in_flight})",
          file=sys.stderr)


def run_sim_server(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM; returns the exit status (2, with one line, for a bad option
    value or an address it cannot listen on)."""
    try:
        server = server_from_args(args)
        run(_serve(server))
    except CombeeError as exc:
        print(f"sim-server: {escape_control(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # the port is taken, the host is not ours...
        print(f"sim-server: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m combee_fast.sim.cli")
    register(parser.add_subparsers(required=True))  # no learner's roles (combee sim-server: every learner's)
    args = parser.parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
