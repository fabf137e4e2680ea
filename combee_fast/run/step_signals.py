"""What a finished step measured, for the live planner (:class:`~combee_fast.combee.planner.StepSignals`).

Everything comes from the step's own records, never from the endpoint's internals, so a run
replayed from the cache measures (and so decides) exactly what the recorded run did:

* **Requests in flight** during each map call, from the step's schedule: every chain starts when
  the worker pool gives it a slot (the list schedule of :mod:`combee_fast.engine.timing`) and runs
  its calls back to back (an agent episode's environment seconds are counted in its chain's
  duration, after its calls); a call's in-flight level is the mean number of calls running over its
  lifetime (itself included). A call that waited in a full server's queue overlapped many others,
  so its level tells the queue's length better than the count at its send time would.
* **Rewards** of the batch's first attempts: mean and variance (native ``moments``) and the
  Beta posterior of the success rate (native ``beta_rates``).
* **Diversity** of the step's lessons and of the edits its proposers proposed: how many are not
  near-duplicates of an earlier one (native ``near_duplicates``).
* **Retention** and the artifact's lessons in tokens (prefill cost of the next step).

Generic over the learner: traces are read through :class:`~combee_fast.protocols.Trace`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from combee_fast.combee.latency_curve import CallSample
from combee_fast.combee.planner import StepSignals
from combee_fast.engine.timing import finish_times
from combee_fast.methods.base import StepResult
from combee_fast.protocols.learning import EpisodeTrace
from combee_fast.schema import Usage
from combee_fast.tokens import estimate_tokens

DUPLICATE_SIMILARITY = 0.9
"""Two lessons at least this similar (hashed n-gram cosine) count as one."""


def scheduled_calls(traces: Sequence[Any], workers: int, rollout_role: str) -> tuple[list[CallSample], float, float, float]:
    """``(samples, map seconds, calls on the slowest chain, rollout share)`` of the map."""
    pairs = [([usage for usage, _ in t.call_outcomes()], _env_seconds(t)) for t in traces]
    chains = [chain for chain, _ in pairs if chain]
    if not chains:
        return [], 0.0, 0.0, 0.0
    durations = [sum(u.effective_latency_s for u in chain) + env if env else sum(u.effective_latency_s for u in chain)
                 for chain, env in pairs if chain]
    ends = finish_times(durations, workers)
    starts_at: list[float] = []
    ends_at: list[float] = []
    calls: list[Usage] = []
    for chain, end, duration in zip(chains, ends, durations):
        t = end - duration
        for usage in chain:
            starts_at.append(t)
            t += usage.effective_latency_s
            ends_at.append(t)
            calls.append(usage)
    starts = np.array(starts_at)
    in_flight = np.searchsorted(np.sort(starts), starts, side="right") - np.searchsorted(
        np.sort(np.array(ends_at)), starts, side="right")
    samples = [
        CallSample(float(k), u.prompt_tokens, u.completion_tokens, u.effective_latency_s)
        for u, k in zip(calls, in_flight)
    ]
    slowest = max(range(len(chains)), key=lambda i: ends[i])
    share = sum(u.role == rollout_role for u in calls) / len(calls)
    return samples, float(ends[slowest]), float(len(chains[slowest])), share


def _env_seconds(trace: Any) -> float:
    """An episode trace's environment seconds (0.0 for any other trace)."""
    return sum(e.env_seconds for e in trace.episodes()) if isinstance(trace, EpisodeTrace) else 0.0


def reward_statistics(rewards: Sequence[float]) -> dict[str, float]:
    """Mean, variance and the 90% Beta posterior interval of success of the first attempts."""
    from combee_fast.native.stats import beta_rates, moments

    if not rewards:
        return {}
    m = moments(np.array(rewards, dtype=np.float64))
    successes = float(sum(s >= 1.0 for s in rewards))
    posterior = beta_rates(np.array([successes]), np.array([len(rewards) - successes]))
    return {"reward_mean": m.mean, "reward_variance": m.variance(), "success_lower": float(posterior.lower[0]),
            "success_upper": float(posterior.upper[0])}


def distinct_count(texts: Sequence[str]) -> int:
    """How many of ``texts`` are not near-duplicates of an earlier one."""
    from combee_fast.native.similarity import near_duplicates

    texts = [t for t in texts if t.strip()]
    repeated = {j for _, j, _ in near_duplicates(texts, DUPLICATE_SIMILARITY)} if len(texts) > 1 else set()
    return len(texts) - len(repeated)


def step_signals(batch_size: int, result: StepResult[Any], *, workers: int, lessons: Callable[[Any], Sequence[str]],
                 rollout_role: str, retention: float | None) -> StepSignals:
    """The :class:`StepSignals` of ``result`` (CPU work: call it off the event loop)."""
    samples, map_seconds, depth, share = scheduled_calls(result.traces, workers, rollout_role)
    insights = [t for t in result.insights if t.strip()]
    edits = list(result.proposed)
    return StepSignals(
        batch_size=batch_size, seconds=result.sim_seconds, map_seconds=map_seconds, chain_calls=depth,
        calls=tuple(samples), playbook_tokens=sum(estimate_tokens(text) for text in lessons(result.artifact)),
        prefill_share=share, retention=retention, insights=len(insights), distinct_insights=distinct_count(insights),
        edits=len(edits), distinct_edits=distinct_count(edits),
        **reward_statistics(result.rewards),
    )
