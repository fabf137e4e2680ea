"""A fourth built-in learner, kept outside the package: :mod:`tests.learners.test_fourth_learner`
copies the package tree, writes this folder into it as ``combee_fast/memo/`` and adds one line to
the registry (``combee_fast/learners.py``). It learns a memo, one lesson a line, that the serving
role reads as its instructions.

- :mod:`.kind`: the registration (:class:`~.kind.MemoKind`): roles, first artifact, evaluation, files.
- :mod:`.learner`: the memo, its roles and :class:`~.learner.MemoLearner` (attempt, then one note).
- :mod:`.sim`: how the simulated endpoint answers its roles (the kind's ``responders``).
"""
