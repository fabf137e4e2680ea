"""A task with an agent world of its own, written outside ``combee_fast`` as a user's would be.

- :mod:`.panel`: the panel task: chores on a building's control panel (set one dial as the
  occasion needs), solved by acting in a small environment of its own, its world named by path.
- :mod:`.panel_world`: the panel's simulated world, in which the endpoint plays the agent; it
  names no learner.
- :mod:`.test_panel`: every built-in learner learns on it.
"""
