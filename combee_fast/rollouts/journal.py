"""The run's record of its episodes: :class:`TrajectoryJournal`, an executor around the backend.

- every trajectory is handed, as it finishes, to :attr:`~TrajectoryJournal.on_finished` (the
  run directory writes it to ``trajectories.jsonl``, as a line of the ``traces`` task's format:
  :func:`trace_record`);
- a resumed run first gets the trajectories finished since its checkpoint's previous step
  (:meth:`~TrajectoryJournal.resume_from`): an episode whose key is among them is not run again,
  its stored trajectory is returned (a key stored ``n`` times answers its first ``n`` runs: GEPA
  grades a candidate on an example again with the same episode);
- a failed episode goes to :attr:`~TrajectoryJournal.on_failed` (``errors.jsonl``, an
  ``EpisodeFailed`` event), and every model reply an agent found unusable to
  :attr:`~TrajectoryJournal.on_unusable` (accounted as a failed call of its role);
- an episode a backend sent again after the worker running it was lost (the ``ray`` backend's
  ``on_rerun``) is counted in :attr:`~TrajectoryJournal.reruns` and handed to
  :attr:`~TrajectoryJournal.on_rerun`.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable

from combee_fast.protocols.rollouts import RolloutExecutor
from combee_fast.roles.trajectory import render_trajectory
from combee_fast.rollouts.episode import Episode
from combee_fast.schema import CallError, Trajectory
from combee_fast.tasks.traces import TraceRecord


def trace_record(trajectory: Trajectory, episode: Episode) -> TraceRecord:
    """``trajectory`` as a line of the ``traces`` task (with the whole trajectory in ``episode``)."""
    return TraceRecord(
        id=trajectory.key, task=episode.example.input, trajectory=render_trajectory(trajectory),
        answer=trajectory.answer, score=trajectory.reward, feedback=trajectory.feedback,
        ground_truth=episode.example.target, bullet_ids=trajectory.cited, episode=trajectory,
    )


class TrajectoryJournal:
    """A :class:`~combee_fast.protocols.RolloutExecutor` over ``inner`` (module docstring).
    ``ran``: episodes run in this process; ``reused``: episodes answered from a resumed run's record;
    ``reruns``: episodes the backend sent again after losing the worker running them."""

    def __init__(self, inner: RolloutExecutor) -> None:
        self.inner = inner
        self.on_finished: Callable[[Trajectory, Episode], None] | None = None
        self.on_failed: Callable[[Trajectory], None] | None = None
        self.on_unusable: Callable[[str, CallError, str | None], None] | None = None
        self.on_rerun: Callable[[Episode, str], None] | None = None
        self.ran = 0
        self.reused = 0
        self.reruns = 0
        self._stored: dict[str, collections.deque[Trajectory]] = {}
        if hasattr(inner, "on_rerun"):  # a backend that re-runs the episodes of a lost worker
            inner.on_rerun = self._rerun

    def _rerun(self, episode: Episode, why: str) -> None:
        self.reruns += 1
        if self.on_rerun is not None:
            self.on_rerun(episode, why)

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
        stored = self._take(episode.key)
        if stored is not None:
            self.reused += 1
            trajectory = stored
        else:
            trajectory = await self.inner.run(episode)
            self.ran += 1
            if self.on_finished is not None:
                self.on_finished(trajectory, episode)
            if self.on_unusable is not None:
                for step in trajectory.steps:
                    if step.error is not None and step.raw is not None and step.usage.role:
                        self.on_unusable(step.usage.role, step.error, step.raw)
        if trajectory.error is not None and self.on_failed is not None:
            self.on_failed(trajectory)
        return trajectory
