"""ACE as a learner (a playbook), registered in :mod:`combee_fast.learners`.

- :mod:`.kind`: the registration (:class:`~.kind.AceKind`): methods, first artifact, files, evaluation.
- :mod:`.learner`: :class:`~.learner.AceLearner`, the playbook :class:`~combee_fast.protocols.Learner`
  (map, propose, merge, apply).
- :mod:`.chain`: the per-sample chain (generate, reflect, regenerate while wrong) and its trace.
- :mod:`.evaluate`: a playbook scored on held-out examples.
"""
