"""The run's record of its episodes: :class:`TrajectoryJournal`, an executor around the backend.

- every trajectory the backend runs is an :class:`~combee_fast.engine.events.EpisodeFinished`
  event on the role calls' hub (a run directory writes it to ``trajectories.jsonl``, as a line of
  the ``traces`` task's format: :func:`trace_record`);
- a resumed run first gets the trajectories finished since its checkpoint's previous step
  (:meth:`~TrajectoryJournal.resume_from`): an episode whose key is among them is not run again,
  its stored trajectory is returned (a key stored ``n`` times answers its first ``n`` runs: GEPA
  grades a candidate on an example again with the same episode);
- a failed episode is an :class:`~combee_fast.engine.events.EpisodeFailed` event (a line of
  ``errors.jsonl``), and every model reply an agent found unusable is accounted as a failed call
  of its role (:meth:`~combee_fast.roles.calls.RoleCalls.note_unusable`: a ``CallFailed`` event);
- an episode a backend sends again after the worker running it was lost is the backend's
  :class:`~combee_fast.engine.events.EpisodeRerun` event on the same hub.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

from combee_fast.engine.events import EpisodeFailed, EpisodeFinished
from combee_fast.protocols.rollouts import RolloutExecutor
from combee_fast.roles.calls import RoleCalls
from combee_fast.roles.trajectory import render_trajectory
from combee_fast.rollouts.episode import Episode
from combee_fast.schema import Example, Trajectory
from combee_fast.tasks.traces import TraceRecord


def trace_record(trajectory: Trajectory, example: Example) -> TraceRecord:
    """``trajectory`` of an episode on ``example`` as a line of the ``traces`` task (with the
    whole trajectory in ``episode``)."""
    return TraceRecord(
        id=trajectory.key, task=example.input, trajectory=render_trajectory(trajectory),
        answer=trajectory.answer, score=trajectory.reward, feedback=trajectory.feedback,
        ground_truth=example.target, cited=trajectory.cited, episode=trajectory,
    )


class TrajectoryJournal:
    """A :class:`~combee_fast.protocols.RolloutExecutor` over ``inner`` (module docstring), whose
    agents' unusable replies are accounted on ``calls`` and whose events go to ``calls.events``.
    ``ran``: episodes run in this process; ``reused``: episodes answered from a resumed run's record."""

    def __init__(self, inner: RolloutExecutor, calls: RoleCalls) -> None:
        self.inner = inner
        self.calls = calls
        self.ran = 0
        self.reused = 0
        self._stored: dict[str, collections.deque[Trajectory]] = {}

    @property
    def capacity(self) -> int:
        return self.inner.capacity

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    def resume_from(self, trajectories: Iterable[Trajectory]) -> None:
        """Answer these episodes (by key, in the order they finished) from the record instead of
        running them."""
        self._stored = {}
        for trajectory in trajectories:
            self._stored.setdefault(trajectory.key, collections.deque()).append(trajectory)

    def _take(self, key: str) -> Trajectory | None:
        """The first stored trajectory of ``key`` not handed out yet (None: none is left)."""
        stored = self._stored.get(key)
        if not stored:
            return None
        trajectory = stored.popleft()
        if not stored:
            del self._stored[key]
        return trajectory

    async def run(self, episode: Episode) -> Trajectory:
        events = self.calls.events
        stored = self._take(episode.key)
        if stored is not None:
            self.reused += 1
            trajectory = stored
        else:
            trajectory = await self.inner.run(episode)
            self.ran += 1
            events.emit(EpisodeFinished(trajectory, episode.example))
            for step in trajectory.steps:
                if step.error is not None and step.raw is not None and step.usage.role:
                    self.calls.note_unusable(step.usage.role, step.error, step.raw)
        if trajectory.error is not None:
            events.emit(EpisodeFailed.of(trajectory))
        return trajectory
