"""combee-notes: a learner, an executor backend and a task for combee_fast, written outside it.

- :mod:`.notes`: what the learner learns and deploys, :class:`~.notes.Notes` (one line each);
- :mod:`.calls`: its three roles (answer, critic, editor) and their calls;
- :mod:`.learner`: the :class:`~combee_fast.protocols.Learner` the generic methods drive;
- :mod:`.kind`: its registration, :data:`~.kind.NOTES` (seven members and a few of the optional);
- :mod:`.sim`: how the simulated endpoint answers its roles (its responders);
- :mod:`.executor`: a rollout executor backend of its own, :class:`~.executor.QueueExecutor`;
- :mod:`.task`: a task of its own, :func:`~.task.glossary` (capital cities).

Every module imports its siblings relatively, so the package works both installed
(``combee_notes``) and from a checkout (``tests.plugins.combee_notes``).
"""
