"""The run machinery around the learning methods.

- :mod:`.train`: offline epochs, validation, best-playbook tracking.
- :mod:`.batch_plans`: fixed batch size, or the controller (``--batch-size auto``).
- :mod:`.online`: the online learner for agent servers (submit rollouts, read the playbook).
- :mod:`.threaded`: the online learner on its own event loop in its own thread.
- :mod:`.process`, :mod:`.process_worker`: the online learner in a child process (host and child sides).
- :mod:`.host_settings`: the process-wide GC/GIL settings an embedded learner changes and restores.
- :mod:`.evaluate`: held-out evaluation of a playbook.
- :mod:`.ledger`: one row per step (time, calls, tokens per role, errors, accuracy).
- :mod:`.rundir`: the run directory's files.
"""
