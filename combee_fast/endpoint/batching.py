"""The endpoint's batching curve: latency and generated tokens/s against requests sent at once.

:func:`measure_batching` sends ``c`` identical-shape short requests at once for each level ``c``
(1, 2, 4, ... up to the client's cap: its admission gate, which a server reporting its slots has
already lowered to them, and :data:`MAX_LEVEL`) and stops growing when generated tokens/s has
not risen (by :data:`RISE`) for :data:`FLAT_LEVELS` levels in a row, at the cap, when the next
level would pass the time budget, or at a failed call. The requests go through the client like
any call: accounted under the role :data:`PROBE_ROLE` (never the generator's or curator's), and
answered by the replay cache when the client has one.

Every figure comes from the calls' usage records: a call's latency is its effective latency
(simulated seconds on the simulated server, the planner's unit), its tokens are those the server
reported, and the budget is counted in the calls' recorded wall seconds. So a run replayed from
its cache measures the same curve, and its planner decides the same. The budget is also enforced
in real time: a level still running when it is spent is cancelled and left out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import msgspec

from combee_fast.config import BATCHING_PROBE_S, BATCHING_PROBE_TOKENS
from combee_fast.endpoint.calls import ChatRequest, ChatResult
from combee_fast.endpoint.client import EndpointClient
from combee_fast.schema import Message

PROBE_ROLE = "probe"
"""The role the probe's requests are sent and accounted as (``X-Combee-Role: probe``)."""

MAX_LEVEL = 64
"""The most requests the probe sends at once: past it the calls cost more than they tell (the
planner trusts batches up to ``controller.growth`` times the largest level measured)."""

RISE = 0.1
"""A level whose tokens/s is not this much above the best of the levels before it did not rise."""

FLAT_LEVELS = 2
"""Levels in a row that do not rise which end the growth. One is not enough: a CPU server's curve
can be flat from one request to two and rise at four (llama.cpp on 2 cores, the 0.5B model:
31.0, 29.4 and 54.9 tokens/s at 1, 2 and 4 in ``bench/real_model.py``; 27.6 and 26.3 at 1 and 2 in
a run's own probe, which then stopped at one)."""

PROBE_MESSAGES = (
    Message(role="system", content="You are a counter. Reply with numbers only."),
    Message(role="user", content="Count from 1 to 1000, one number per line."),
)
"""A short prompt whose answer runs to ``max_tokens``: every request generates about as much."""

STOPS = ("flat", "cap", "budget", "error", "off")
"""Why a curve stopped growing: tokens/s stopped rising; the largest level was measured; the
next level would pass the budget (or the budget ran out during it); a call failed; or no probe
was made (:func:`not_probed`)."""


class BatchingPoint(msgspec.Struct, frozen=True):
    """One level: ``concurrency`` requests sent at once; ``latency_s`` their mean latency;
    ``tokens_per_s`` the generated tokens of all of them over the slowest one's latency;
    ``prompt_tokens``/``completion_tokens`` per request (the mean the server reported)."""

    concurrency: int
    latency_s: float
    tokens_per_s: float
    prompt_tokens: int
    completion_tokens: int


class BatchingCurve(msgspec.Struct, frozen=True):
    """The measured levels, in order. ``best_concurrency``: the smallest level that no level
    rose above (by :data:`RISE`, the rule that ends the growth, so a curve that stopped flat
    after a level never names a later one); ``gain``: the peak tokens/s over the first level's
    (concurrency 1 unless ``levels`` said otherwise). ``stopped``: one of :data:`STOPS`; ``why``:
    one line saying what was left unmeasured and why (empty when the curve is complete). Without
    points (the first level failed or outlasted the budget): best concurrency 1, gain 1."""

    points: tuple[BatchingPoint, ...]
    best_concurrency: int
    gain: float
    stopped: str = "cap"
    why: str = ""

    @property
    def peak_tokens_per_s(self) -> float:
        """The most generated tokens/s of any level (0 without points)."""
        return _peak(self.points)

    @classmethod
    def of(cls, points: Sequence[BatchingPoint], *, stopped: str, why: str = "") -> BatchingCurve:
        """The curve of ``points``, with its best concurrency and gain."""
        if not points:
            return cls((), 1, 1.0, stopped, why)
        peak = _peak(points)
        best = min(p.concurrency for p in points if p.tokens_per_s == peak or peak < (1 + RISE) * p.tokens_per_s)
        base = points[0].tokens_per_s
        return cls(tuple(points), best, peak / base if base > 0 else 1.0, stopped, why)


def _peak(points: Sequence[BatchingPoint]) -> float:
    return max((p.tokens_per_s for p in points), default=0.0)


def not_probed(why: str) -> BatchingCurve:
    """The curve of an endpoint that was not probed, and why (``stopped`` is ``off``)."""
    return BatchingCurve.of((), stopped="off", why=f"not probed: {why}")


def probe_levels(cap: int) -> tuple[int, ...]:
    """1, 2, 4, ... below ``cap``, then ``cap`` itself."""
    levels, level = [], 1
    while level < cap:
        levels.append(level)
        level *= 2
    return (*levels, max(cap, 1))


def probe_cap(client: EndpointClient) -> int:
    """The most requests ``client`` puts on the wire at once, at most :data:`MAX_LEVEL`."""
    return max(1, min(client.gate.limit, client.config.transport.concurrency, MAX_LEVEL))


async def measure_batching(client: EndpointClient, *, levels: Sequence[int] | None = None,
                           budget_s: float = BATCHING_PROBE_S, max_tokens: int = BATCHING_PROBE_TOKENS,
                           record: Callable[[ChatResult], None] | None = None,
                           prompts: Sequence[Sequence[Message]] = (PROBE_MESSAGES,)) -> BatchingCurve:
    """The batching curve of ``client``'s endpoint (module docstring). ``levels``: the
    concurrencies to try, in order (default :func:`probe_levels` of :func:`probe_cap`; levels
    above the cap are not sent). A level is sent only when the seconds spent so far plus its
    expected seconds (the previous level's, scaled by the ratio of the levels: a server that
    does not batch at all) fit in ``budget_s``. ``record`` is told every finished call (its
    accounting). ``prompts``: what the requests send, the ``n``-th request of the probe
    ``prompts[n % len(prompts)]`` (default: :data:`PROBE_MESSAGES` every time, short; a bench
    measuring a workload's own ceiling sends that workload's prompts, as many as the probe sends
    requests, so no server-side prompt cache skips a prefill the workload pays). Never raises for endpoint failures: they end the curve
    (``stopped``, ``why``)."""
    if not prompts:
        raise ValueError("measure_batching: prompts must hold at least one prompt")
    cap = probe_cap(client)
    wanted = [c for c in (probe_levels(cap) if levels is None else levels) if 1 <= c <= cap]
    name = client.config.name
    started = time.perf_counter()
    points: list[BatchingPoint] = []
    spent = 0.0  # recorded wall seconds of the levels measured
    previous: tuple[int, float] | None = None  # (level, its recorded wall seconds)
    sent = 0  # requests sent so far (the next one's prompt index)
    for level in wanted:
        if previous is not None and spent + previous[1] * level / previous[0] > budget_s:
            return BatchingCurve.of(points, stopped="budget", why=(
                f"batching probe of endpoint {name!r}: concurrency {_levels(points)} measured; {level} at once "
                f"would pass the {budget_s:g} s budget (controller.probe_s), so the curve stops there"))
        try:
            async with asyncio.timeout(max(budget_s - (time.perf_counter() - started), 0.0)):
                results = await asyncio.gather(*(client.chat(_request(level, i, max_tokens, prompts[(sent + i) % len(prompts)]))
                                               for i in range(level)))
        except TimeoutError:
            return BatchingCurve.of(points, stopped="budget", why=(
                f"batching probe of endpoint {name!r}: {level} request(s) at once were still running when the "
                f"{budget_s:g} s budget (controller.probe_s) ran out; measured: concurrency {_levels(points)}"))
        sent += level
        if record is not None:
            for result in results:
                record(result)
        failed = [r.error for r in results if r.error is not None and r.error.kind != "truncated"]
        if failed:
            return BatchingCurve.of(points, stopped="error", why=(
                f"batching probe of endpoint {name!r}: a call at concurrency {level} failed "
                f"({failed[0].label}: {' '.join(failed[0].message.split())[:160]}); measured: concurrency "
                f"{_levels(points)}"))
        seconds = max(r.usage.latency_s for r in results)
        spent += seconds
        point = _point(level, results)
        points.append(point)
        last = range(len(points) + 1 - FLAT_LEVELS, len(points) + 1)  # the last FLAT_LEVELS levels, as prefixes
        if len(points) > FLAT_LEVELS and all(_not_rising(points[:end]) for end in last):
            return BatchingCurve.of(points, stopped="flat")
        previous = (level, seconds)
    return BatchingCurve.of(points, stopped="cap")


def _not_rising(points: Sequence[BatchingPoint]) -> bool:
    """Whether the last of ``points`` is not :data:`RISE` above the best of those before it."""
    return points[-1].tokens_per_s < (1 + RISE) * _peak(points[:-1])


def _request(level: int, index: int, max_tokens: int, messages: Sequence[Message]) -> ChatRequest:
    """Request ``index`` of ``level``, sending ``messages`` with a seed of its own (so no cache
    answers one request of the probe with another's result)."""
    return ChatRequest(role=PROBE_ROLE, messages=tuple(messages), max_tokens=max_tokens, temperature=0.0,
                       seed=level * (MAX_LEVEL + 1) + index)


def _point(level: int, results: Sequence[ChatResult]) -> BatchingPoint:
    latencies = [r.usage.effective_latency_s for r in results]
    completion = sum(r.usage.completion_tokens for r in results)
    slowest = max(latencies)
    return BatchingPoint(concurrency=level, latency_s=sum(latencies) / len(latencies),
                         tokens_per_s=completion / slowest if slowest > 0 else 0.0,
                         prompt_tokens=round(sum(r.usage.prompt_tokens for r in results) / len(results)),
                         completion_tokens=round(completion / len(results)))


def _levels(points: Sequence[BatchingPoint]) -> str:
    return ", ".join(str(p.concurrency) for p in points) or "none"
