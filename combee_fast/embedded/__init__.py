"""Online learners embedded in an agent server, one per place the learner's work runs; each is
a :class:`~combee_fast.protocols.EmbeddedLearner` over the same core, so the same submissions
give the same batches, the same artifact and the same release decisions.

- :mod:`.online`: :class:`~.online.OnlineLearner`, on the host's own event loop (the core).
- :mod:`.threaded`: :class:`~.threaded.ThreadedLearner`, on its own loop in a daemon thread.
- :mod:`.process`: :class:`~.process.ProcessLearner`, in a child process (the host side and the wire).
- :mod:`.process_worker`: the child process's side (``python -m combee_fast.embedded.process_worker``).
- :mod:`.release`: the release gate the core holds (policies none, shadow, staged, hold; anytime-valid
  decisions; rollback), mirrored on the host by the threaded and process learners.
- :mod:`.release_plan`: how many requests and keys the gate's decisions need (a planning figure).
- :mod:`.intake`: the check every submitted rollout passes on the host before a learner takes it.
- :mod:`.host_settings`: the process-wide GC/GIL settings an embedded learner changes and restores.
- :mod:`.events`: what an embedded learner emits beside the engine's events (its batches, the
  release gate's decisions and status).
- :mod:`.metrics`: a consumer of those events serving an online learner's figures as a Prometheus endpoint.
"""
