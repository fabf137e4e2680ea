"""ACE as a learner (a playbook), registered in :mod:`combee_fast.learners`.

- :mod:`.kind`: the registration (:class:`~.kind.AceKind`): methods, roles, first artifact, files,
  evaluation.
- :mod:`.roles`: ACE's four roles as it declares them (generator, reflector, curator, reducer).
- :mod:`.calls`: :class:`~.calls.AceCalls`, the four roles as async calls on the run's role calls.
- :mod:`.generator`, :mod:`.reflector`, :mod:`.curator`, :mod:`.reducer`: each role's messages,
  schema and parser (its system message is its prompt file in ``prompts/``; its user message is
  filled from a template there, with the content the task world and a real model read between tags).
- :mod:`.ops`: the operations format shared by the curator and the reducer.
- :mod:`.repeats`: a curator's or reducer's reply stopped at its first repeated operation.
- :mod:`.learner`: :class:`~.learner.AceLearner`, the playbook :class:`~combee_fast.protocols.Learner`
  (map, propose, merge, apply).
- :mod:`.online`: :class:`~.online.AceOnline`, the learner of rollouts submitted online (reflect only).
- :mod:`.chain`: the per-sample chain (generate, reflect, regenerate while wrong) and its trace.
- :mod:`.evaluate`: a playbook scored on held-out examples.
- :mod:`.sim`: how the simulated endpoint answers the four roles (the kind's ``responders``).
- :mod:`.records`: ACE's records: a reflection and its bullet tags, the playbook operations and
  their delta, a playbook's bullet.
- :mod:`.playbook`: the artifact, :class:`~.playbook.Playbook` (immutable snapshots, apply, text
  format, parsing, files, a run's delta log).
"""
