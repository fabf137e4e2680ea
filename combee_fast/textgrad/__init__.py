"""TextGrad as a learner (a prompt variable learned by textual gradients), registered in
:mod:`combee_fast.learners`.

- :mod:`.kind`: the registration (:class:`~.kind.TextGradKind`): methods, first artifact, files, evaluation.
- :mod:`.learner`: :class:`~.learner.TextGradLearner`, the :class:`~combee_fast.protocols.Learner`
  the generic methods drive (map: forward, loss, gradient; propose: an optimizer step; merge: a
  reduce call; apply: the line edits).
- :mod:`.online`: :class:`~.online.TextGradOnline`, the learner of rollouts submitted online
  (loss and gradient per rollout, no forward again).
- :mod:`.calls`: the role calls (forward, loss, gradient, step, reduce; prompts in ``prompts/``).
- :mod:`.variable`: the prompt variable (named parts, read as lines) and its line edits.
- :mod:`.evaluate`: a prompt variable scored on held-out examples.
- :mod:`.sim`: how the simulated endpoint answers the five roles (the kind's ``responders``).
"""
