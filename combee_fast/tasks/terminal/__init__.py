"""The terminal task: shell and data chores an agent solves in a sandbox.

- :mod:`.task`: :class:`~.task.TerminalTask`, its pinned splits and its environment factory.
- :mod:`.environment`: the environment of one episode (one sandbox session, the ``run`` tool).
- :mod:`.chores`: one chore (set-up files, instruction, checks, oracle, mistakes) and its grading.
- :mod:`.families`: the chore families (the knowledge units) and their seeded generators.
- :mod:`.generate`: writes the split files from the families.
"""
