"""Latency model of a continuous-batching GPU inference server, in simulated seconds.

A request waits in a FIFO queue until one of ``max_running`` sequence slots is free. Once
admitted it spends a fixed phase of ``overhead_s + prompt_tokens / prefill_tokens_per_s``
(time to first token), then decodes its completion tokens. Every decoding sequence advances at
the same rate, one token per ``decode_s_per_token(n)`` seconds, where ``n`` is the number of
sequences running: the per-token latency grows linearly from ``decode_s_per_token`` with one
sequence to ``decode_s_per_token * full_batch_slowdown`` at ``max_running`` sequences, which is
how a memory-bandwidth-bound decode step slows as the batch grows.

Because all decoding sequences share one rate, the model keeps a single "decode progress"
counter (tokens each decoding sequence has produced since time 0) and a heap of the progress
at which each sequence finishes: an arrival or a completion costs O(log n).

:class:`BatchModel` is pure (no clock, no I/O): callers pass the simulated time in.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from itertools import count

import msgspec

from combee_fast.errors import ConfigError


LATENCY_MAX_S = 3600.0
"""The longest fixed phase a request may take, in simulated seconds (the presets: well under 10)."""


class LatencyPreset(msgspec.Struct, frozen=True):
    """Parameters of the latency model. ``max_running=None`` means unlimited capacity."""

    name: str
    overhead_s: float
    decode_s_per_token: float
    prefill_tokens_per_s: float | None = None  # None: prefill costs nothing
    max_running: int | None = None
    full_batch_slowdown: float = 1.0  # per-token latency multiplier at max_running sequences

    def __post_init__(self) -> None:
        if not (0 <= self.overhead_s <= LATENCY_MAX_S and 0 <= self.decode_s_per_token <= LATENCY_MAX_S):
            raise ConfigError(f"latency preset {self.name!r}: latencies must be numbers from 0 to {LATENCY_MAX_S:g} s, "
                              f"got {self.overhead_s!r} and {self.decode_s_per_token!r} a token")
        if self.prefill_tokens_per_s is not None and not 0 < self.prefill_tokens_per_s < math.inf:
            raise ConfigError(f"latency preset {self.name!r}: prefill_tokens_per_s must be a number > 0")
        if self.max_running is not None and self.max_running < 1:
            raise ConfigError(f"latency preset {self.name!r}: max_running must be >= 1")
        if not 1.0 <= self.full_batch_slowdown < math.inf:
            raise ConfigError(f"latency preset {self.name!r}: full_batch_slowdown must be >= 1")
        if self.max_running is None and self.full_batch_slowdown != 1.0:
            raise ConfigError(
                f"latency preset {self.name!r}: a load effect needs a finite max_running"
            )

    @classmethod
    def constant(cls, seconds: float) -> LatencyPreset:
        """Every request takes exactly ``seconds``, whatever its size or the load."""
        return cls(name=f"constant-{seconds:g}", overhead_s=seconds, decode_s_per_token=0.0)

    def time_per_token(self, running: int) -> float:
        """Decode seconds per token when ``running`` sequences share the GPU."""
        if self.max_running is None or self.max_running == 1:
            return self.decode_s_per_token
        fill = (min(running, self.max_running) - 1) / (self.max_running - 1)
        return self.decode_s_per_token * (1.0 + (self.full_batch_slowdown - 1.0) * max(fill, 0.0))

    def first_token_s(self, prompt_tokens: int) -> float:
        """Seconds from admission to the first decoded token."""
        prefill = 0.0 if self.prefill_tokens_per_s is None else prompt_tokens / self.prefill_tokens_per_s
        return self.overhead_s + prefill


FLAT = LatencyPreset(name="flat", overhead_s=0.4, decode_s_per_token=0.025)
"""The yardstick: 0.4 s + 0.025 s per completion token, no prefill cost, no load effect."""

H200_70B = LatencyPreset(
    name="h200-70b",
    overhead_s=0.05,
    prefill_tokens_per_s=8000.0,
    decode_s_per_token=0.030,
    max_running=96,
    full_batch_slowdown=1.8,
)
"""A 70B-class model (FP8 weights, ~70 GB) served by vLLM/SGLang on one H200 (141 GB HBM3e,
4.8 TB/s). Decode is bandwidth-bound: streaming 70 GB of weights per step bounds a step at
~15 ms; with attention, sampling and scheduling overhead a single sequence sees ~30 ms/token.
Larger batches add KV-cache reads and attention compute, so the step time grows to ~1.8x at a
full batch. ~55 GB remain for the KV cache; at ~320 KB of KV per token (80 layers, 8 KV heads,
head dim 128, FP16) that is ~170k tokens, i.e. ~96 sequences of ~1.8k tokens: max_running 96.
Prefill is compute-bound (~1 PFLOP/s usable FP8, ~140 GFLOP per token): ~8k tokens/s.
0.05 s covers HTTP, tokenisation and scheduling."""

HOSTED_API = LatencyPreset(
    name="hosted-api",
    overhead_s=0.45,
    prefill_tokens_per_s=20000.0,
    decode_s_per_token=0.012,
)
"""A hosted frontier-model API as seen from one client: ~0.45 s of network, queueing and
routing before the first token, fast prefill (~20k tokens/s across a large fleet), ~80 output
tokens/s per stream, and no visible load effect or capacity limit at our request rates (rate
limits show up as 429s, which the fault injection models)."""

PRESETS: dict[str, LatencyPreset] = {p.name: p for p in (FLAT, H200_70B, HOSTED_API)}


def resolve_preset(preset: str | LatencyPreset) -> LatencyPreset:
    """The preset itself, or the named one; an unknown name raises :class:`ConfigError`."""
    if isinstance(preset, LatencyPreset):
        return preset
    try:
        return PRESETS[preset]
    except KeyError:
        raise ConfigError(
            f"unknown latency preset {preset!r}; known: {', '.join(sorted(PRESETS))}"
        ) from None


class Job:
    """One request inside the model. ``finished_at`` is set when it completes."""

    __slots__ = ("arrival", "first_token_s", "decode_tokens", "admitted_at", "finished_at", "cancelled")

    def __init__(self, arrival: float, first_token_s: float, decode_tokens: float) -> None:
        self.arrival = arrival
        self.first_token_s = first_token_s
        self.decode_tokens = decode_tokens
        self.admitted_at: float | None = None
        self.finished_at: float | None = None
        self.cancelled = False

    @property
    def live(self) -> bool:
        return self.finished_at is None and not self.cancelled


class BatchModel:
    """The continuous-batching server state, advanced explicitly in simulated seconds."""

    def __init__(self, preset: LatencyPreset) -> None:
        self.preset = preset
        self._now = 0.0
        self._busy = 0.0
        self._progress = 0.0
        self._running = 0
        self._queued = 0
        self._waiting: deque[Job] = deque()
        self._ties = count()
        self._first_token_heap: list[tuple[float, int, Job]] = []
        self._decode_heap: list[tuple[float, int, Job]] = []

    @property
    def now(self) -> float:
        return self._now

    @property
    def running(self) -> int:
        return self._running

    def busy_until(self, now: float) -> float:
        """Simulated seconds up to ``now`` during which at least one sequence held a slot (its
        first-token phase or decode): the server's GPU busy time. Reading it changes nothing."""
        return self._busy + (max(now - self._now, 0.0) if self._running else 0.0)

    @property
    def queued(self) -> int:
        return self._queued

    def submit(self, job: Job, now: float) -> list[Job]:
        """Advance to ``now``, then enqueue ``job``; returns jobs that finished meanwhile."""
        finished = self.advance(now)
        self._waiting.append(job)
        self._queued += 1
        self._admit(finished)
        return finished

    def cancel(self, job: Job, now: float) -> list[Job]:
        """Withdraw a live job (its client went away); returns jobs that finished meanwhile."""
        finished = self.advance(now)
        if job.live:
            job.cancelled = True
            if job.admitted_at is None:
                self._queued -= 1
            else:
                self._running -= 1
            self._admit(finished)
        return finished

    def next_event_time(self) -> float | None:
        """Simulated time of the next admission-phase end or completion, if any."""
        self._drop_dead()
        times: list[float] = []
        if self._first_token_heap:
            times.append(self._first_token_heap[0][0])
        if self._decode_heap:
            remaining = max(self._decode_heap[0][0] - self._progress, 0.0)
            times.append(self._now + remaining * self.preset.time_per_token(self._running))
        return min(times) if times else None

    def advance(self, now: float) -> list[Job]:
        """Process every event up to ``now``; returns the jobs that finished, in order."""
        finished: list[Job] = []
        while True:
            event_time = self.next_event_time()
            if event_time is None or event_time > now:
                break
            if self._first_token_heap and self._first_token_heap[0][0] == event_time:
                self._move_to(event_time)
                _, _, job = heapq.heappop(self._first_token_heap)
                self._start_decode(job, finished)
            else:
                target, _, job = heapq.heappop(self._decode_heap)
                if self._running:
                    self._busy += event_time - self._now
                self._now = event_time
                self._progress = max(self._progress, target)
                self._finish(job, finished)
            self._admit(finished)
        self._move_to(max(now, self._now))
        return finished

    def _move_to(self, time: float) -> None:
        rate_time = self.preset.time_per_token(self._running)
        if rate_time > 0 and self._running:
            self._progress += (time - self._now) / rate_time
        if self._running:
            self._busy += time - self._now
        self._now = time

    def _start_decode(self, job: Job, finished: list[Job]) -> None:
        if job.decode_tokens <= 0 or self.preset.time_per_token(self._running) == 0:
            self._finish(job, finished)
        else:
            heapq.heappush(self._decode_heap, (self._progress + job.decode_tokens, next(self._ties), job))

    def _finish(self, job: Job, finished: list[Job]) -> None:
        job.finished_at = self._now
        self._running -= 1
        finished.append(job)

    def _admit(self, finished: list[Job]) -> None:
        capacity = self.preset.max_running
        while self._waiting and (capacity is None or self._running < capacity):
            job = self._waiting.popleft()
            if not job.live:
                continue
            self._queued -= 1
            job.admitted_at = self._now
            self._running += 1
            if job.first_token_s <= 0:
                self._start_decode(job, finished)
            else:
                heapq.heappush(
                    self._first_token_heap, (self._now + job.first_token_s, next(self._ties), job)
                )

    def _drop_dead(self) -> None:
        for heap in (self._first_token_heap, self._decode_heap):
            while heap and not heap[0][2].live:
                heapq.heappop(heap)


def job_for(preset: LatencyPreset, arrival: float, prompt_tokens: int, completion_tokens: int,
            scale: float = 1.0) -> Job:
    """A job for a request of the given size; ``scale`` stretches its work (latency jitter)."""
    if not math.isfinite(scale) or scale <= 0:
        raise ConfigError(f"job scale must be a positive number, got {scale!r}")
    return Job(arrival, preset.first_token_s(prompt_tokens) * scale, completion_tokens * scale)
