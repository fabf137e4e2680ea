"""The run machinery around the learning methods.

- :mod:`.train`: offline epochs, validation, best-playbook tracking.
- :mod:`.batch_plans`: fixed batch size, or the controller (``--batch-size auto``).
- :mod:`.online`: the online learner for agent servers (submit rollouts, read the playbook).
- :mod:`.evaluate`: held-out evaluation of a playbook.
- :mod:`.ledger`: one row per step (time, calls, tokens per role, errors, accuracy).
- :mod:`.rundir`: the run directory's files.
"""
