"""Which endpoint serves which role, as a value (:class:`RoleMap`), and the one place role
clients are built from it (:func:`open_role_clients`).

The roles are the ones the run's learner (and its agent or task) declares
(:class:`~combee_fast.roles.spec.Role`); nothing here knows a role by name. A session builds its
clients from its configuration's role map; an embedded learner rebuilds them from the session's
(:meth:`~combee_fast.roles.calls.RoleCalls.role_map`) on its own event loop, thread or child
process: same endpoints with every replica, same seed, same sampling per role, same
structured-output form found at start-up, but connections, caps and totals of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

import msgspec

from combee_fast.config import EndpointSpec, SamplingConfig, SessionConfig, TransportConfig
from combee_fast.errors import ConfigError
from combee_fast.endpoint.cache import CacheMode, ReplayCache
from combee_fast.endpoint.capabilities import Capabilities
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.endpoint.inflight import InFlight, Meters
from combee_fast.endpoint.pool import EndpointPool
from combee_fast.engine.events import EndpointsProbed, Events
from combee_fast.engine.slow_wait import said_if_slow
from combee_fast.redact import strip_userinfo
from combee_fast.roles.spec import Role, check_role_tables

Client = EndpointClient | EndpointPool
"""What serves one role: one client, or a pool of replicas of one model."""


class RoleClients(Mapping[str, Client]):
    """Which client serves which role (by the role's request name). One client may serve several roles."""

    def __init__(self, clients: Mapping[str, Client]) -> None:
        self._clients = dict(clients)

    @classmethod
    def single(cls, client: Client, roles: Sequence[Role]) -> RoleClients:
        """``client`` serving every one of ``roles``."""
        return cls({role.key: client for role in roles})

    def __getitem__(self, role: str) -> Client:
        try:
            return self._clients[role]
        except KeyError:
            raise ConfigError(f"no endpoint serves role {role!r} (the run's roles: {', '.join(self._clients)})") \
                from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._clients)

    def __len__(self) -> int:
        return len(self._clients)

    def distinct(self) -> tuple[Client, ...]:
        seen: dict[int, Client] = {}
        for client in self._clients.values():
            seen.setdefault(id(client), client)
        return tuple(seen.values())

    def replicas(self, role: str) -> tuple[EndpointClient, ...]:
        """The clients behind ``role``'s endpoint: each replica of a pool, else the one client."""
        return self.replicas_of(self[role])

    @staticmethod
    def replicas_of(client: Client) -> tuple[EndpointClient, ...]:
        return client.replicas if isinstance(client, EndpointPool) else (client,)

    def every_replica(self) -> tuple[EndpointClient, ...]:
        """Every replica of every distinct client, once each."""
        return tuple(replica for client in self.distinct() for replica in self.replicas_of(client))

    def in_flight(self, role: str) -> InFlight:
        """``role``'s calls in flight on its endpoint, over every replica (:mod:`~combee_fast.endpoint.inflight`;
        made here when the role has made no call yet)."""
        meters = self.replicas(role)[0].meters
        return meters.get(role) or meters.setdefault(role, InFlight())

    def requested_in_flight(self, role: str) -> int:
        """The calls ``role``'s endpoint may have in flight, as configured: ``transport.concurrency``
        of each of its replicas, summed."""
        return sum(replica.config.transport.concurrency for replica in self.replicas(role))

    @property
    def cache(self) -> ReplayCache | None:
        """The replay cache the clients read and record through (one per session), if any."""
        return self.every_replica()[0].cache if self._clients else None


class Fallback(NamedTuple):
    """Where the roles without a URL of their own are served: the local server, or the
    in-process simulated endpoint (``simulated``: never checked or probed)."""

    url: str
    name: str
    model: str
    transport: TransportConfig
    simulated: bool


class RoleEndpoint(msgspec.Struct, frozen=True):
    """One endpoint serving one or more roles: a replica per base URL serving its model, and what
    start-up found of each (``capabilities``: empty when not yet detected). ``simulated``: the
    in-process simulated endpoint (nothing to check or probe)."""

    replicas: tuple[EndpointConfig, ...]
    capabilities: tuple[Capabilities, ...] = ()
    simulated: bool = False


class RoleMap(msgspec.Struct, frozen=True):
    """Everything needed to rebuild a run's role clients and calls anywhere: the roles
    (``specs``), the distinct ``endpoints``, which one serves each role (``roles``: role request
    name -> index), the request seed's root, the base temperature, whether reflections see the
    target, and each role's sampling (by request name)."""

    specs: tuple[Role, ...]
    endpoints: tuple[RoleEndpoint, ...]
    roles: dict[str, int]
    seed: int
    temperature: float = 0.0
    use_ground_truth: bool = True
    sampling: dict[str, SamplingConfig] = msgspec.field(default_factory=dict)

    @classmethod
    def from_config(cls, config: SessionConfig, specs: Sequence[Role], fallback: Fallback | None = None, *,
                    learner: str = "the learner") -> RoleMap:
        """The role map ``config`` describes for the roles ``specs``; roles with no URL of their
        own go to ``fallback`` (the local server or the simulated endpoint). Roles naming the same
        URL, model and options share one endpoint, and so one concurrency cap. ConfigError for an
        endpoint or sampling table of a role ``learner`` does not call, or for some roles with a
        URL and others without (never a silent fall back to the simulator)."""
        check_role_tables(specs, endpoints=config.endpoints, sampling=config.sampling, learner=learner)
        specs_of = {role.key: config.endpoint_for(*role.lookup_keys) for role in specs}
        unserved = [role.name for role in specs if specs_of[role.key].url is None]
        if config.local is None and unserved and len(unserved) < len(specs):
            raise ConfigError(f"no endpoint for role {', '.join(unserved)}: give --endpoint (every role) or "
                              + " ".join(f"--role-endpoint {name}=URL" for name in unserved))
        endpoints: list[RoleEndpoint] = []
        index: dict[tuple[object, ...], int] = {}
        roles: dict[str, int] = {}
        for role in specs:
            spec = specs_of[role.key]
            key = (spec.url, spec.model, spec.api_key_env, spec.json_schema, spec.response_format, tuple(spec.replicas))
            if key not in index:
                index[key] = len(endpoints)
                endpoints.append(_endpoint(config, spec, fallback))
            roles[role.key] = index[key]
        return cls(tuple(specs), tuple(endpoints), roles, config.seed, use_ground_truth=config.use_ground_truth,
                   sampling={role.key: config.sampling_for(*role.lookup_keys) for role in specs})

    @classmethod
    def of_clients(cls, specs: Sequence[Role], clients: RoleClients, *, seed: int, temperature: float,
                   use_ground_truth: bool, sampling: Mapping[str, SamplingConfig]) -> RoleMap:
        """The role map of live clients, with what start-up found of each replica."""
        distinct = clients.distinct()
        index = {id(client): i for i, client in enumerate(distinct)}
        endpoints = tuple(
            RoleEndpoint(tuple(r.config for r in replicas), tuple(r.capabilities for r in replicas))
            for replicas in (clients.replicas_of(client) for client in distinct)
        )
        return cls(tuple(specs), endpoints, {role: index[id(clients[role])] for role in clients}, seed,
                   temperature=temperature, use_ground_truth=use_ground_truth, sampling=dict(sampling))


def _endpoint(config: SessionConfig, spec: EndpointSpec, fallback: Fallback | None) -> RoleEndpoint:
    """The endpoint of ``spec``: its URL and replicas, or ``fallback`` when it names no URL."""
    if spec.url is None:
        if fallback is None:
            raise ConfigError("a role has no endpoint URL and the session serves none")
        return RoleEndpoint((EndpointConfig(name=fallback.name, base_url=fallback.url, model=spec.model or fallback.model,
                                            json_schema=spec.json_schema, transport=fallback.transport,
                                            response_format=spec.response_format),), simulated=fallback.simulated)
    return RoleEndpoint(tuple(
        EndpointConfig(  # the name (ledgers, messages) never shows URL credentials
            name=strip_userinfo(url), base_url=url, model=spec.model or "sim", api_key_env=spec.api_key_env,
            json_schema=spec.json_schema, transport=config.transport, response_format=spec.response_format,
        )
        for url in (spec.url, *spec.replicas)
    ))


async def open_role_clients(role_map: RoleMap, stack: contextlib.AsyncExitStack, *,
                            cache: ReplayCache | None = None, check: bool = False,
                            events: Events | None = None) -> RoleClients:
    """One client per replica of every endpoint of ``role_map`` (an
    :class:`~combee_fast.endpoint.pool.EndpointPool` over several), closed by ``stack``, each
    emitting its waits and overloads on ``events``. With ``check``, each replica not detected
    yet is proved to serve its model and probed (:meth:`EndpointClient.check`,
    :meth:`EndpointClient.detect`), except under a ``replay`` cache, which sends no request
    (a replay needs no live endpoint); probes taking noticeable time are said on ``events``
    (:class:`~combee_fast.engine.events.EndpointsProbed`)."""
    replaying = cache is not None and cache.mode is CacheMode.REPLAY
    built: list[Client] = []
    unchecked: list[EndpointClient] = []
    for endpoint in role_map.endpoints:
        found = endpoint.capabilities or (None,) * len(endpoint.replicas)
        replicas = []
        meters: Meters = {}  # the replicas of one endpoint count their calls in flight together
        for config, capabilities in zip(endpoint.replicas, found):
            client = await stack.enter_async_context(
                EndpointClient(config, cache=cache, capabilities=capabilities, events=events, meters=meters))
            if check and capabilities is None and not endpoint.simulated and not replaying:
                unchecked.append(client)
            replicas.append(client)
        built.append(replicas[0] if len(replicas) == 1 else EndpointPool(replicas))
    if unchecked:
        urls = tuple(dict.fromkeys(strip_userinfo(client.config.base_url) for client in unchecked))
        await said_if_slow(_checked(unchecked), events,
                           lambda seconds: EndpointsProbed(urls, ("model", "structured output"), seconds))
    return RoleClients({role: built[index] for role, index in role_map.roles.items()})


async def _checked(clients: Sequence[EndpointClient]) -> None:
    """Prove each of ``clients`` serves its model and probe it, in order (the first failure raises)."""
    for client in clients:
        await client.check()
        await client.detect()
