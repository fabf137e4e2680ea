"""The ``ray`` backend: episodes in Ray actors, on this machine or across a running cluster.

Where. ``executor.ray_address`` None starts a Ray instance on this machine for the run (one
``sandbox`` resource and ``ray_cpus`` CPUs per actor, no dashboard, a small object store) and
stops it at the end; ``auto`` or ``HOST:PORT`` joins a running cluster (a ``HOST:PORT`` that does
not accept a connection within :data:`CONNECT_TIMEOUT_S`, or accepts one but does not answer as
a cluster's head (a raylet's port), is a :class:`ConfigError`, before Ray is asked; so is a cluster with fewer ``sandbox`` resources or CPUs than the actors ask). Only this
module imports Ray, and only when ``executor.backend = "ray"`` is chosen.

Actors. ``executor.ray_actors`` async actors (:class:`RolloutActor`), spread over the nodes, each
asking ``ray_cpus`` CPUs and one ``sandbox`` resource (a node offers as many as it can hold
sandbox pools: ``ray start --resources '{"sandbox": N}'``). Each builds, on its node, the
runtime of the spec (:func:`~combee_fast.rollouts.spec.build_runtime`: the agent, the task's or
the user's environments, sandboxes with a uid range of its own) and runs at most its share of
the executor's capacity at once. The driver never has more episodes submitted to an actor than
that share (backpressure: nothing piles up in the object store), nor more than ``capacity`` in
all. Each context text is put in the object store once (``ray.put``), keyed by its version and
hash (the last :data:`CONTEXTS_KEPT` kept), and an episode is sent without it. The learner stays
on the driver: it alone applies what the episodes bring back, in the engine's order (by item).

Model calls. An actor calls the endpoints itself, through clients it builds from the session's
role map (:meth:`~combee_fast.roles.calls.RoleCalls.role_map`: every replica of a pool, what
start-up found of each, the sampling), not through the driver: the model traffic of a cluster
does not funnel through one process. The agent's calls go to the serving role's endpoint; a call
the environment makes as another role (a tau2 task's customer, ``user``, through ``use_chat``)
goes to that role's endpoint with that role's sampling, as on the driver
(:meth:`~combee_fast.rollouts.chat.AgentChat.send`). Each call's usage and latency are on its step
of the trajectory (the ledger and the critical path read them as on one box), and each call's
outcome (its role, its error, its text) comes back beside the trajectory and is counted on the
driver as the session's own call of that role (``calls.json``, ``errors.jsonl``). Results do not
depend on where a call was made: each request carries its seed from the seed tree, and the
endpoints answer by request.
The in-process simulated endpoint is an HTTP server on the driver's loopback, which actors on the
driver's machine reach; on other machines the roles need endpoint URLs those nodes can reach.
The replay cache (a file on the driver) holds as on one box: its results when the run starts are
shipped to every actor once (:class:`ShippedCache` answers from them, as the driver's cache
would), and what an actor records comes back beside a trajectory and is appended to the driver's
file there.

Faults. An actor that dies (its process, or its node) fails none of the episodes it was running:
each is sent again to another live actor, at most :data:`MAX_RERUNS` times, every re-run counted
(:attr:`RayExecutor.reruns`) and an :class:`~combee_fast.engine.events.EpisodeRerun` event on the
role calls' hub (a line of ``errors.jsonl``, a notice on stderr). Dead actors are
not replaced: the run goes on with fewer. An episode with no actor left, or past its re-runs, is
a failed trajectory (``worker_died``). A trajectory is returned once, by the one call that
submitted it, so no episode is lost or counted twice.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import os
import socket
import threading
from pathlib import Path
from typing import Any

import msgspec

from combee_fast.errors import ConfigError

try:
    import ray
    from ray.exceptions import RayError, RayTaskError
except ImportError:  # the backend is chosen but its extra is not installed
    raise ConfigError("executor.backend 'ray' needs Ray: pip install -e '.[ray]'") from None

from combee_fast.endpoint.cache import TRANSPORT_ERRORS, CacheMode, CacheRecord, ReplayCache
from combee_fast.endpoint.calls import ChatRequest, ChatResult
from combee_fast.engine.events import EpisodeRerun
from combee_fast.roles.calls import RoleCalls
from combee_fast.roles.clients import RoleMap, open_role_clients
from combee_fast.rollouts.chat import AgentChat
from combee_fast.rollouts.episode import ChatFacts, Episode, Runtime, failed_trajectory, run_episode
from combee_fast.rollouts.spec import RolloutSpec, build_runtime
from combee_fast.sandbox.sessions import Sandboxes, uid_span
from combee_fast.schema import CallError, Trajectory

SANDBOX_RESOURCE = "sandbox"
"""The custom Ray resource a node offers per sandbox pool it can hold; each actor asks one."""

MAX_RERUNS = 2
"""Times one episode is sent again after the actor running it died."""

CONTEXTS_KEPT = 8
"""Context texts whose object-store reference the driver keeps (the newest versions)."""

CONNECT_TIMEOUT_S = 5.0
"""Seconds a ``HOST:PORT`` cluster address may take to accept a connection at start-up."""

START_TIMEOUT_S = 120.0
"""Seconds an actor may take to be placed, import and build its runtime."""

LOCAL_OBJECT_STORE_BYTES = 96 * 2**20
"""The object store of a Ray instance started for the run (contexts and trajectories are small)."""

RAY_LOG_LEVEL = logging.ERROR
"""What Ray's own log says on the driver's stderr (its start-up chatter is not the run's)."""


def _gcs_problem(address: str) -> str | None:
    """Why ``address`` (``HOST:PORT``, accepting connections) is not a Ray cluster's GCS, asked
    in one call of Ray's own GCS client (a raylet's port refuses it at once), within
    :data:`CONNECT_TIMEOUT_S`; None: it is one. Ray's client logs its failure on file descriptor 2
    (C++, past Python's ``sys.stderr``): silenced for the call, so the caller's one line is all
    that is said."""
    from ray._raylet import GcsClient  # type: ignore[attr-defined]  # compiled, without stubs

    outcome: list[str | None] = []

    def ask() -> None:
        try:
            GcsClient(address=address)
            outcome.append(None)
        except Exception as exc:  # Ray's RpcError and its kin: the port speaks no GCS
            outcome.append(" ".join(str(exc).split()) or type(exc).__name__)

    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        asking = threading.Thread(target=ask, name="combee-ray-probe", daemon=True)
        asking.start()
        asking.join(CONNECT_TIMEOUT_S)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)
    if not outcome:
        return f"no answer as one within {CONNECT_TIMEOUT_S:g} s"
    return outcome[0]


class ActorStart(msgspec.Struct, frozen=True):
    """What an actor builds itself from: the spec, the role map, the endpoint's facts, its index,
    its share of the capacity, its first sandbox uid, and the driver's replay cache (its file's
    name and mode; None: no cache)."""

    spec: RolloutSpec
    role_map: RoleMap
    facts: ChatFacts
    index: int
    capacity: int
    uid_first: int
    cache_path: str | None = None
    cache_mode: str | None = None


class ShippedCache(ReplayCache):
    """The driver's replay cache as an actor sees it: the results it held when the run started
    (``records``), answered as the driver's cache answers them; what the actor's clients record
    is kept in :attr:`recorded` (until taken) to be appended to the driver's file. Writes no file."""

    def __init__(self, path: str, mode: CacheMode, records: list[CacheRecord]) -> None:  # no super(): no file here
        self.path = Path(path)
        self.mode = mode
        self._results = {record.key: record.result for record in records}
        self._file = None
        self.recorded: list[CacheRecord] = []

    @property
    def records(self) -> bool:
        return self.mode in (CacheMode.RECORD, CacheMode.RECORD_MISSING)

    def put(self, key: str, result: ChatResult) -> None:
        if result.error is not None and result.error.kind in TRANSPORT_ERRORS:
            return
        self._results[key] = result
        self.recorded.append(CacheRecord(key, result))


class CallNote(msgspec.Struct, frozen=True):
    """One model call an actor made: its role, its error (None: it succeeded) and its text."""

    role: str
    error: CallError | None
    text: str | None


class EpisodeResult(msgspec.Struct, frozen=True):
    """What an actor sends back for one episode: its trajectory, its calls in order, and the
    results its replay cache recorded since the last episode it sent back."""

    trajectory: Trajectory
    calls: tuple[CallNote, ...]
    recorded: tuple[CacheRecord, ...] = ()


class RolloutActor:
    """One rollout worker in a Ray actor (module docstring); its methods run on the actor's loop."""

    def __init__(self, start: bytes, cached: bytes) -> None:
        self._start = msgspec.msgpack.decode(start, type=ActorStart)
        self._cached = cached
        self._cache: ShippedCache | None = None
        self._stack = contextlib.AsyncExitStack()
        self._runtime: Runtime | None = None
        self._chat: AgentChat | None = None
        self._encoder = msgspec.msgpack.Encoder()
        self._episode = msgspec.msgpack.Decoder(Episode)

    async def ready(self) -> tuple[str, str | None]:
        """Build the runtime and the clients; ``(this node's address, why it could not: None)``."""
        start, spec = self._start, self._start.spec
        node = ray.util.get_node_ip_address()
        sandboxes = Sandboxes(spec.sandbox, step_timeout_s=spec.executor.step_timeout_s, uid_first=start.uid_first,
                              uid_count=start.capacity)
        self._stack.push_async_callback(sandboxes.close)
        try:
            self._runtime = build_runtime(spec, start.facts, sandboxes)
            if self._runtime.pool is not None:
                await sandboxes.check()
            if start.cache_path is not None and start.cache_mode is not None:
                records = msgspec.msgpack.decode(self._cached, type=list[CacheRecord])
                self._cache = ShippedCache(start.cache_path, CacheMode(start.cache_mode), records)
            self._cached = b""
            clients = await open_role_clients(start.role_map, self._stack, cache=self._cache)
        except Exception as exc:  # the user's agent or environment failed to build, or no sandbox here: said once
            return node, f"{type(exc).__name__}: {exc}" if not isinstance(exc, ConfigError) else str(exc)
        calls = RoleCalls.on(start.role_map, None, clients)
        self._chat = AgentChat(calls, spec.agent.tool_calls, role=start.facts.role)
        return node, None

    async def run(self, episode: bytes, context: str) -> bytes:
        """Run one episode (sent without its context text) to its :class:`EpisodeResult`."""
        assert self._runtime is not None and self._chat is not None
        chat, calls = self._chat, []

        async def call(request: ChatRequest) -> ChatResult:
            result = await chat.send(request)
            calls.append(CallNote(request.role, result.error, result.text))
            return result

        submitted = msgspec.structs.replace(self._episode.decode(episode), context=context)
        trajectory = await run_episode(self._runtime, submitted, call)
        recorded: list[CacheRecord] = []
        if self._cache is not None:
            recorded, self._cache.recorded = self._cache.recorded, []
        return self._encoder.encode(EpisodeResult(trajectory, tuple(calls), tuple(recorded)))

    async def close(self) -> None:
        await self._stack.aclose()


class _Actor:
    """The driver's handle on one actor: how many episodes it runs now, whether it is alive."""

    def __init__(self, index: int, handle: Any) -> None:
        self.index = index
        self.handle = handle
        self.load = 0
        self.alive = True
        self.node = ""


class RayExecutor:
    """A :class:`~combee_fast.protocols.RolloutExecutor` over Ray actors (module docstring);
    each episode sent again after its actor died is an ``EpisodeRerun`` on ``chat.calls.events``."""

    def __init__(self, spec: RolloutSpec, chat: AgentChat, *, task: Any = None) -> None:
        self.spec = spec
        self.chat = chat
        self._task = task
        settings = spec.executor
        self._share = -(-spec.capacity // settings.ray_actors)
        self._room = asyncio.Semaphore(spec.capacity)
        self._changed = asyncio.Condition()
        self._actors: list[_Actor] = []
        self._contexts: collections.OrderedDict[tuple[int, str], Any] = collections.OrderedDict()
        self._encoder = msgspec.msgpack.Encoder()
        self._result = msgspec.msgpack.Decoder(EpisodeResult)
        self._started_ray = False
        self.reruns = 0

    @property
    def capacity(self) -> int:
        return self.spec.capacity

    async def start(self) -> None:
        facts = await self.chat.facts(probe=self.spec.probes_tools)
        self._started_ray = await asyncio.to_thread(self._connect)
        try:
            self._check_resources()
            await self._spawn(facts)
        except BaseException:
            await self.close()
            raise

    def _connect(self) -> bool:
        """Join or start Ray (module docstring); whether this run started it."""
        settings = self.spec.executor
        if ray.is_initialized():  # the caller's own Ray (a driver embedding a session): used, left running
            return False
        address = settings.ray_address
        if address is None:
            actors = settings.ray_actors
            ray.init(address="local", num_cpus=max(1, math.ceil(actors * settings.ray_cpus)),
                     resources={SANDBOX_RESOURCE: actors}, include_dashboard=False, log_to_driver=False,
                     object_store_memory=LOCAL_OBJECT_STORE_BYTES, logging_level=RAY_LOG_LEVEL)
            return True
        # ``auto`` read as Ray reads it (RAY_ADDRESS, else the last cluster ``ray start`` recorded here), so
        # that an address recorded by a cluster since gone is refused at once, not after Ray's long retries
        try:
            found = ray._private.services.canonicalize_bootstrap_address(address)
        except (ConnectionError, ValueError):
            found = None
        if found is None:
            raise ConfigError(f"executor.ray_address {address!r}: no running Ray cluster is recorded on this machine "
                              "(start one with ray start --head, or give HOST:PORT)")
        host, _, port = found.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
        except OSError as exc:
            resolved = "" if address == found else f" ({found})"
            raise ConfigError(f"executor.ray_address {address!r}{resolved}: no Ray cluster answers there "
                              f"({exc.strerror or exc})") from None
        problem = _gcs_problem(found)
        if problem is not None:
            resolved = "" if address == found else f" ({found})"
            raise ConfigError(f"executor.ray_address {address!r}{resolved}: something answers there, but not a Ray "
                              f"cluster's head (is it a raylet's or another server's port?): {problem}")
        try:
            ray.init(address=address, log_to_driver=False, logging_level=RAY_LOG_LEVEL)
        except (ConnectionError, RuntimeError) as exc:
            raise ConfigError(f"executor.ray_address {address!r}: cannot join the Ray cluster: "
                              f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        return True

    def _check_resources(self) -> None:
        settings = self.spec.executor
        offered = ray.cluster_resources()
        wanted = {SANDBOX_RESOURCE: float(settings.ray_actors), "CPU": settings.ray_actors * settings.ray_cpus}
        short = [f"{wanted[name]:g} {name!r} (the cluster offers {offered.get(name, 0):g})"
                 for name in wanted if offered.get(name, 0.0) < wanted[name]]
        if short:
            raise ConfigError(f"executor ray: {settings.ray_actors} actors need {' and '.join(short)}; start nodes "
                              f"with ray start --resources '{{\"{SANDBOX_RESOURCE}\": N}}' or lower --ray-actors")

    async def _spawn(self, facts: ChatFacts) -> None:
        settings = self.spec.executor
        remote = ray.remote(RolloutActor).options(
            num_cpus=settings.ray_cpus, resources={SANDBOX_RESOURCE: 1}, scheduling_strategy="SPREAD",
            max_restarts=0, max_task_retries=0, max_concurrency=2 * self._share + 2)
        role_map = self.chat.calls.role_map()
        cache = self.chat.calls.clients.cache
        cached = ray.put(self._encoder.encode(cache.results() if cache is not None and cache.replays else []))
        for index in range(settings.ray_actors):
            start = ActorStart(self.spec, role_map, facts, index, self._share,
                               self.spec.sandbox.uid_base + index * uid_span(self._share, self.spec.sandbox),
                               None if cache is None else str(cache.path), None if cache is None else cache.mode.value)
            self._actors.append(_Actor(index, remote.remote(self._encoder.encode(start), cached)))
        try:
            answers = await asyncio.wait_for(asyncio.gather(*(a.handle.ready.remote() for a in self._actors)),
                                             START_TIMEOUT_S)
        except TimeoutError:
            raise ConfigError(f"executor ray: the actors were not ready within {START_TIMEOUT_S:g} s") from None
        except RayError as exc:
            raise ConfigError(f"executor ray: an actor did not start: {_first_line(exc)}") from None
        for actor, (node, problem) in zip(self._actors, answers):
            actor.node = node
            if problem is not None:
                raise ConfigError(f"executor ray: actor {actor.index} on {node} did not start: {problem}")

    def _context(self, episode: Episode) -> Any:
        """The object-store reference of ``episode``'s context text, put there once."""
        key = (episode.version, episode.context_sha)
        ref = self._contexts.get(key)
        if ref is None:
            ref = self._contexts[key] = ray.put(episode.context)
            while len(self._contexts) > CONTEXTS_KEPT:
                self._contexts.popitem(last=False)
        else:
            self._contexts.move_to_end(key)
        return ref

    async def _take(self) -> _Actor | None:
        """The least loaded live actor with room (waiting for one); None when none is alive."""
        async with self._changed:
            while True:
                alive = [actor for actor in self._actors if actor.alive]
                if not alive:
                    return None
                actor = min(alive, key=lambda a: (a.load, a.index))
                if actor.load < self._share:
                    actor.load += 1
                    return actor
                await self._changed.wait()

    async def _give_back(self, actor: _Actor, *, dead: bool = False) -> None:
        async with self._changed:
            actor.load -= 1
            actor.alive = actor.alive and not dead
            self._changed.notify_all()

    async def run(self, episode: Episode) -> Trajectory:
        async with self._room:
            bare = self._encoder.encode(msgspec.structs.replace(episode, context=""))
            for attempt in range(MAX_RERUNS + 1):
                actor = await self._take()
                if actor is None:
                    return failed_trajectory(episode, "worker_died", "no Ray actor is left to run it")
                try:
                    data = await actor.handle.run.remote(bare, self._context(episode))
                except RayTaskError as exc:  # the episode's code raised past run_episode: this episode fails
                    await self._give_back(actor)
                    return failed_trajectory(episode, "worker_error", _first_line(exc))
                except RayError as exc:  # the actor died, or its node: the episode goes elsewhere
                    await self._give_back(actor, dead=True)
                    why = f"actor {actor.index} on {actor.node} died: {_first_line(exc)}"
                    if attempt == MAX_RERUNS:
                        return failed_trajectory(episode, "worker_died", f"{why} (after {MAX_RERUNS} re-runs)")
                    self.reruns += 1
                    self.chat.calls.events.emit(EpisodeRerun(episode.key, episode.example.id, why))
                    continue
                await self._give_back(actor)
                result = self._result.decode(data)
                for note in result.calls:
                    self.chat.calls.note(note.role, note.error, note.text)
                cache = self.chat.calls.clients.cache
                if cache is not None and cache.records:
                    for record in result.recorded:
                        cache.put(record.key, record.result)
                return result.trajectory
        raise AssertionError("unreachable")

    async def close(self) -> None:
        actors, self._actors = self._actors, []
        alive = [actor for actor in actors if actor.alive]
        with contextlib.suppress(RayError, TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(a.handle.close.remote() for a in alive),
                                                  return_exceptions=True), 10.0)
        for actor in actors:
            with contextlib.suppress(RayError):
                ray.kill(actor.handle)
        self._contexts.clear()
        if self._started_ray:
            self._started_ray = False
            await asyncio.to_thread(ray.shutdown)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
