"""A Prometheus metrics endpoint: an :class:`~combee_fast.embedded.events.Events` consumer that keeps an
online learner's figures and serves them over HTTP (the optional ``prometheus-client`` package:
``pip install 'combee_fast[metrics]'``).

    metrics = MetricsEndpoint(port=9464)            # port 0: a free one (metrics.url)
    async with ProcessLearner(agents, playbook, config, events=Events(metrics)) as learner: ...
    metrics.close()

Figures (``combee_`` prefix), from the learner's events:

- ``release_version_in_service``, ``release_candidate_version`` (-1: none),
  ``release_candidate_share``: from every release decision and status;
- ``release_rewards{version}``, ``release_reward_mean{version}``, ``release_reward_lower{version}``,
  ``release_reward_upper{version}``: the rewards submitted per version with their anytime-valid
  interval (the versions the learner keeps; a version it drops leaves the figures);
- ``release_decisions_total{decision}``, and ``release_decision_lower``/``_upper``: the
  evidence interval of the latest decision;
- ``release_shadow_calls``, ``release_shadow_tokens``: the cost of shadow re-runs;
- ``release_next_decision_requests`` and ``release_next_decision_more`` (-1: nothing is waited
  for, or not within the plan's limit): from every status, the requests seen towards the next
  decision and about how many more it needs, an estimate for an equal candidate
  (:class:`~combee_fast.embedded.events.NextDecision`);
- ``learner_queue_depth``, ``learner_version``, ``learner_batches_total``, and the histograms
  ``learner_batch_seconds`` and ``learner_publish_latency_seconds``.

The HTTP server runs in a daemon thread of its own; the consumer only sets numbers, so it is
cheap on the emitter's thread and safe from any thread.
"""

from __future__ import annotations

import threading
from typing import Any

from combee_fast.embedded.events import BatchApplied, EmbeddedEvent, ReleaseDecision, ReleaseStatus, VersionApplied
from combee_fast.errors import ConfigError

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Bucket bounds (seconds) of the batch and publish latency histograms."""


class MetricsEndpoint:
    """Serves an online learner's figures on ``http://host:port/metrics`` (module docstring)."""

    def __init__(self, *, port: int = 0, host: str = "127.0.0.1", namespace: str = "combee") -> None:
        try:
            import prometheus_client as prometheus
        except ImportError:
            raise ConfigError("the metrics endpoint needs the prometheus-client package: "
                              "pip install 'combee_fast[metrics]'") from None
        self.registry = prometheus.CollectorRegistry()

        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Any:
            return prometheus.Gauge(name, doc, labels, namespace=namespace, registry=self.registry)

        self._in_service = gauge("release_version_in_service", "The version serving requests (the incumbent).")
        self._candidate = gauge("release_candidate_version", "The candidate under release (-1: none).")
        self._share = gauge("release_candidate_share", "The share of requests the candidate serves.")
        self._rewards = gauge("release_rewards", "Rewards submitted for a version.", ("version",))
        self._mean = gauge("release_reward_mean", "Mean reward of a version.", ("version",))
        self._lower = gauge("release_reward_lower", "Lower end of a version's anytime-valid reward interval.",
                            ("version",))
        self._upper = gauge("release_reward_upper", "Upper end of a version's anytime-valid reward interval.",
                            ("version",))
        self._decisions = prometheus.Counter("release_decisions", "Release decisions, by decision.", ("decision",),
                                             namespace=namespace, registry=self.registry)
        self._decision_lower = gauge("release_decision_lower", "Lower end of the latest decision's interval "
                                     "(candidate minus incumbent).")
        self._decision_upper = gauge("release_decision_upper", "Upper end of the latest decision's interval.")
        self._shadow_calls = gauge("release_shadow_calls", "Shadow re-runs made.")
        self._shadow_tokens = gauge("release_shadow_tokens", "Tokens of the shadow re-runs.")
        self._next_seen = gauge("release_next_decision_requests", "Requests seen towards the release's next decision.")
        self._next_more = gauge("release_next_decision_more", "About how many more requests the release's next "
                                "decision needs, for an equal candidate (-1: none waited for or beyond the plan).")
        self._queue = gauge("learner_queue_depth", "Rollouts waiting to be learned.")
        self._version = gauge("learner_version", "The latest version learned.")
        self._batches = prometheus.Counter("learner_batches", "Batches applied.", namespace=namespace,
                                           registry=self.registry)
        self._batch_s = prometheus.Histogram("learner_batch_seconds", "Seconds learning one batch.",
                                             namespace=namespace, registry=self.registry, buckets=LATENCY_BUCKETS)
        self._publish_s = prometheus.Histogram("learner_publish_latency_seconds", "Seconds from when a batch could "
                                               "start forming to its publish.", namespace=namespace,
                                               registry=self.registry, buckets=LATENCY_BUCKETS)
        self._candidate.set(-1)
        self._next_more.set(-1)
        self._versions: set[str] = set()
        self._lock = threading.Lock()
        self._server, self._thread = prometheus.start_http_server(port, addr=host, registry=self.registry)
        self.host, self.port = host, self._server.server_port

    @property
    def url(self) -> str:
        """Where the figures are served."""
        return f"http://{self.host}:{self.port}/metrics"

    def __call__(self, event: EmbeddedEvent) -> None:
        if isinstance(event, ReleaseStatus):
            self._status(event)
        elif isinstance(event, ReleaseDecision):
            self._decisions.labels(event.decision).inc()
            lower, upper = event.evidence.get("lower"), event.evidence.get("upper")
            if lower is not None and upper is not None:
                self._decision_lower.set(lower)
                self._decision_upper.set(upper)
            if event.decision in ("candidate", "widen"):
                self._candidate.set(event.candidate)
                self._share.set(event.evidence.get("next_share", event.evidence.get("share", 0.0)))
            else:  # promoted or rolled back: no candidate until the next one
                self._candidate.set(-1)
                self._share.set(0.0)
                if event.decision in ("promote", "approve"):
                    self._in_service.set(event.candidate)
        elif isinstance(event, BatchApplied):
            self._batches.inc()
            self._queue.set(event.waiting)
            self._batch_s.observe(event.batch_s)
            self._publish_s.observe(event.publish_s)
        elif isinstance(event, VersionApplied):
            self._version.set(event.version)

    def _status(self, status: ReleaseStatus) -> None:
        self._in_service.set(status.incumbent)
        self._candidate.set(-1 if status.candidate is None else status.candidate)
        self._share.set(status.share)
        self._queue.set(status.queued)
        self._shadow_calls.set(status.shadow_calls)
        self._shadow_tokens.set(status.shadow_tokens)
        waits = status.next_decision
        self._next_seen.set(0 if waits is None else waits.requests)
        self._next_more.set(-1 if waits is None or waits.more is None else waits.more)
        with self._lock:
            current = set()
            for rewards in status.rewards:
                label = str(rewards.version)
                current.add(label)
                self._rewards.labels(label).set(rewards.count)
                self._mean.labels(label).set(rewards.mean)
                self._lower.labels(label).set(rewards.lower)
                self._upper.labels(label).set(rewards.upper)
            for label in self._versions - current:
                for family in (self._rewards, self._mean, self._lower, self._upper):
                    family.remove(label)
            self._versions = current

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
