"""The run's record: the run directory and every file in it, the state a checkpoint keeps, the
ledger, and where a run came from. Nothing here runs a step; the loop (:mod:`combee_fast.run`)
writes through it and ``combee show``, ``compare`` and resume read through it.

- :mod:`.rundir`: the run directory, the only writer and reader of run files, and its lock.
- :mod:`.swap`: the journaled replacement of a previous run, recoverable after a kill.
- :mod:`.state`: :class:`~.state.TrainState`, what the loop works on and a checkpoint keeps; the epoch order.
- :mod:`.checkpoint`: the state written after every step (typed, checksummed), and read back to resume.
- :mod:`.ledger`: one row per step (time, calls, tokens per role, errors, accuracy, predicted seconds).
- :mod:`.concurrency`: calls in flight per role, requested and achieved, and a role held below its cap.
- :mod:`.bounds`: the ranges a stored run's counts, seconds and scores must fall in when decoded.
- :mod:`.provenance`: version, commit, host, command line, times, seed and splits of a run.
- :mod:`.usage`: the per-split usage record of an experiment card, in the state directory.
"""
