"""The per-sample ACE chain: generate, reflect, and on failure regenerate with the reflection.

This is ACE's map: it runs against one frozen playbook snapshot and touches no shared state, so
many chains run in parallel. A chain's simulated duration is the sum of its calls' latencies
(they are strictly sequential) and of the environment time of its agent episodes.
:class:`SampleTrace` is a :class:`~combee_fast.protocols.Trace`.

An attempt is made by ``attempts`` (:class:`~combee_fast.protocols.Attempts`): one generator call
by default (``calls`` itself), or an agent episode whose rollout carries its trajectory; the
trace then counts every model call of the episode, and its environment seconds. A retry round's
attempt gets the reflection on the last one as its feedback text.
"""

from __future__ import annotations

import msgspec

from combee_fast.protocols.rollouts import Attempts
from combee_fast.ace.calls import AceCalls
from combee_fast.ace.generator import reflection_text
from combee_fast.ace.playbook import Playbook
from combee_fast.schema import CallError, Example, Rollout, Trajectory, Usage
from combee_fast.ace.records import Reflection


class SampleTrace(msgspec.Struct, frozen=True):
    """Everything one chain produced, in call order."""

    item_id: str
    rollouts: tuple[Rollout, ...]
    reflections: tuple[Reflection, ...]

    @property
    def final_reflection(self) -> Reflection | None:
        """The last usable reflection: the one the curator learns from."""
        for reflection in reversed(self.reflections):
            if reflection.error is None:
                return reflection
        return None

    @property
    def first_correct(self) -> bool:
        return bool(self.rollouts) and self.rollouts[0].correct

    @property
    def reward(self) -> float | None:
        """The score of the chain's first attempt, when it started in this trace (round 0)."""
        first = self.rollouts[0] if self.rollouts else None
        return first.score if first is not None and first.round == 0 else None

    def usages(self) -> list[Usage]:
        return [r.usage for r in self.rollouts] + [r.usage for r in self.reflections]

    def episodes(self) -> list[Trajectory]:
        """The agent episodes of this trace's attempts (collected rollouts' are not this run's)."""
        return [r.trajectory for r in self.rollouts if r.trajectory is not None and r.usage.role != "trace"]

    @property
    def env_seconds(self) -> float:
        """Seconds its agent episodes spent in their environments."""
        return sum(trajectory.env_seconds for trajectory in self.episodes())

    def call_outcomes(self) -> list[tuple[Usage, CallError | None]]:
        """``(usage, error)`` of each LLM call made, attempt and reflection in turn (an agent
        episode's attempt: each of its model calls; collected rollouts carry role "trace" and cost
        no call)."""
        ordered: list[Rollout | Reflection] = []
        for index in range(max(len(self.rollouts), len(self.reflections))):
            ordered += [*self.rollouts[index : index + 1], *self.reflections[index : index + 1]]
        outcomes: list[tuple[Usage, CallError | None]] = []
        for record in ordered:
            if record.usage.role == "trace":
                continue
            trajectory = getattr(record, "trajectory", None)
            if trajectory is not None:
                outcomes += trajectory.call_outcomes()
            else:
                outcomes.append((record.usage, record.error))
        return outcomes

    @property
    def sim_seconds(self) -> float:
        seconds = sum(usage.effective_latency_s for usage in self.usages())
        episodes = self.episodes()
        return seconds + sum(t.env_seconds for t in episodes) if episodes else seconds

    def errors(self) -> list[tuple[str, CallError]]:
        found = [(r.id, r.error) for r in self.rollouts if r.error is not None]
        found += [(r.id, r.error) for r in self.reflections if r.error is not None]
        return found


async def run_sample(
    calls: AceCalls,
    example: Example,
    playbook: Playbook,
    playbook_text: str,
    *,
    epoch: int,
    max_rounds: int,
    attempts: Attempts | None = None,
) -> SampleTrace:
    """ACE's generator-reflector loop on one example (``max_rounds`` regenerations at most);
    ``attempts`` makes each attempt (default: ``calls``' one generator call).

    The chain stops at the first failed call: what it produced so far is kept, with the error.
    """
    attempts = attempts or calls
    rollout = await attempts.attempt(example, playbook_text, version=playbook.version, epoch=epoch)
    first = SampleTrace(example.id, (rollout,), ())
    rest = await continue_sample(calls, first, playbook, playbook_text, epoch=epoch, max_rounds=max_rounds,
                                 attempts=attempts)
    return SampleTrace(example.id, (rollout, *rest.rollouts), rest.reflections)


def can_continue(trace: SampleTrace, max_rounds: int) -> bool:
    """True when the chain's last attempt was wrong, reflected on, and rounds remain."""
    last = trace.rollouts[-1]
    reflected = bool(trace.reflections) and trace.reflections[-1].rollout_id == last.id
    return (
        last.error is None and not last.correct and last.round < max_rounds
        and reflected and trace.reflections[-1].error is None
    )


async def continue_sample(
    calls: AceCalls,
    trace: SampleTrace,
    playbook: Playbook,
    playbook_text: str,
    *,
    epoch: int,
    max_rounds: int,
    attempts: Attempts | None = None,
) -> SampleTrace:
    """Run ``trace``'s chain on (reflect its last attempt if not yet done, then regenerate while
    wrong) up to ``max_rounds``; returns only the calls made here, as a trace of its own."""
    attempts = attempts or calls
    rollouts: list[Rollout] = []
    reflections: list[Reflection] = []
    rollout = trace.rollouts[-1]
    reflected = bool(trace.reflections) and trace.reflections[-1].rollout_id == rollout.id
    reflection = trace.reflections[-1] if reflected else None
    while rollout.error is None:
        if reflection is None:
            reflection = await calls.reflect(rollout, playbook, epoch=epoch)
            reflections.append(reflection)
        if rollout.correct or rollout.round >= max_rounds or reflection.error is not None:
            break
        rollout = await attempts.attempt(
            rollout.example, playbook_text, version=playbook.version, epoch=epoch, round_=rollout.round + 1,
            previous=rollout, feedback=reflection_text(reflection),
        )
        rollouts.append(rollout)
        reflection = None
    return SampleTrace(trace.item_id, tuple(rollouts), tuple(reflections))


async def reflect_only(calls: AceCalls, rollout: Rollout, playbook: Playbook, *, epoch: int) -> SampleTrace:
    """The map for rollouts that already exist (collected traces, online submissions)."""
    reflection = await calls.reflect(rollout, playbook, epoch=epoch)
    return SampleTrace(rollout.id, (rollout,), (reflection,))
