"""Rollouts made by agents acting in environments: the contract, the executors, the record.

- :mod:`.episode`: :class:`~.episode.Episode` (what is submitted), its life
  (:func:`~.episode.run_episode`: a fresh environment from a bounded pool, the agent, the check,
  the limits) and :class:`~.episode.EpisodeRun`, the engine's side of an agent's episode.
- :mod:`.step_limit`: a step's wall-clock limit, less the seconds its environment waits on its own
  model (a task's user simulator).
- :mod:`.contained`: agent code contained: a user's agent on a thread and loop of its own, and
  whatever it raises its episode's failure.
- :mod:`.spec`: :class:`~.spec.RolloutSpec`, what a backend needs to run episodes anywhere, and
  :func:`~.spec.build_runtime`.
- :mod:`.executors`: the backends by name (``executor.backend``), imported only when chosen;
  :mod:`.local` (on the engine's loop), :mod:`.process` (worker processes, with
  :mod:`.process_worker` their entry point) and :mod:`.ray_actors` (Ray actors, here or on a
  cluster; the ``ray`` extra).
- :mod:`.chat`: :class:`~.chat.AgentChat`, agents' model calls through the engine's client.
- :mod:`.attempts`: :class:`~.attempts.EpisodeAttempts`, a learner's attempts as episodes.
- :mod:`.journal`: :class:`~.journal.TrajectoryJournal`, finished trajectories recorded and a
  resumed run's reused, failed episodes reported.
- :mod:`.react`: the built-in ReAct agent (prompts in ``prompts/react_*.txt``).
- :mod:`.plugins`: ``package.module:factory`` paths of your own agent and environment.
"""
